"""report.md: the issue-ready report of a reduction, around its repro.py."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

import torch
import torch.fx as fx

import minimize
from minimize.emit.script import (INPUTS_FILE, ReproInfo, calls, forward_source, nodes, output_values,
                                  reference_words, retitled, sentence, tensor_expressions)
from minimize.emit.snippet import renamed_apart, snippet_source, taken_names
from minimize.program.libraries import IMPORT_COPY_PREFIX, import_copies
from oracles.backends.base import Backend
from oracles.errors import without_colours, without_scratch_folders
from oracles.out_folder import PLUGIN_COPY_PREFIX, emitted_names
from oracles.verdict import Verdict


def report_snippet(info: ReproInfo, gm: fx.GraphModule, inputs: dict[str, Any], constants: dict[str, Any],
                   backend: Backend, generated: dict[str, str] | None = None) -> str | None:
    """The reduced program as straight-line eager code for the report (minimize/emit/snippet.py)."""
    big: dict[str, torch.Tensor] = {}
    exprs = tensor_expressions({**inputs, **constants}, generated, big)
    tensors = {n: (e, isinstance(v, torch.Tensor)) for (n, v), e in zip({**inputs, **constants}.items(), exprs.values())}
    dynamic = dynamic_words(info)
    call = None if dynamic else backend.snippet_call(list(inputs), info.verdict)
    libraries = (*info.imports, *backend.program_imports(gm))  # the program's custom ops, then the backend's kernels
    forward, renames = renamed_apart(forward_source(gm), tensors, taken_names(call, libraries))  # f: f_ here
    if renames:
        tensors = {renames.get(n, n): made for n, made in tensors.items()}
        call = None if dynamic else backend.snippet_call([renames.get(n, n) for n in inputs], info.verdict)
    failure = _short_failure(info.verdict)
    return snippet_source(forward, tensors, INPUTS_FILE if big else None, info.device,
                          failure if call else f"compiled with {backend.describe_shared()}{', ' + dynamic if dynamic else ''}: "
                          f"{failure}", call, tuple(renames.get(n, n) for n in inputs),
                          compare_line(info, output_values(gm)) if call else "", libraries)


def compare_line(info: ReproInfo, outputs: Sequence[Any] | None = None) -> str:
    """For a bug in the values, the assert that raises where the backend's outputs `got`
    are off from eager's `out` by trtmin's tolerances, on any device or dtype the backend
    returns them in (ONNX Runtime's on the host, TensorRT's int32 for int64). Where the bug
    is judged against a float64 run (eager's own error is the yardstick there), a print of
    how far the output is off. Empty where it is no mismatch, or where an output
    (`outputs`: the graph's example values) is no real tensor. On any device: TensorRT's
    engine writes GPU buffers for a --device cpu run (measured on the H200, 2026-12-05);
    rtol 0 where every output is an integer."""
    if info.verdict.kind not in ("mismatch", "nan"):
        return ""
    if outputs is not None and not all(isinstance(v, torch.Tensor) and not v.is_complex() for v in outputs):
        return ""  # a number, or a complex value a compiler returns as its real view: trtmin judges those itself
    if info.reference == "float64":  # no assert: eager's own error is the yardstick; the size is shown
        i = info.verdict.output
        return "" if i is None or info.verdict.kind != "mismatch" else (
            f"print(\"output {i} differs from eager by\", float((got[{i}].cpu().double() - out[{i}].cpu().double()).abs().max()))")
    integers = outputs is not None and not any(v.is_floating_point() for v in outputs)
    return (f"torch.testing.assert_close(got, out, atol={info.atol!r}, rtol={0.0 if integers else info.rtol!r}, "
            "equal_nan=True, check_device=False, check_dtype=False)")  # integers do not round, as for trtmin


def dynamic_words(info: ReproInfo) -> str:
    """'linear's dim 0 dynamic': what the compile keeps dynamic, as the program was exported."""
    return "; ".join(f"{name}'s dim{'s' if len(dims) > 1 else ''} {', '.join(map(str, dims))}"
                     for name, dims in info.dynamic.items()) + " dynamic" if info.dynamic else ""


def _short_failure(v: Verdict) -> str:
    """The failure in a few words, as our users comment their snippets ("TRT differs by 1.01")."""
    if v.kind == "mismatch" and v.lost_words():
        return f"output {v.output} {v.lost_words()}"
    if v.kind == "mismatch":  # no max abs where the backend's output is another shape or no tensor
        return (f"output {v.output} differs from eager by {v.max_abs:.4g}" if v.max_abs is not None
                else f"output {v.output} differs from eager" + (f" ({v.detail})" if v.detail else ""))
    if v.kind == "nan":
        return f"output {v.output} is non-finite where eager is finite"
    text = without_scratch_folders(v.describe())  # before the cut, which leaves half a folder the report's pass misses
    return text if len(text) <= 120 else text[:117] + "..."


def _diagnosis_lines(summary: dict[str, Any]) -> str:
    """What the passes found, for the maintainer: the first value off, the engine, the
    converter, the settings."""
    notes = summary.get("diagnosis") or {}
    lines = []
    if "named_node" in notes:
        lines.append(f"- The compiler's error names the node it failed on: {notes['named_node']} (the search "
                     "started there).")
    minimal = notes.get("one_minimal")
    if minimal and minimal.get("proven") and not minimal.get("cuts_tried"):
        lines.append("- 1-minimal: a single op is left.")
    elif minimal and minimal.get("proven"):
        lines.append(f"- 1-minimal: no single call node can be cut with the bug still there (each of the "
                     f"{minimal['cuts_tried']} one-node cuts was tried, with the program's own values, before "
                     "the made values and smaller sizes).")
    if "backend" in notes:
        lines.append(f"- Backend: {notes['backend']}.")
    if "original_symptom" in notes:
        lines.append(f"- Symptom: {notes['original_symptom']}.")
    elif summary.get("original_verdict") not in (None, summary.get("final_verdict")):  # the user's, to tie it to
        lines.append(f"- The original program failed as {sentence(summary['original_verdict'])}")
    if "read_off" in notes:
        lines.append(f"- What the failing ops read: {notes['read_off']}.")
    if "timed_out" in notes:
        lines.append(f"- Timeouts: {notes['timed_out']}.")
    if "shrank" in notes:
        lines.append(f"- Size: {notes['shrank']}.")
    if "undefined_cast" in notes:
        lines.append(f"- Undefined cast: {notes['undefined_cast']}.")
    if "made_inputs" in notes:
        lines.append(f"- Inputs: {notes['made_inputs']}.")
    if "random_draws" in notes:
        lines.append(f"- Values fed in: {notes['random_draws']}.")
    if "delegation" in notes:
        lines.append(f"- Delegation: {notes['delegation']}.")
    if "exported_model" in notes:
        lines.append(f"- Exported model: {notes['exported_model']}.")
    if "static" in notes:
        lines.append(f"- Dynamic sizes: {notes['static']}.")
    if "in_place" in notes:
        lines.append(f"- In-place ops: {notes['in_place']}.")
    if "precision" in notes:
        lines.append(f"- Precision: {notes['precision']}.")
    if "first_off_value" in notes:
        what = (f"first {notes['localized_nodes']:,} of the {notes['localized_prefix_of']:,} nodes are"
                if "localized_prefix_of" in notes else f"{notes.get('localized_nodes', '?')}-node program is")
        cut = " The reduction cut it: the bug shows without it." if notes.get("first_off_value_cut") else ""
        lines.append(f"- First value off when the {what} compiled with every value an output: "
                     f"{notes['first_off_value']}.{cut}")
    elif "localization" in notes:
        lines.append(f"- Localization: {notes['localization']}.")
    if "failing_engine" in notes:
        lines.append(f"- Failing engine: {notes['failing_engine']} (each engine was run alone, the rest in PyTorch).")
    if isinstance(notes.get("culprit_ops"), list):
        ops = ", ".join(f"`{o}`" for o in notes["culprit_ops"])
        lines.append(f"- Culprit converter: forcing {ops} to run in PyTorch makes the bug vanish.")
    elif notes.get("culprit_ops"):
        lines.append(f"- Culprit converter: not isolated ({notes['culprit_ops']}).")
    if "lowering" in notes:
        lines.append(f"- Lowering: {notes['lowering']}.")
    if "settings_needed" in notes:
        needed = ", ".join(f"`{k}={v}`" for k, v in notes["settings_needed"].items()) or "none"
        lines.append(f"- Settings the bug needs: {needed}; dropped as irrelevant: "
                     f"{', '.join(f'`{k}`' for k in notes.get('settings_dropped', [])) or 'none'}.")
    made, shrunk = summary.get("generated_values") or {}, summary.get("shrunk_shapes") or {}
    sliced = set(summary.get("sliced_values") or ())  # the original's first values, not made ones

    def changes(names: Iterable[str]) -> str:
        return ", ".join(f"`{n}` {tuple(shrunk[n][0])} → {tuple(shrunk[n][1])}" for n in names if n in shrunk)
    if made:
        smaller = changes(made)
        lines.append(f"- The bug does not need the original values of {', '.join(f'`{n}`' for n in made)}: the script "
                     f"makes them (seeded, of the same {'dtype' if smaller else 'shape, dtype'} and scale).")
        if smaller:
            lines.append(f"- Nor their sizes: the script makes them smaller, {smaller}.")
    if sliced & set(shrunk):
        lines.append(f"- {'Nor all' if made else 'The bug does not need all'} the values of {', '.join(f'`{n}`' for n in sorted(sliced & set(shrunk)))}: the "
                     f"script keeps their first ones, {changes(sorted(sliced))}.")
    if summary.get("shrunk_sizes"):
        sizes = ", ".join(f"{old} → {new}" for old, new in summary["shrunk_sizes"].items())
        lines.append(f"- Sizes the graph's ops take as arguments shrank where the bug does not need them: {sizes}.")
    return ("## Diagnosis\n\n" + "\n".join(lines) + "\n\n") if lines else ""


def _values_section(verdict: Verdict) -> str:
    """A mismatch's first values off, eager's beside the backend's."""
    off = verdict.extra.get("first_off") if verdict.kind == "mismatch" else None
    if not off or not off.get("index"):
        return ""
    exact = off.get("float64")  # --reference float64: the run each is judged against
    columns = [off["index"], off["eager"], off["backend"]] + ([exact] if exact else [])

    def cell(k: int, v: Any) -> str:
        return (str(tuple(v) if len(v) != 1 else v[0]) if k == 0 else
                format(v, ".6g") if k == 3 and not isinstance(v, str) else str(v))
    rows = "\n".join("| " + " | ".join(cell(k, v) for k, v in enumerate(row)) + " |" for row in zip(*columns))
    head = ["index", "eager", "backend"] + (["float64 run"] if exact else [])
    return (f"The first values off in output {verdict.output}:\n\n| {' | '.join(head)} |\n|{'---|' * len(head)}\n"
            f"{rows}\n\n")


def _nonfinite_section(inputs: Mapping[str, Any]) -> str:
    """The inputs' NaN and infinities, said where any are: they sit in a tensors file, and
    a bug that needs them (an argmax that skips NaN) reads as another bug without them."""
    said = []
    for name, value in inputs.items():
        if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
            continue
        bad = ~torch.isfinite(value.detach())
        if not bool(bad.any()):
            continue
        kinds = [f"{int(n)} {word}" for n, word in ((torch.isnan(value).sum(), "NaN"),
                                                   (torch.isinf(value).sum(), "infinite")) if int(n)]
        first = [int(i) for i in bad.nonzero()[0]]
        at = f"[{', '.join(map(str, first))}]" if first else "[]"
        said.append(f"`{name}` holds {' and '.join(kinds)} of {value.numel()} values (the first at {at})")
    return f"The inputs are not all finite: {'; '.join(said)}.\n\n" if said else ""


def _fed_words(input_names: Iterable[str], generated: Iterable[str]) -> str:
    """Cut to input, said where the repro has inputs that eager PyTorch computed: not where
    it has none (a program that makes all it reads) or makes them all (made values)."""
    inputs = set(input_names)
    if not inputs or inputs <= set(generated):
        return ""
    return ("; every value of a cut node that a kept one reads is fed in as eager PyTorch computed it, so no error "
            "of the cut nodes reaches the kept ones")


def _beside(script: str, backend: Backend, imported: Iterable[str] = ()) -> str:
    """The files repro.py reads from its own folder, for the report's "Reproduce" section
    (`imported`: the copies of the user's --import modules)."""
    files = [f"`{name}` ({_what_copy(name)})" for name in (*backend.script_part().files, *imported)]
    if INPUTS_FILE in script:
        files.append(f"`{INPUTS_FILE}` (the larger tensors)")
    return f", with {' and '.join(files)} from this folder beside it," if files else ""


def _what_copy(name: str) -> str:
    """What a file copied beside repro.py is, in the report's words."""
    if name == "plugin.py":
        return "the plugin backend"
    if name.startswith(PLUGIN_COPY_PREFIX):
        return f"the plugin's module {name[len(PLUGIN_COPY_PREFIX):-3]}.py"
    if name.startswith(IMPORT_COPY_PREFIX):
        return f"your module {name[len(IMPORT_COPY_PREFIX):-3]}.py, which the program's custom ops need"
    return "a copy of what the command runs"


def _emitted_line(summary: dict[str, Any]) -> str:
    specs = summary.get("emitted") or []
    failed = "".join(f"\nNot written for {spec} (`{emitted_names(spec)[0]}`): making it failed, {why}\n"
                     for spec, why in (summary.get("emit_failed") or {}).items())
    if not specs:
        return failed
    took_none = "".join(f"\n`{emitted_names(spec)[0]}`: {spec}'s delegate takes none of the program's ops; ExecuTorch "
                        f"runs {', '.join(f'`{op}`' for op in ops)} on its portable kernels, so what it prints is "
                        "theirs, not the delegate's.\n"
                        for spec, ops in (summary.get("emitted_undelegated") or {}).items())
    files = "; ".join(", ".join(f"`{n}`" for n in emitted_names(spec)) + f" ({spec})" for spec in specs)
    ran = summary.get("emitted_alone") or {}
    if not ran:
        return (f"\nAlso written for other backends (generated from this program, not run by the oracle): {files}.\n"
                + took_none + failed)
    rows = "".join(f"| `{name}` | {alone['status']} (exit {alone['exit']}) | `{table_cell(alone['line'])}` |\n"
                   for name, alone in ran.items())
    return (f"\nAlso written for other backends, from this program: {files}. Each was run alone here after the "
            f"reduction, as repro.py was:\n\n| script | status | printed |\n|---|---|---|\n{rows}" + took_none + failed)


def table_cell(text: str) -> str:
    """`text` inside a Markdown table's cell: its | escaped, which would end the cell (TensorRT's
    "... | ..."-joined errors), in a code span too (GitHub's tables)."""
    return text.replace("|", "\\|")


def _native_section(v: Verdict) -> str:
    """What the compiler logged to stderr of the error it raised with a bare code (its
    native error lines, first the cause), under what fails: the error alone names no cause."""
    native = v.extra.get("native_errors") or []
    if not native:
        return ""
    lines = "\n".join(without_colours(line) for line in native)
    return f"**The compiler logged** (to stderr, not in the error):\n\n```text\n{lines}\n```\n\n"


def _whose_bug(summary: dict[str, Any], backend: str) -> str:
    """Whose bug it is, at the top, where the backend named is not its owner: an ONNX export
    failure is PyTorch's exporter's (TensorRT or ONNX Runtime never saw the model); where the
    delegate took none of the program's ops and the script without it (`summary["undelegated"]`)
    reproduced alone, the portable kernels': a delegate's maintainer must not be asked. Where
    the failure may be no bug (the backend's doubt, a cast out of range), that first."""
    notes = summary.get("diagnosis") or {}
    doubt = notes.get("doubt") or notes.get("undefined_cast")
    before = f"**Before filing:** {sentence(doubt[0].upper() + doubt[1:])}\n\n" if doubt else ""  # maybe no bug
    alone = _undelegated_bug(summary)
    if str(summary.get("final_verdict", "")).startswith("CRASH: OnnxExportError"):
        return before + (f"**Whose bug:** PyTorch's ONNX exporter's (`torch.onnx.export`, onnxscript): the export "
                         f"fails, so {backend} never sees the model. File it with PyTorch (module: onnx).\n\n")
    if alone is None:
        return before
    return before + (f"**Whose bug:** {alone}'s: {backend}'s delegate took none of the program's ops, and "
                     f"`{emitted_names(alone)[0]}` ({alone}, no delegate) reproduces it alone. File that script.\n\n")


def _undelegated_bug(summary: dict[str, Any]) -> str | None:
    """The backend without its delegate (executorch:portable) where the delegate took none of
    the ops and that backend's script reproduced the bug alone: the bug is its; else None."""
    alone = summary.get("undelegated")
    ran = (summary.get("emitted_alone") or {}).get(emitted_names(alone)[0], {}) if alone else {}
    return alone if ran.get("status") == "REPRODUCED" else None


def _title(title: str, summary: dict[str, Any], backend: str) -> str:
    """report.md's title: the reduction's, naming the backend whose bug it is where that is
    not the one reduced with (XNNPACK took no op: the portable kernels'; a hunt saw its
    maintainers named in the title, and the saved repro's, under "Whose bug: portable's")."""
    alone = _undelegated_bug(summary)
    if alone is None or not title.startswith(backend + " "):
        return title
    return f"{retitled(title, backend, alone)} ({backend}'s delegate took none of its ops)"


def _alone_line(summary: dict[str, Any]) -> str:
    from minimize.emit.verify import report_line
    if "repro_alone" not in summary:
        return ""
    return f"\n{report_line(summary['repro_alone'], (summary.get('flakiness') or {}).get('repeat', 1))}\n"


def _upstream_line(summary: dict[str, Any]) -> str:
    """The files for the compiler's maintainers (Backend.upstream_files), said where they are."""
    files = summary.get("upstream_files") or {}
    said = "; ".join(f"`{name}`, {what}" for name, what in files.items())
    if summary.get("upstream_files_error"):
        return f"No `model.onnx` for the compiler's maintainers: exporting it again failed ({summary['upstream_files_error']}).\n"
    return f"Without torch, for the compiler's maintainers: {said}.\n" if files else ""


def _whole_message(v: Verdict) -> str:
    """A compiler's error whose first line the headline cuts (TensorRT's list of the types it
    takes ends past 300 characters), or that goes on past it, whole, folded."""
    message = v.message.strip() if v.kind in ("crash", "oom") else ""
    if not message or message.splitlines()[0].strip() in v.describe() and "\n" not in message:
        return ""
    message = re.sub(r'File "(?:[^"\n]*/)?([^"/\n]+)"', r'File "\1"', message)  # a stack's files, not the user's folders
    message = without_colours(message)
    fence = "`" * max(3, 1 + max(map(len, re.findall(r"`+", message)), default=0))  # one the message cannot close
    return f"<details><summary>The whole error</summary>\n\n{fence}text\n{message}\n{fence}\n</details>\n\n"


def _known_section(summary: dict[str, Any]) -> str:
    """The saved repros the reduction looks like (summary.json's known_bugs), each a
    paragraph under what fails, before the user files a duplicate; not one cut from the same
    program to other ops (another bug of the model: the screen says it, a maintainer needs
    none of it)."""
    return "".join(f"**Known bug?** This reduction {k['line']}{' (the same ops, backend and failure)' if k['same'] else ''}"
                   f": {k['where']}; `trtmin repros run {k['name']}` checks it.\n\n"
                   for k in summary.get("known_bugs") or [] if not k.get("other_ops"))


def _snippet_section(snippet: str | None) -> str:
    if snippet is None:
        return ""
    return f"```python\n{snippet}\n```\n\n"


def _dynamic_sentence(info: ReproInfo) -> str:
    if not info.dynamic:
        return ""
    return (f" The program was exported with dynamic sizes (`torch.export.Dim`), and the compile keeps "
            f"{dynamic_words(info)}, as `repro.py` does (`DYNAMIC`).")


def _memory_words(info: ReproInfo) -> str:
    """An OOM under --memory-limit is that limit's: the reader needs the figure to see it."""
    if not info.memory_limit_mb:
        return ""
    return f", under a {info.memory_limit_mb} MiB address-space limit (`--memory-limit`; `repro.py` sets it too)"


def _flaky_section(summary: dict[str, Any]) -> str:
    """How often it fails, where the reduction ran each program more than once (--repeat):
    repro.py judges one run, so a maintainer is told to run it several times."""
    flaky = summary.get("flakiness") or {}
    repeat, first, last = flaky.get("repeat", 1), flaky.get("original_failures"), flaky.get("final_failures")
    if repeat <= 1 or first is None or (first == repeat and last in (None, repeat)):
        return ""
    last_words = f", the reduced program {last} of {repeat}" if last is not None else ""
    return (f"**Flaky:** the original program failed {first} of {repeat} runs{last_words}. `repro.py` judges "
            f"one run: run it several times (`for i in $(seq 10); do python repro.py; done`).\n\n")


def render_report(info: ReproInfo, script: str, backend: Backend, summary: dict[str, Any],
                  snippet: str | None = None, *, input_names: Sequence[str],
                  inputs: Mapping[str, Any] | None = None) -> str:
    """report.md's text; input_names: the reduced program's inputs (repro.py's make_inputs),
    `inputs` their values (their NaN and infinities are said)."""
    from oracles.environment import collect_environment, format_environment

    # The shape of Torch-TensorRT's bug template, so the section pastes into an issue as is.
    env_lines = (format_environment(collect_environment(), backend.spec, info.device)
                 + f"\n - trtmin Version: {minimize.version()}")
    stats = summary.get("passes", {})
    diagnosis = _diagnosis_lines(summary)
    ran = {name: s for name, s in stats.items() if s["calls"] or s["removed"]}  # the checks' rows add up too
    checks = set(summary.get("check_rows", ()))  # the checks outside the passes: the original's, ...
    stat_rows = "\n".join(f"| {name} | {s['calls']} | {s['accepted']} | {s['removed']} |" for name, s in ran.items())
    passes = ("| pass | oracle calls | accepted | nodes removed |\n|---|---|---|---|\n" + stat_rows
              if set(ran) - checks else "No pass ran: the original was checked, and there was nothing to cut.")
    every_node = info.original_nodes == info.final_nodes  # only values, sizes or settings may have changed
    changed = any(s["accepted"] for name, s in ran.items() if name not in checks)  # a pass took a step
    cut = (f"is `{info.source_model}` as it is ({nodes(info.final_nodes)}; {calls(info.oracle_calls)}): there was "
           "nothing to cut"
           if every_node and not changed else
           f"is `{info.source_model}` with no node cut ({nodes(info.final_nodes)}; {calls(info.oracle_calls)}):\n"
           "what trtmin changed, the Diagnosis below says"
           if every_node else
           f"is what\nis left of `{info.source_model}` ({nodes(info.original_nodes)}) after trtmin cut it down to\n"
           f"{nodes(info.final_nodes)} in {calls(info.oracle_calls)}{_fed_words(input_names, summary.get('generated_values') or {})}")
    where = "above" if snippet else "in `repro.py` below"
    snippet_words = ""
    copies = import_copies(info.imports)
    if snippet:
        snippet_words = (" It runs as it is, eagerly and through the backend, and its last line raises while the "
                         "values differ; `repro.py` below judges them as trtmin did."
                         if "\ntorch.testing.assert_close(got, out" in snippet else
                         " It runs as it is, eagerly and through the backend, and prints how far the backend's output "
                         "is from eager's; `repro.py` below judges that against eager's own error from a float64 run, "
                         "as trtmin did."
                         if "\nprint(\"output " in snippet else
                         " It runs as it is, eagerly and through the backend; `repro.py` below judges the result."
                         if "\ngot = " in snippet else
                         " It runs as it is in eager PyTorch; `repro.py` below compiles it with the backend and judges "
                         "the result.")
    if snippet and copies:  # modules of the user's own, beside repro.py under their copies' names
        own = ", ".join(f"`{n[len(IMPORT_COPY_PREFIX):-3]}` (here `{n}`)" for n in copies)
        snippet_words += (f" It imports your module{'s' if len(copies) > 1 else ''} {own}: attach "
                          f"{'them' if len(copies) > 1 else 'it'} under {'their own names' if len(copies) > 1 else 'its own name'}.")
    return without_scratch_folders(f"""# {_title(info.title, summary, backend.describe_shared())}

**What fails:** {info.verdict.describe()}

{_native_section(info.verdict)}{_whose_bug(summary, backend.describe_shared())}{_flaky_section(summary)}{_whole_message(info.verdict)}{_known_section(summary)}{_snippet_section(snippet)}{_values_section(info.verdict)}{_nonfinite_section(inputs or {})}Backend `{backend.describe_shared()}` on `{info.device}`, oracle `{info.oracle}`{reference_words(info)}{_memory_words(info)}.{_dynamic_sentence(info)} The program {where} {cut}.{snippet_words}

{diagnosis}## Reproduce

Save as `repro.py`{_beside(script, backend, copies)} and run `python repro.py`.
It prints one line and exits 1 while the bug reproduces, 0 once it is fixed, 2 where it cannot run,
3 where it fails differently.
`TRTMIN_BACKEND=eager python repro.py` runs eager PyTorch in place of the backend (prints FIXED).
{_upstream_line(summary)}{_alone_line(summary)}{_emitted_line(summary)}
<details><summary><code>repro.py</code></summary>

```python
{script}
```

</details>

## Environment

{env_lines}

## How it was reduced

{passes}
""")  # the compiler's words name files by name, not in folders gone by now
