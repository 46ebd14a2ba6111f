"""Run saved repros, each in its own subprocess, and judge them against their manifests.

How one run gets its status (FIXED, REPRODUCED, SKIPPED, CHANGED or ERROR): oracles/script_run.py.

ok (does this run agree with the manifest?):

- ERROR is never ok.
- CHANGED is never ok: whatever the manifest expects, a failure that is not the reduced
  bug's is news (the bug's error changed, or another failure now hides it).
- FIXED / REPRODUCED are ok only when they are the expected status ("fixed" / "reproduces",
  after ``[expected_when]``). A bug that looks fixed where it should reproduce, a bug that
  is back where it should be fixed, and a repro that ran where "skipped" was expected,
  are all not ok.
- SKIPPED is ok when "skipped" is expected, or when the reason says the machine lacks
  a CUDA GPU ("no CUDA GPU", "needs a GPU", torch's "not compiled with CUDA", "no NVIDIA
  driver") or a package ("not installed", "not importable", "cannot be imported", "No module
  named", "missing package"): the contract's exit 2 means "cannot run here", which is no
  news about the bug. A skip with any other reason (a device-side assert, a data file
  missing) is not ok.
  ``strict_skips=True`` (for machines that should run everything, e.g. the GPU CI box)
  makes every unexpected skip not ok.
- The control run (``TRTMIN_BACKEND=eager``: each script runs eager PyTorch in place of
  the compiler) expects FIXED from every repro, whatever its manifest says: it shows that
  the scripts themselves are sound.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable, Sequence

from oracles.backend_names import plugin_packages
from oracles.environment import KEY_PACKAGES, package_version, trtmin_version
from oracles.errors import first_line
from oracles.script_run import (CHANGED, ERROR, FIXED, REPRODUCED, SKIPPED, STOPPING, classify, kill_running,
                                run_script)
from repros.suite import Repro, find_repros

EXPECTATION_OF = {FIXED: "fixed", REPRODUCED: "reproduces", SKIPPED: "skipped", ERROR: "error"}
DEFAULT_TIMEOUT = 600.0
JSON_FORMAT = "trtmin-repros-run/1"
# What a skip says when the machine lacks a GPU or a package, in the words trtmin's scripts,
# torch and Python use; not any mention of a device ("device-side assert triggered" is a
# crash) or of something missing (a data file beside the script: a broken repro).
ENV_SKIP = re.compile(r"\bno (?:CUDA )?GPUs?\b|\bneeds an? (?:CUDA )?GPU\b|no CUDA GPUs are available|"
                      r"no NVIDIA driver|driver on your system is too old|no kernel image is available|"
                      r"not compiled with CUDA|CUDA is not available|no CUDA-capable device|"
                      r"not installed|not importable|cannot be imported|no module named|missing (?:package|module)",
                      re.IGNORECASE)


# ---------------------------------------------------------------- the machine

def _torch_cuda() -> tuple[str | None, str]:
    """(name of GPU 0 or None, torch's CUDA version or "none")."""
    try:
        import torch
    except Exception:
        return None, "none"
    cuda = str(torch.version.cuda or "none")
    try:
        return (torch.cuda.get_device_name(0) if torch.cuda.is_available() else None), cuda
    except Exception:
        return None, cuda


class Facts:
    """What ``[expected_when]`` conditions ask about this machine; looked up lazily, once."""

    def __init__(self, label: str | None = None):
        self._label = label
        self._versions: dict[str, str] = {}

    @functools.cached_property
    def _cuda(self) -> tuple[str | None, str]:
        return _torch_cuda()

    @property
    def gpu(self) -> str | None:
        return self._cuda[0]

    @property
    def label(self) -> str:
        return self._label or self.gpu or "cpu"

    def version(self, package: str) -> str:
        if package not in self._versions:
            self._versions[package] = package_version(package)
        return self._versions[package]


def environment(device_label: str | None = None, packages: Sequence[str] = ()) -> dict[str, Any]:
    """The environment block of a run's JSON: no hostname, no user, no paths. `packages`:
    more to give the versions of (the compilers plugin repros import: suite_packages)."""
    gpu, cuda = _torch_cuda()
    env: dict[str, Any] = {
        "device_label": device_label or gpu or "cpu",
        "gpu": gpu or "none",
        "cuda": cuda,
        "versions": {p: package_version(p) for p in dict.fromkeys((*KEY_PACKAGES, *packages))},
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "trtmin": trtmin_version(package_version("trtmin")),
        "date": date.today().isoformat(),
    }
    if os.environ.get("TRTMIN_BACKEND"):  # e.g. eager: the control run, every repro should be FIXED
        env["trtmin_backend"] = os.environ["TRTMIN_BACKEND"]
    return env


# ---------------------------------------------------------------- one run

@dataclass
class Result:
    name: str
    title: str
    upstream: list[str]
    status: str                  # FIXED | REPRODUCED | SKIPPED | CHANGED | ERROR
    expected: str                # reproduces | fixed | skipped ("?" when the manifest is unreadable)
    ok: bool
    seconds: float
    verdict: str                 # the last non-empty stdout line
    reason: str = ""             # SKIPPED: the script's reason; ERROR: what went wrong
    note: str = ""               # why not ok (or why an unexpected skip is still ok)
    expected_because: str = ""   # 'expected_when "COND"' when an override chose `expected`
    returncode: int | None = None
    stderr_tail: list[str] = field(default_factory=list)
    backend: str = ""            # the manifest's: what a CI job groups or filters the rows by
    oracle: str = ""
    device: str = ""
    timed_out: bool = False      # killed at --timeout (status CHANGED: no verdict in time, or one and a hang after)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(status: str, expected: str, reason: str = "", strict_skips: bool = False) -> tuple[bool, str]:
    """(ok, note) of a status against the expected one; the rules are in the module docstring."""
    if status == ERROR:
        return False, "the script did not run to a verdict"
    if status == CHANGED and expected == "changed":  # a stack where it is known to fail otherwise (its notes say how)
        return True, ""
    if status == CHANGED:
        return False, (f"fails differently from the reduced bug ({expected} is expected): its error changed or "
                       "another failure hides it; read the verdict line, then update the repro or its manifest")
    if status == SKIPPED:
        if expected == "skipped":
            return True, ""
        if strict_skips:
            return False, f"skipped where {expected} is expected (strict skips)"
        if ENV_SKIP.search(reason):
            return True, "cannot run here: says nothing about the bug"
        return False, "skipped for a reason that is not a missing GPU or package"
    got = EXPECTATION_OF[status]
    if got == expected:
        return True, ""
    if expected == "reproduces" and status == FIXED:
        return False, ("the bug no longer reproduces here: if a release fixed it, say so in manifest.toml "
                       "([expected_when] or expected = \"fixed\")")
    if expected == "fixed" and status == REPRODUCED:
        return False, "regression: the bug is back where it should be fixed"
    return False, f"{status} where {expected} is expected"


# The compiler's own package, which any script of the backend imports ("a|b": either): what
# a script without a REQUIRES list of its own (one written by hand) needs at least.
REQUIRED_PACKAGES = {"torch_tensorrt": ("torch_tensorrt",), "tensorrt": ("tensorrt|tensorrt_rtx",),
            "executorch": ("executorch",), "onnxruntime": ("onnxruntime",)}


def script_constant(script: Path, name: str) -> Any:
    """The literal value of `script`'s module-level `NAME = ...`, as trtmin writes it
    (minimize/emit/script.py); None where it has none, or no literal."""
    import ast

    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):  # the run will say what is wrong with it
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def script_requires(script: Path) -> list[str] | None:
    """The packages `script` checks for before it calls its backend: its `REQUIRES = [...]`."""
    value = script_constant(script, "REQUIRES")
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else None


def cannot_run_here(backend: str, device: str, facts: Facts, script: Path | None = None) -> str | None:
    """Why a repro cannot run on this machine, known before running it (a CUDA repro
    without a GPU, a package its script checks for, or its compiler, not installed), or
    None: the script would say the same SKIPPED after its eager half, seconds later. The
    eager control needs no compiler."""
    import importlib.util

    if device.startswith("cuda") and facts.gpu is None:
        return "no CUDA GPU is visible here"
    if os.environ.get("TRTMIN_BACKEND") == "eager":
        return None
    own = script_requires(script) if script is not None else None
    for name in own if own is not None else REQUIRED_PACKAGES.get(backend.split(":")[0], ()):
        if not any(importlib.util.find_spec(n) is not None for n in name.split("|")):
            return f"{name.replace('|', ' or ')} is not installed"
    return None


def run_one(repro: Repro, timeout: float = DEFAULT_TIMEOUT, facts: Facts | None = None,
            strict_skips: bool = False) -> Result:
    """Run one saved repro and judge it; a folder with a problem is an ERROR without running,
    and one that cannot run here is SKIPPED without running."""
    m = repro.manifest
    title = m.title if m else repro.name
    upstream = list(m.upstream) if m else []
    if repro.problem or m is None:
        return Result(repro.name, title, upstream, ERROR, m.expected if m else "?", False, 0.0, "",
                      reason=repro.problem or "no manifest",
                      note="fix the repro folder")
    facts = facts if facts is not None else Facts()
    expected, because = m.expectation(facts)
    if os.environ.get("TRTMIN_BACKEND") == "eager":
        expected, because = "fixed", "control run: TRTMIN_BACKEND=eager"
    where = {"backend": m.backend, "oracle": m.oracle, "device": m.device}
    reason = cannot_run_here(m.backend, m.device, facts, repro.script)
    if reason:
        ok, note = judge(SKIPPED, expected, reason, strict_skips)
        return Result(repro.name, title, upstream, SKIPPED, expected, ok, 0.0, "", reason=reason,  # never started:
                      note=note, expected_because=because, returncode=None, **where)  # no line, no exit code
    seconds, attempts = 0.0, 0
    while True:  # a flaky repro (manifest `runs`): again while it says FIXED, and the control once
        rc, out, err, timed_out, took = run_script(repro.script, timeout)
        status, reason, verdict = classify(rc, out, err, timed_out, timeout)
        seconds, attempts = seconds + took, attempts + 1
        if status != FIXED or attempts >= m.runs or os.environ.get("TRTMIN_BACKEND") == "eager":
            break
    if m.runs > 1 and status in (FIXED, REPRODUCED):
        verdict += f" (run {attempts} of up to {m.runs}: flaky)"
    own = script_constant(repro.script, "CHILD_TIMEOUT_S") if timed_out else None  # a hang's repro: its own wait
    if isinstance(own, (int, float)) and own >= timeout:  # it waits out its own timeout before its verdict
        status, verdict = ERROR, ""
        reason = (f"no verdict within {timeout:g} s, and the script waits {own:g} s for its hang before it "
                  f"says: run it with --timeout above {own:g}")
    ok, note = judge(status, expected, reason, strict_skips)
    if timed_out and status == CHANGED:  # no verdict in time: a hang now, or too short a --timeout; no error changed
        note = reason
    elif status == CHANGED and not ok and (was := reduced_bug(repro.path)):  # what it was, beside what it is now
        note += f"; the reduced bug: {first_line(was)}"
    tail = [ln for ln in err.splitlines() if ln.strip()][-8:] if status == ERROR else []
    return Result(repro.name, title, upstream, status, expected, ok, round(seconds, 2), verdict, reason=reason,
                  note=note, expected_because=because, returncode=rc, stderr_tail=tail, timed_out=timed_out, **where)


def reduced_bug(folder: Path) -> str | None:
    """The bug a saved repro was reduced for, as its reduction's summary.json says it
    ("MISMATCH: output 0 differs ..."); None for a hand-written one."""
    try:
        verdict = json.loads((folder / "summary.json").read_text(encoding="utf-8")).get("final_verdict")
    except (OSError, ValueError, AttributeError):
        return None
    return verdict if isinstance(verdict, str) and verdict.strip() else None


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM, holding what it had: the results finished before
    it, in suite order, and the names of the repros it did not finish."""

    def __init__(self, results: list[Result], not_finished: list[str]):
        super().__init__()
        self.results, self.not_finished = results, not_finished


def run_repros(root: Path | str | None = None, names: Sequence[str] | None = None,
               timeout: float = DEFAULT_TIMEOUT, env_label: str | None = None, *, strict_skips: bool = False,
               on_result: Callable[[Result], None] | None = None, jobs: int = 1) -> list[Result]:
    """Run the suite at ``root`` (default: the shipped one), or the repros in ``names``,
    ``jobs`` at a time (each in its own process; 1: one after another, as repros that share
    a GPU may need). Results come back in suite order; ``on_result`` is called as each one
    finishes, for progress. ``env_label`` is the device label that ``label:`` conditions see
    (default: the GPU's name or "cpu"). Unknown names raise TrtminError."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    facts = Facts(env_label)
    repros = find_repros(root, names)
    results: dict[int, Result] = {}
    STOPPING.clear()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        _ = facts.gpu  # looked up once, before the threads ask (torch's import: a stop there is a stop too)
        futures = {pool.submit(run_one, repro, timeout, facts, strict_skips): i for i, repro in enumerate(repros)}
        for future in as_completed(futures):
            results[futures[future]] = result = future.result()
            if on_result is not None:
                on_result(result)
    except BaseException as e:  # Ctrl-C, SIGTERM: the scripts the threads run end too
        pool.shutdown(wait=False, cancel_futures=True)
        kill_running()
        if isinstance(e, KeyboardInterrupt):
            finished = sorted(results)
            raise Interrupted([results[i] for i in finished],
                              [r.name for i, r in enumerate(repros) if i not in results]) from e
        raise
    pool.shutdown()
    return [results[i] for i in range(len(repros))]


def suite_packages(root: Path | str | None = None, names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The packages the plugin repros among these import (each one's plugin.py): a plugin's
    compiler (`mycompiler`) is what a release changes, and a run that did not record its
    version gave every release's column the same header."""
    found: dict[str, None] = {}
    for repro in find_repros(root, names):
        if (repro.path / "plugin.py").is_file():  # repros add copies a plugin under that name
            found.update(dict.fromkeys(plugin_packages(repro.path / "plugin.py")))
    return tuple(p for p in found if p not in KEY_PACKAGES)


def exit_code(results: Sequence[Result]) -> int:
    """1 when any result is not ok, else 0."""
    return 1 if any(not r.ok for r in results) else 0


# ---------------------------------------------------------------- reporting

def counts(results: Sequence[Result], not_finished: Sequence[str] | None = None) -> dict[str, Any]:
    """The summary a CI job reads: per status, not_ok, not_finished (an interrupted run's)
    and all_ok, true only where every repro ran and agreed with its manifest."""
    c = {s: sum(r.status == s for r in results) for s in (REPRODUCED, FIXED, SKIPPED, CHANGED, ERROR)}
    not_ok, stopped = sum(not r.ok for r in results), len(not_finished or ())
    return {"total": len(results), **{k.lower(): v for k, v in c.items()}, "not_ok": not_ok,
            "not_finished": stopped, "all_ok": not not_ok and not stopped}


def results_to_json(results: Sequence[Result], env: dict[str, Any] | None = None,
                    not_finished: Sequence[str] | None = None) -> dict[str, Any]:
    """The JSON record of one run (``env``: from ``environment(device_label)``); the input of
    ``repros.table.merge_tables``. ``not_finished``: an interrupted run's unfinished repros, kept
    under "interrupted" so the record cannot pass for a whole run."""
    record = {"format": JSON_FORMAT, "environment": env if env is not None else environment(),
              "summary": counts(results, not_finished), "results": [r.to_dict() for r in results]}
    if not_finished is not None:
        record["interrupted"] = {"not_finished": list(not_finished)}
    return record


def json_text(results: Sequence[Result], env: dict[str, Any] | None = None,
              not_finished: Sequence[str] | None = None) -> str:
    """``results_to_json`` as the file (or `--json -`'s stdout) holds it."""
    return json.dumps(results_to_json(results, env, not_finished), indent=2, sort_keys=True) + "\n"


def write_json(path: Path, results: Sequence[Result], env: dict[str, Any] | None = None,
               not_finished: Sequence[str] | None = None) -> None:
    """Write ``json_text`` to ``path`` (through a temporary file and a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json_text(results, env, not_finished), encoding="utf-8")
    os.replace(tmp, path)


STATUS_STYLE = {FIXED: "green", REPRODUCED: "yellow", SKIPPED: "dim", CHANGED: "magenta", ERROR: "bold red"}


def render_table(results: Sequence[Result]):
    """A rich Table, a row a repro: its name with the verdict line (or what went wrong) under
    it, status (coloured), expected, ok, time. The long texts share the first column, which
    wraps: at 80 columns a verdict column beside five others had one character a line."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("repro: verdict", overflow="fold", ratio=1, min_width=20)
    table.add_column("status", no_wrap=True)
    table.add_column("expected", overflow="fold", min_width=10, max_width=24)
    table.add_column("ok", no_wrap=True, justify="center")
    table.add_column("time", no_wrap=True, justify="right")
    for r in results:
        line = Text(r.verdict or (f"not run: {r.reason}" if r.status == SKIPPED else ""))
        if r.status == ERROR:
            line = Text(r.reason, style="red")
        if not r.ok and r.note and r.status != ERROR:
            line.append(f"\n{r.note}", style="red")
        expected = r.expected + (f" ({r.expected_because})" if r.expected_because else "")
        table.add_row(Text.assemble((r.name, "bold"), "\n", line), Text(r.status, style=STATUS_STYLE.get(r.status, "")),
                      expected, Text("yes", style="green") if r.ok else Text("NO", style="bold red"),
                      f"{r.seconds:.1f} s")
    return table


def summary_line(results: Sequence[Result], not_finished: Sequence[str] | None = None) -> str:
    """One line for the end of a run, e.g. '10 repros: 2 reproduced, ...; all as expected'.
    An interrupted run's (`not_finished`) never says all is as expected: stdout may be all
    a CI log keeps."""
    c = counts(results)
    head = (f"{c['total']} repro{'s' if c['total'] != 1 else ''}: {c['reproduced']} reproduced, {c['fixed']} fixed, "
            f"{c['skipped']} skipped, {c['changed']} changed, {c['error']} error{'s' if c['error'] != 1 else ''}")
    bad = [r.name for r in results if not r.ok]
    tail = f"; NOT as expected: {', '.join(bad)}" if bad else "" if not_finished else "; all as expected"
    return head + tail + (f"; INTERRUPTED: {len(not_finished)} not finished" if not_finished else "")
