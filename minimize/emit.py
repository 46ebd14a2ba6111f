"""Writes the reduce output: repro.py, report.md, summary.json, reduced.pt2 and tensors.

Every file is written to a temporary name and renamed, so a crash never leaves a
half-written file in --out.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.fx as fx
from torch.fx.traceback import NodeSource

import minimize
from minimize.passes.values import INLINE_MAX_ELEMENTS
from minimize.program import Slice
from minimize.snippet import snippet_source
from oracles.backends.base import Backend
from oracles.reference import ERROR_RATIO, float64_outputs
from oracles.script_checks import check_source
from oracles.script_child import CHILD_SOURCE
from oracles.verdict import Signature, Verdict

INPUTS_FILE = "repro_inputs.pt"


def _replace_from_temporary(path: Path, write: Callable[[Path], None]) -> None:
    """Write beside `path` and rename over it: a kill leaves the old file or the new one,
    and a failed write (a full disk) leaves no temporary behind."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, data: str | bytes) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    _replace_from_temporary(path, write)


def atomic_torch_save(obj: Any, path: Path) -> None:
    _replace_from_temporary(path, lambda tmp: torch.save(obj, str(tmp)))


def environment() -> dict[str, str]:
    """What a run records of where it ran (summary.json): with the versions of the installed
    compilers, which `repros add` keeps as the manifest's first_seen."""
    from oracles.environment import KEY_PACKAGES, NOT_INSTALLED, package_version
    env = {"trtmin": minimize.__version__, "torch": torch.__version__, "python": platform.python_version(),
           "os": platform.platform(), "cuda": str(torch.version.cuda or "none")}
    for package in KEY_PACKAGES:
        version = env.get(package) or package_version(package)
        if version != NOT_INSTALLED:
            env[package] = version
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


@dataclass
class ReproInfo:
    title: str
    source_model: str
    original_nodes: int
    final_nodes: int
    oracle_calls: int
    oracle: str
    verdict: Verdict
    signature: Signature
    match: str | None
    atol: float
    rtol: float
    device: str
    needs_subprocess: bool  # signal deaths and hangs must be caught from a parent process
    timeout: float
    reference: str = "eager"  # "float64": a mismatch is judged against eager's own error (oracles/reference.py)


def forward_source(gm: fx.GraphModule) -> str:
    src = gm.graph.python_code(root_module="self").src
    lines = []
    for line in src.strip().splitlines():
        line = re.sub(r";\s+(\w+ = )+None$", "", line)  # fx's "x = None" frees: noise here
        lines.append(line)
    return "\n".join(lines)


def _literal(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        dtype = str(v.dtype)
        values = v.detach().cpu().reshape(-1).tolist()
        shape = tuple(v.shape)
        return f"torch.tensor({values!r}, dtype={dtype}).reshape({shape!r})"
    return repr(v)


def tensor_expressions(values: dict[str, Any], generated: dict[str, str] | None,
                       big: dict[str, torch.Tensor]) -> dict[str, str]:
    """The expression that makes each value in repro.py: generated ones as the expression
    (minimize/passes/values.py), small ones inline, the other large ones read from
    `tensors`, the file beside the script (added to `big`)."""
    made = generated or {}

    def value(name: str, v: Any) -> str:
        if name in made:
            return made[name]
        if isinstance(v, torch.Tensor) and (v.numel() > INLINE_MAX_ELEMENTS or v.is_complex()):
            big[name] = v.detach().cpu().contiguous()
            return f"tensors[{name!r}]"
        return _literal(v)
    return {name: value(name, v) for name, v in values.items()}


def tensors_source(inputs: dict[str, Any], constants: dict[str, Any],
                   generated: dict[str, str] | None = None) -> tuple[str, str, dict[str, torch.Tensor]]:
    """Source of Repro.__init__ (the weights) and make_inputs(), and the tensors that go
    to the file beside the script."""
    big: dict[str, torch.Tensor] = {}
    load = f"torch.load(pathlib.Path(__file__).with_name({INPUTS_FILE!r}), weights_only=True)"
    weight_exprs = tensor_expressions(constants, generated, big)
    input_exprs = tensor_expressions(inputs, generated, big)
    weights = [f"        self.register_buffer({n!r}, {e})" for n, e in weight_exprs.items()]
    items = [f"        {e},  # {n}" for n, e in input_exprs.items()]
    init = ""
    if weights:
        uses_file = any(n in big for n in constants)
        init = ("    def __init__(self):\n        super().__init__()\n"
                + (f"        tensors = {load}\n" if uses_file else "") + "\n".join(weights) + "\n\n")
    if not items:
        return init, "def make_inputs():\n    return []\n", big
    file_line = f"    tensors = {load}\n" if any(n in big for n in inputs) else ""
    return init, "def make_inputs():\n" + file_line + "    return [\n" + "\n".join(items) + "\n    ]\n", big


def report_snippet(info: ReproInfo, gm: fx.GraphModule, inputs: dict[str, Any], constants: dict[str, Any],
                   backend: Backend, generated: dict[str, str] | None = None) -> str | None:
    """The reduced program as straight-line eager code for the report (minimize/snippet.py)."""
    big: dict[str, torch.Tensor] = {}
    exprs = tensor_expressions({**inputs, **constants}, generated, big)
    tensors = {n: (e, isinstance(v, torch.Tensor)) for (n, v), e in zip({**inputs, **constants}.items(), exprs.values())}
    return snippet_source(forward_source(gm), tensors, INPUTS_FILE if big else None, info.device,
                          f"compiled with {backend.describe()}: {_short_failure(info.verdict)}")


def _short_failure(v: Verdict) -> str:
    """The failure in a few words, as our users comment their snippets ("TRT differs by 1.01")."""
    if v.kind == "mismatch":
        return f"output {v.output} differs from eager by {v.max_abs:.4g}"
    if v.kind == "nan":
        return f"output {v.output} is non-finite where eager is finite"
    text = v.describe()
    return text if len(text) <= 120 else text[:117] + "..."


SCRIPT = '''#!/usr/bin/env python3
"""{title}

{verdict_line}

Reduced by trtmin {trtmin} from {source}: {original} -> {final} call nodes in {calls} oracle calls.
Reduced on: torch {torch}, Python {python}, {os}, device {device}{gpu}.
Backend: {backend}. Oracle: {oracle}{tolerance}.

Run:      python repro.py
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package or file),
          3 = CHANGED: it still fails, but differently (another error, a hang or a kill)
Control:  TRTMIN_BACKEND=eager python repro.py
          runs eager PyTorch in place of the backend, so it must print FIXED
"""

{std_imports}

try:
    import torch
except ImportError as exc:  # no torch here: cannot run, which is no verdict on the bug
    print(f"SKIPPED: torch cannot be imported: {{exc}}")
    sys.exit(2)
from torch import device  # the graph below writes devices as device(type=...)

inf, nan = float("inf"), float("nan")
DEVICE = {device!r}
ATOL, RTOL = {atol!r}, {rtol!r}
REFERENCE = {reference!r}  # float64: a difference counts only beyond ERROR_RATIO x eager's own error from a float64 run
REQUIRES = {requires!r}
{imports}

class Repro(torch.nn.Module):
{init}{forward}


{inputs}

def load_backend():
    {load_body}


def compile_backend(module, inputs, backend):
    {compile_body}

{checks}
{child_functions}
def exception_chain(e):
    """The exception and what it wraps (torch.compile wraps a backend's error)."""
    chain = []
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = getattr(e, "inner_exception", None) or e.__cause__
    return chain


def prepare():
    """(module, inputs, eager's outputs, the float64 run's or None): everything before the
    backend is called."""
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
    module = Repro().to(DEVICE)  # its weights too: written (or loaded) on the CPU
    with torch.no_grad():
        expected = flatten(module(*clone(inputs)))  # the eager half runs everywhere, so a broken script shows
        if REFERENCE != "float64":
            return module, inputs, expected, None
        with Float64():
            return module, inputs, expected, flatten(module(*clone(inputs)))


def clone(inputs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def first_line(e):
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{{type(e).__name__}}: {{lines[0][:300] if lines else ''}}".rstrip(": ")


def run():
    try:
        module, inputs, expected, exact = prepare()
    except Exception as e:  # a file beside the script is gone or eager fails here: no news about the bug
        print(f"SKIPPED: cannot run: {{first_line(e)}}")
        return 2
    eager = os.environ.get("TRTMIN_BACKEND") == "eager"
    missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
    if missing and not eager:
        print(f"SKIPPED: {{', '.join(missing)}} is not installed")
        return 2
    try:
        backend = None if eager else load_backend()
    except Exception as e:  # plugin.py gone from beside the script, a module not installed: not the bug
        print(f"SKIPPED: cannot run: the backend cannot be loaded: {{first_line(e)}}")
        return 2
{announce_call}    with torch.no_grad():
        try:
            compiled = module if eager else compile_backend(module, clone(inputs), backend)
            actual = flatten(compiled(*clone(inputs)))
            if DEVICE.startswith("cuda"):
                torch.cuda.synchronize()
        except Exception as e:  # the compiler failed: is it the same failure?
            chain = exception_chain(e)
            text = "\\n".join(f"{{type(x).__name__}}: {{x}}" for x in chain)
            root = e  # the compiler's own error: what torch.compile's wrapper wraps, not its causes
            while getattr(root, "inner_exception", None) is not None:
                root = root.inner_exception
            error = first_line(root)
            if ERROR_PATTERN and re.search(ERROR_PATTERN, text):
                print(f"REPRODUCED: {{error}}")
                return 1
            print(f"CHANGED: fails differently now: {{error}}")
            return 3
    reproduced, message = outcome(expected, actual, exact)
    if reproduced is None:
        print(f"CHANGED: fails differently now: {{message}}")
        return 3
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


def main():
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        print("SKIPPED: no CUDA GPU is visible here")
        return 2
{child_block}    return run()


if __name__ == "__main__":
    sys.exit(main())
'''


# torch.compile imports Dynamo (a second or more) on its first call: start-up, as in trtmin's
# warm workers, so it is done before the child starts the clock.
ANNOUNCE_CALL = "    import torch._dynamo\n    announce_call()\n"

CHILD_BLOCK = '''    if not os.environ.get("TRTMIN_CHILD"):
        return run_in_child()
'''

def render_script(info: ReproInfo, gm: fx.GraphModule, inputs: dict[str, Any], constants: dict[str, Any],
                  backend: Backend, generated: dict[str, str] | None = None) -> tuple[str, dict[str, torch.Tensor]]:
    env = environment()
    part = backend.script_part()
    init_src, inputs_src, big = tensors_source(inputs, constants, generated)
    match = info.match
    if info.needs_subprocess and info.verdict.kind == "crash" and not match:
        match = re.escape(info.verdict.message)  # the signal's name, e.g. SIGSEGV
    tol = f" (atol {info.atol:g}, rtol {info.rtol:g}{_reference_words(info)})" if info.oracle in ("mismatch",) else ""
    script = SCRIPT.format(
        title=_docstring_text(info.title), verdict_line=_docstring_text(info.verdict.describe()), trtmin=env["trtmin"],
        source=_docstring_text(info.source_model), original=info.original_nodes, final=info.final_nodes, calls=info.oracle_calls,
        torch=env["torch"], python=env["python"], os=env["os"], device=info.device,
        gpu=f" ({env['gpu']})" if "gpu" in env else "", backend=_docstring_text(backend.describe()), oracle=info.oracle,
        tolerance=tol, atol=info.atol, rtol=info.rtol, requires=part.requires,
        imports="\n".join(part.imports) + ("\n" if part.imports else ""),
        init=init_src, forward=textwrap.indent(forward_source(gm), "    "), inputs=inputs_src,
        compile_body=part.compile_body, load_body=part.load_body,
        checks=check_source(info.signature, match, info.reference == "float64"), reference=info.reference,
        std_imports="\n".join(f"import {m}" for m in ["importlib.util", "os", *(["pathlib"] if big else []), "re",
                                                         *(["subprocess"] if info.needs_subprocess else []), "sys"]),
        child_block=_child_block(info), child_functions=_child_functions(info),
        announce_call=ANNOUNCE_CALL if info.needs_subprocess else "",
    )
    return script, big


def _reference_words(info: ReproInfo) -> str:
    return (f"; only beyond {ERROR_RATIO:g}x eager's own error from a float64 run"
            if info.reference == "float64" else "")


def _docstring_text(text: str) -> str:
    """Text for the script's docstring: an error message or a command may hold backslashes
    (a Windows path, a regex: '\\x' then no hex digits is a SyntaxError) or three quotes."""
    return text.replace("\\", "\\\\").replace('"""', '\\"""')


def _child_block(info: ReproInfo) -> str:
    """The part of main() that runs the bug in a child process: only for bugs that kill or
    hang the process, so that the scripts of the others hold no dead code."""
    return CHILD_BLOCK if info.needs_subprocess else ""


def _child_functions(info: ReproInfo) -> str:
    if not info.needs_subprocess:
        return ""
    hang = info.oracle == "hang"
    verdict = (f"REPRODUCED: no result within {info.timeout:g} s (hang)", 1) if hang else ("CHANGED: hangs now", 3)
    return (f"\nCHILD_TIMEOUT_S = {info.timeout!r}\nHANG_VERDICT = {verdict!r}\n"
            f"DEATH_PATTERN = ERROR_PATTERN or \"$^\"  # how the reduced bug ended the process\n{CHILD_SOURCE}")


def _number_graph_ids(ep: torch.export.ExportedProgram) -> None:
    """Each node's provenance (meta["from_node"]) names its source graphs by id(graph), a
    memory address that differs from run to run: two identical runs wrote different
    reduced.pt2 files (model.json, and .data/serialization_id, which hashes every record).
    The graphs are numbered in order of first appearance instead, so one graph keeps one
    number throughout the file; -1 (no source node) stays. The lists are replaced, not
    edited: they may be shared with the reduction's graph."""
    numbers: dict[int, int] = {}

    def renumber(d: dict[str, Any]) -> dict[str, Any]:
        old = d["graph_id"]
        new = old if old == -1 else numbers.setdefault(old, len(numbers))
        return {**d, "graph_id": new, "from_node": [renumber(f) for f in d["from_node"]]}

    graphs = [m.graph for m in ep.graph_module.modules() if isinstance(m, fx.GraphModule)]  # subgraphs too
    for node in (n for g in graphs for n in g.nodes):
        if sources := node.meta.get("from_node"):
            # to_dict is what the file holds, _from_dict how torch.export.load reads it back
            node.meta["from_node"] = [NodeSource._from_dict(renumber(s.to_dict()))
                                      for s in sources if isinstance(s, NodeSource)]


def write_reduced(out: Path, gm: fx.GraphModule, inputs: list[Any]) -> Path:
    """reduced.pt2: the reduced program, exported and saved with torch.export.save."""
    reduced = out / "reduced.pt2"
    ep = torch.export.export(gm, tuple(inputs), strict=False)
    _number_graph_ids(ep)
    # torch.export.save names the archive's folder after the file: a temporary
    # reduced.pt2 in a hidden folder, so the archive reads reduced/..., not .tmp-reduced/...
    with tempfile.TemporaryDirectory(prefix=".reduced-", dir=out) as tmp:
        torch.export.save(ep, str(Path(tmp) / reduced.name))
        os.replace(Path(tmp) / reduced.name, reduced)
    return reduced


def write_outputs(out: Path, info: ReproInfo, piece: Slice, values: dict[str, Any], backend: Backend,
                  summary: dict[str, Any], verify: Callable[[Path], dict[str, Any]] | None = None,
                  generated: dict[str, str] | None = None) -> dict[str, Path]:
    """The outputs; `verify` runs the written repro.py (minimize/verify.py) before the
    report and the summary, which say what it did. `values` holds the generated tensors
    in place of the originals, and `generated` the expressions the script makes them with."""
    out.mkdir(parents=True, exist_ok=True)
    gm = piece.gm
    inputs = {n: values[n] for n in piece.input_names}
    input_values = list(inputs.values())
    constants = {n: values[n] for n in piece.constant_names}
    script, big = render_script(info, gm, inputs, constants, backend, generated)
    written: dict[str, Path] = {}
    if big:
        atomic_torch_save(big, out / INPUTS_FILE)
        written["inputs"] = out / INPUTS_FILE
    copied = backend.script_part().files
    for name, src in copied.items():
        tmp = out / f".{name}.tmp"
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)  # a runner script the command runs as its program stays executable
        os.replace(tmp, out / name)
    atomic_write(out / "repro.py", script)
    written["repro"] = out / "repro.py"
    if verify is not None:
        alone = verify(out / "repro.py")
        summary.setdefault("timing", {})["repro_alone_seconds"] = alone.pop("seconds")  # timing: varies by run
        summary["repro_alone"] = alone
    try:
        written["reduced"] = write_reduced(out, gm, input_values)
    except Exception as e:  # the script is the deliverable; say why the .pt2 is missing
        summary["reduced_pt2_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    # What this run writes (the --emit scripts come next): `repros add` saves these and no
    # other, as an earlier run's files may be beside them (--force replaces, never deletes)
    summary["files"] = sorted({p.name for p in written.values()} | set(copied) | {"report.md", "summary.json"}
                              | {n for spec in summary.get("emitted", []) for n in emitted_names(spec)})
    snippet = report_snippet(info, gm, inputs, constants, backend, generated)
    atomic_write(out / "report.md", render_report(info, script, backend, summary, snippet))
    written["report"] = out / "report.md"
    atomic_write(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    written["summary"] = out / "summary.json"
    return written


def check_emit(specs: list[str]) -> None:
    """Before the reduction, not after it: a typo must not cost the run."""
    from oracles.backends import BUILTIN
    from oracles.errors import TrtminError
    for spec in specs:
        if spec not in BUILTIN:
            raise TrtminError(f"--emit {spec!r} is not a backend; use one of {', '.join(sorted(BUILTIN))}")


def settings_for(spec: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Of the reduced backend's --set settings, those the emitted backend also takes (a
    TensorRT setting is no Inductor's); the others stay with the backend they were for."""
    from oracles.backends import BUILTIN
    from oracles.errors import TrtminError
    taken = {}
    for key, value in settings.items():
        try:
            BUILTIN[spec](spec, {key: value})
        except TrtminError:
            continue
        taken[key] = value
    return taken


def write_extra_script(out: Path, info: ReproInfo, piece: Slice, values: dict[str, Any], spec: str,
                       settings: dict[str, Any], generated: dict[str, str] | None = None) -> Path:
    """A script for another backend than the one reduced with (--emit).

    `tensorrt` writes the TensorRT-only script (tensorrt + numpy, an .onnx and an .npz);
    any other backend name writes repro_<name>.py with that backend's part. These
    scripts were generated, not run by the oracle: their header says so.
    """
    from oracles.backends import BUILTIN
    from oracles.checks import flatten_outputs
    from oracles.script_checks import error_pattern

    check_emit([spec])
    settings = settings_for(spec, settings)
    note = f"Emitted for {spec} by trtmin; the reduction was checked on {info.device} with another backend."
    inputs = [values[n] for n in piece.input_names]
    if spec == "tensorrt":
        from oracles.backends.onnx_export import export_onnx
        from oracles.backends.tensorrt import TensorRTBackend
        from oracles.backends.tensorrt_script import write_tensorrt_script

        backend = TensorRTBackend(spec, settings)
        with torch.no_grad():
            expected = flatten_outputs(piece.gm(*inputs))
        exact = flatten_outputs(float64_outputs(piece.gm, inputs)) if info.reference == "float64" else None
        onnx = export_onnx(piece.gm, inputs, out / "model.onnx", opset=backend.options.get("opset"))
        return write_tensorrt_script(out, onnx.path, inputs, expected, info.oracle, info.atol, info.rtol,
                                     header=f"{info.title}\n\n{info.verdict.describe()}\n{note}",
                                     error_pattern=error_pattern(info.signature, info.match),
                                     timeout=info.timeout, settings=backend.build_settings, exact=exact)
    backend = BUILTIN[spec](spec, settings)  # no package check: writing a script needs none
    device = info.device if info.device.split(":")[0] in backend.devices else backend.devices[0]
    if device != info.device:  # Torch-TensorRT from a CPU reduction: its script runs where it can
        note += f" It runs the program on {device}, where {spec} runs."
    extra = ReproInfo(**{**info.__dict__, "device": device, "title": f"{info.title} [{note}]"})
    script, big = render_script(extra, piece.gm, {n: values[n] for n in piece.input_names},
                                {n: values[n] for n in piece.constant_names}, backend, generated)
    if big and not (out / INPUTS_FILE).exists():
        atomic_torch_save(big, out / INPUTS_FILE)
    path = out / emitted_names(spec)[0]
    atomic_write(path, script)
    return path


def _diagnosis_lines(summary: dict[str, Any]) -> str:
    """What the passes found, for the maintainer: the first value off, the engine, the
    converter, the settings."""
    notes = summary.get("diagnosis") or {}
    lines = []
    if "named_node" in notes:
        lines.append(f"- The compiler's error names the node it failed on: {notes['named_node']} (the search "
                     "started there).")
    if "precision" in notes:
        lines.append(f"- Precision: {notes['precision']}.")
    if "first_off_value" in notes:
        lines.append(f"- First value off when the {notes.get('localized_nodes', '?')}-node program is compiled "
                     f"with every value an output: {notes['first_off_value']}.")
    elif "localization" in notes:
        lines.append(f"- Localization: {notes['localization']}.")
    if "failing_engine" in notes:
        lines.append(f"- Failing engine: {notes['failing_engine']} (each engine was run alone, the rest in PyTorch).")
    if isinstance(notes.get("culprit_ops"), list):
        ops = ", ".join(f"`{o}`" for o in notes["culprit_ops"])
        lines.append(f"- Culprit converter: forcing {ops} to run in PyTorch makes the bug vanish.")
    elif notes.get("culprit_ops"):
        lines.append(f"- Culprit converter: not isolated ({notes['culprit_ops']}).")
    if "settings_needed" in notes:
        needed = ", ".join(f"`{k}={v}`" for k, v in notes["settings_needed"].items()) or "none"
        lines.append(f"- Settings the bug needs: {needed}; dropped as irrelevant: "
                     f"{', '.join(f'`{k}`' for k in notes.get('settings_dropped', [])) or 'none'}.")
    if summary.get("generated_values"):
        names = ", ".join(f"`{n}`" for n in summary["generated_values"])
        shrunk = summary.get("shrunk_shapes") or {}
        lines.append(f"- The bug does not need the original values of {names}: the script makes them "
                     f"(seeded, of the same {'dtype' if shrunk else 'shape, dtype'} and scale).")
        if shrunk:
            changes = ", ".join(f"`{n}` {tuple(old)} → {tuple(new)}" for n, (old, new) in shrunk.items())
            lines.append(f"- Nor their sizes: the script makes them smaller, {changes}.")
    if summary.get("shrunk_sizes"):
        sizes = ", ".join(f"{old} → {new}" for old, new in summary["shrunk_sizes"].items())
        lines.append(f"- The graph's size arguments (view, reshape, layer_norm's shape) shrank where the bug does not "
                     f"need them: {sizes}.")
    return ("## Diagnosis\n\n" + "\n".join(lines) + "\n\n") if lines else ""


def _beside(script: str, backend: Backend) -> str:
    """The files repro.py reads from its own folder, for the report's "Reproduce" section."""
    files = [f"`{name}` ({'the plugin backend' if name == 'plugin.py' else 'a copy of what the command runs'})"
             for name in backend.script_part().files]
    if INPUTS_FILE in script:
        files.append(f"`{INPUTS_FILE}` (the larger tensors)")
    return f", with {' and '.join(files)} from this folder beside it," if files else ""


def emitted_names(spec: str) -> list[str]:
    """The files `--emit spec` writes into --out."""
    if spec == "tensorrt":
        return ["repro_tensorrt.py", "model.onnx", "repro_tensorrt.npz"]
    return [f"repro_{spec.replace(':', '_')}.py"]


def _emitted_line(summary: dict[str, Any]) -> str:
    specs = summary.get("emitted") or []
    if not specs:
        return ""
    files = "; ".join(", ".join(f"`{n}`" for n in emitted_names(spec)) + f" ({spec})" for spec in specs)
    return f"\nAlso written for other backends (generated from this program, not run by the oracle): {files}.\n"


def _alone_line(summary: dict[str, Any]) -> str:
    from minimize.verify import report_line
    if "repro_alone" not in summary:
        return ""
    return f"\n{report_line(summary['repro_alone'], (summary.get('flakiness') or {}).get('repeat', 1))}\n"


def _snippet_section(snippet: str | None) -> str:
    if snippet is None:
        return ""
    return f"```python\n{snippet}\n```\n\n"


def render_report(info: ReproInfo, script: str, backend: Backend, summary: dict[str, Any],
                  snippet: str | None = None) -> str:
    from oracles.environment import collect_environment, format_environment

    # The shape of Torch-TensorRT's bug template, so the section pastes into an issue as is.
    env_lines = format_environment(collect_environment()) + f"\n - trtmin Version: {minimize.__version__}"
    stats = summary.get("passes", {})
    diagnosis = _diagnosis_lines(summary)
    stat_rows = "\n".join(f"| {name} | {s['calls']} | {s['accepted']} | {s['removed']} |" for name, s in stats.items())
    where = "above" if snippet else "in `repro.py` below"
    snippet_words = (" It runs as it is in eager PyTorch; `repro.py` below compiles it with the backend and judges "
                     "the result.") if snippet else ""
    return f"""# {info.title}

**What fails:** {info.verdict.describe()}

{_snippet_section(snippet)}Backend `{backend.describe()}` on `{info.device}`, oracle `{info.oracle}`{_reference_words(info)}. The program {where} is what
is left of `{info.source_model}` ({info.original_nodes} call nodes) after trtmin cut it down to
{info.final_nodes} call nodes in {info.oracle_calls} oracle calls; every removed node's value was fed
in as an input computed by eager PyTorch, so the failure is not upstream drift.{snippet_words}

{diagnosis}## Reproduce

Save as `repro.py`{_beside(script, backend)} and run `python repro.py`.
It prints one line and exits 1 while the bug reproduces, 0 once it is fixed, 2 where it cannot run,
3 where it fails differently.
`TRTMIN_BACKEND=eager python repro.py` runs eager PyTorch in place of the backend (prints FIXED).
{_alone_line(summary)}{_emitted_line(summary)}
<details><summary><code>repro.py</code></summary>

```python
{script}
```

</details>

## Environment

{env_lines}

## How it was reduced

| pass | oracle calls | accepted | nodes removed |
|---|---|---|---|
{stat_rows}
"""
