"""A run's header: what its journal's verdicts depend on (the model, the inputs, a plugin
file, the options, torch), and whether a --resume may replay them. Torch-free, so the
CLI refuses a resume with other options or inputs before it starts workers or imports
torch; the model's own identity (its program) is checked by Journal once it has loaded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import Any

from minimize.options import Options
from oracles.backend_names import parse_backend, plugin_own_modules
from oracles.errors import TrtminError
from oracles.out_folder import JOURNAL, file_digest, journal_first_line


def plugin_digest(plugin: Path) -> str:
    """A plugin file's digest, with the modules of its folder that it imports (repro.py
    carries copies of them): the file's own where it imports none."""
    own = plugin_own_modules(plugin)
    if not own:
        return file_digest(plugin)
    return hashlib.sha256(" ".join([file_digest(plugin), *(f"{n}:{file_digest(f)}" for n, f in own.items())])
                          .encode()).hexdigest()


def options_key(opts: Options) -> dict[str, Any]:
    """The options a verdict depends on, as the journal's header records them."""
    d = asdict(opts)
    d["model"] = str(opts.model)
    d["inputs"] = str(opts.inputs) if opts.inputs else None  # for journals that have no inputs digest
    # These do not change a verdict (a timeout or a memory limit can). generate_values only adds
    # runs, each journaled under its own key: a resume may turn it off or on.
    for k in ("jobs", "emit", "model", "verify", "generate_values"):
        d.pop(k, None)
    return d


# How journaled verdicts are worded. Raised when a verdict's text changes, so a resume never
# replays verdicts that new ones cannot match; a journal without it is format 1.
# 2: a pass manager's bare Exception ends with its cause's words (700ab65).
# 3: an ONNX node's name is the same with or without its counter (node_view, node_view_9).
# 4: a crash carries the compiler's native error lines (extra.native_errors), part of its signature.
# 5: a value verdict lists each output off (extra.off): the bug counts only upstream of the original's.
# 6: a slice returns only the values of an op of several that the program reads (median.dim's
#    values, not its unused indices): another count of outputs; a type union's words are <types>.
# 7: a mismatch under --reference float64 carries its error ratio (extra.ratio): the bug's size.
# 8: a Python number an output returns (.item()) is judged as a 0-d tensor: its size off, its dtype.
# 9: a Python set of names in an error is <set>, in any order (ExecuTorch's missing out variants).
VERDICT_FORMAT = 9


def header_before_loading(opts: Options) -> dict[str, Any]:
    """What a journal's verdicts depend on, as far as it is known before the model loads:
    the options, the inputs and a plugin file by their contents (a path may name other
    contents after a kill), the backend's compilers by their versions (metadata: no torch)
    and how verdicts are worded. A resume with any of it changed is refused at once."""
    from oracles.environment import KEY_PACKAGES, package_version

    backend = parse_backend(opts.backend)
    plugin = backend.plugin_file
    return {"options": options_key(opts),
            "inputs_sha256": file_digest(opts.inputs) if opts.inputs else None,
            "plugin_sha256": plugin_digest(plugin) if plugin and plugin.is_file() else None,
            "compilers": {p: package_version(p) for p in backend.packages(KEY_PACKAGES) if p != "torch"},
            "verdict_format": VERDICT_FORMAT}


def plugin_changed(opts: Options, began_with: str | None) -> str | None:
    """Why repro.py cannot be written with the plugin file as it is now: edited (or gone)
    since the run began, its copy beside repro.py would not be the code the verdicts came
    from, and the script would say FIXED for a bug it never ran. None where it is the same."""
    plugin = parse_backend(opts.backend).plugin_file
    if not began_with or plugin is None:
        return None
    if not plugin.is_file():
        return (f"the plugin file {plugin} is gone since the run began, and repro.py carries a copy of it; put it "
                "back, then rerun with --resume (it replays the journal, no oracle call)")
    if plugin_digest(plugin) != began_with:
        return (f"the plugin file {plugin} (or a module of its folder that it imports) changed since the run "
                "began: its copy beside repro.py would not be the code the reduction ran, and a worker started "
                "after the edit ran the new one; reduce again with --force")
    return None


RERUN_SAME = "rerun with the same arguments, or start over with --force"  # a resume refused for an argument
START_OVER = "start over with --force"  # for what no argument gives back: another trtmin, compiler, torch


def check_resumable(folder: Path, header: dict[str, Any]) -> None:
    """Before the model loads: a --resume with other options, inputs or plugin than the
    journal's is refused at once, not after seconds of loading. `header` holds what is
    known without the program (no model digests, no torch); Journal checks the rest."""
    first = _header_line(folder)
    if first is not None:
        same_run(folder / JOURNAL, first, header)


def resume_difference(folder: Path, header: dict[str, Any]) -> tuple[str, str] | None:
    """How the run journaled in `folder` was made otherwise than `header` (what, and the
    fix, in the CLI's words), or None: it resumes, or there is no journal to resume."""
    first = _header_line(folder)
    return None if first is None else _header_difference(folder / JOURNAL, first, header)


def _header_line(folder: Path) -> str | None:
    """The first line of the journal in `folder`, or None where there is none to read."""
    line = journal_first_line(folder)
    return None if line is None else line.decode(errors="replace")


def same_run(path: Path, first_line: str, header: dict[str, Any]) -> None:
    """Refuse to resume the journal at `path` (its header line `first_line`) from a run
    with another `header`: its verdicts would answer other questions."""
    found = _header_difference(path, first_line, header)
    if found:
        what, fix = found
        raise TrtminError(f"--resume: {path.parent} was made {what}; {fix}")


def _header_difference(path: Path, first_line: str, header: dict[str, Any]) -> tuple[str, str] | None:
    try:
        first = json.loads(first_line)["header"]
    except (KeyError, TypeError, json.JSONDecodeError):
        raise TrtminError(f"--resume: {path} is damaged; start over with --force") from None
    if not isinstance(first, dict):
        raise TrtminError(f"--resume: {path} is damaged; start over with --force")
    # a journal from before the format was recorded; from before 79784f4, which kept every value
    # some node reads: numbered as now where the program has no such dead value
    first = {"verdict_format": 1, "dead_values_cut": 0, **first}
    then, now = _recorded_by_both(first, header)
    return None if then == now else _difference(then, now)


def _recorded_by_both(then: dict[str, Any], now: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two headers, each cut to what both record: a journal from before an option or a
    digest was recorded says nothing of it, and that is not a difference, unless the option
    is now off its default (what that journal's run had: --reference float64 does not
    replay verdicts judged against eager alone)."""
    then_opts, now_opts = then.get("options", {}), now.get("options", {})
    if "example_inputs_sha256" in now and "example_inputs_sha256" not in then:
        then = {**then, "example_inputs_sha256": None}  # before it was recorded, a run without --inputs made them
    both = {k for k in then if k in now and k != "options"}
    opts = {k for k in then_opts if k in now_opts}
    defaults = {f.name: f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
                for f in fields(Options) if f.default is not MISSING or f.default_factory is not MISSING}
    new = {k: defaults[k] for k in now_opts if k not in then_opts and k in defaults and now_opts[k] != defaults[k]}
    then_opts, opts = {**then_opts, **new}, opts | set(new)
    if "inputs_sha256" in both:
        opts.discard("inputs")  # the contents are compared: the same inputs by another path resume
    if "plugin_sha256" in both and then["plugin_sha256"] and _plugin_function(then_opts.get("backend")) == \
            _plugin_function(now_opts.get("backend")):
        opts.discard("backend")  # the plugin file's contents are compared: the same one by another path resumes
    if then.get("program_sha256") and now.get("program_sha256"):
        both.discard("model_sha256")  # the program is compared: a re-export of the same code resumes
    else:
        both.discard("program_sha256")  # one could not be computed: the file's bytes decide
    cut = lambda h, o: {**{k: h[k] for k in both}, "options": {k: o[k] for k in opts}}  # noqa: E731
    return cut(then, then_opts), cut(now, now_opts)


def _plugin_function(spec: Any) -> str | None:
    """A plugin file's function (`plugin.py:backend`'s "backend"), or None for another backend."""
    try:
        backend = parse_backend(spec) if isinstance(spec, str) else None
    except TrtminError:
        return None
    return backend.function if backend is not None and backend.plugin_file is not None else None


def _difference(then: dict[str, Any], now: dict[str, Any]) -> tuple[str, str]:
    """What differs between the journal's header and this run's (each cut by
    _recorded_by_both to what both record: both digests, or neither), and the fix, in the
    CLI's words: an argument can be given again, another trtmin or compiler cannot."""
    if then.get("program_sha256") != now.get("program_sha256"):
        return ("from another model (its graph or weights differ: program sha256 "
                f"{then['program_sha256'][:12]}... there, {now['program_sha256'][:12]}... now)", RERUN_SAME)
    if then.get("model_sha256") != now.get("model_sha256"):
        # A journal without the program's digest: a re-export of the same code differs too
        # (its stack traces hold the source's path).
        return (f"from another model (the model file's contents differ: sha256 {then['model_sha256'][:12]}... "
                f"there, {now['model_sha256'][:12]}... now; a re-export differs even where the code is the same)",
                RERUN_SAME)
    if then.get("inputs_sha256") != now.get("inputs_sha256"):
        given = (then.get("inputs_sha256") is not None, now.get("inputs_sha256") is not None)
        return ({(True, False): "with an --inputs file (none is given now)",
                 (False, True): "without --inputs (the program's own example inputs; one is given now)"}.get(
                    given, "with other inputs (the --inputs file's contents differ)"),
                "rerun with the inputs it was made with, or start over with --force")
    if then.get("example_inputs_sha256") != now.get("example_inputs_sha256"):
        def ran_on(digest: str | None, saved: str) -> str:
            return "inputs made from the program's shapes" if digest is None else saved
        return (f"with other inputs (without --inputs: "
                f"{ran_on(then.get('example_inputs_sha256'), 'other example inputs saved in the model file')} there, "
                f"{ran_on(now.get('example_inputs_sha256'), 'the example inputs saved in the model file')} now)",
                START_OVER)
    # the same plugin function (_recorded_by_both compares the backend by it), its file gone or changed; another
    # backend is an option's difference, below
    same_plugin = "backend" not in now.get("options", {})
    if same_plugin and then.get("plugin_sha256") and not now.get("plugin_sha256"):
        return ("with a plugin file that is not there now (the file --backend names)",
                "put the plugin file back where it was, then rerun")
    if same_plugin and then.get("plugin_sha256") != now.get("plugin_sha256"):
        return ("with another version of the plugin file (its contents, or those of the modules of its folder "
                "that it imports, differ)", "rerun with the plugin files it was made with, or start over with --force")
    if then.get("verdict_format") != now.get("verdict_format"):
        return ("by another trtmin, which words verdicts otherwise (format "
                f"{then.get('verdict_format')} there, {now.get('verdict_format')} now): new ones would not match them",
                START_OVER)
    if then.get("dead_values_cut") != now.get("dead_values_cut"):
        return ("by an older trtmin, which kept the values only dead code reads (this one leaves out "
                f"{now.get('dead_values_cut')} of them, so its journal numbers the program's nodes otherwise)",
                START_OVER)
    if then.get("torch") != now.get("torch"):
        return f"with torch {then.get('torch')} (this is {now.get('torch')})", START_OVER
    old, new = then.get("options", {}), now.get("options", {})
    old_compilers, new_compilers = then.get("compilers", {}), now.get("compilers", {})
    if old.get("backend") == new.get("backend"):  # another backend records other compilers: said as an option, below
        if set(old_compilers) != set(new_compilers):  # a plugin's were all of trtmin's before 8f26320
            return (f"by a trtmin that recorded other compilers for this backend ("
                    f"{', '.join(sorted(old_compilers)) or 'none'} there, {', '.join(sorted(new_compilers)) or 'none'}"
                    " now)", START_OVER)
        for name in sorted(old_compilers):
            if old_compilers[name] != new_compilers[name]:
                return (f"with {name} {old_compilers[name]} (this is {new_compilers[name]}): its verdicts are that "
                        "compiler's", START_OVER)
    changed = [f"{_as_flag(k, old.get(k))} there, {_as_flag(k, new.get(k))} now"
               for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return (f"with other options ({'; '.join(changed)})" if changed else "with other options"), RERUN_SAME


def _as_flag(key: str, value: Any) -> str:
    """An option's value as the command line gives it: `--timeout 60.0`, `--no-localize`,
    `--set a=1 --set b=2`, `--import mylib`, `no --match` (not given)."""
    name = {"settings": "set", "memory_limit_mb": "memory-limit", "imports": "import"}.get(key, key.replace("_", "-"))
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no-{name}" if key in NEGATABLE else f"no --{name}"
    if value is None or value == [] or value == {}:
        return f"no --{name}"
    if isinstance(value, dict):
        return " ".join(f"--{name} {k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return " ".join(f"--{name} {v}" for v in value)
    return f"--{name} {value!r}"


NEGATABLE = ("localize", "verify", "generate_values")  # the options of a --X/--no-X pair
