"""Test helpers: run the CLI and repro scripts in fresh processes, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent


def alone_env(**extra: str) -> dict[str, str]:
    """The environment a script runs alone in: without trtmin on the path (PYTHONPATH keeps
    only other folders, such as a staged Torch-TensorRT's) and without TRTMIN_BACKEND."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRTMIN_BACKEND")}
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != ROOT and p != "."]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    return {**env, **extra}


def run_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "minimize.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def run_cli_unread(*args: str, timeout: float = 900) -> int:
    """The command's exit code when nobody reads its screen: stdout and stderr go to a pipe
    whose reader has gone (`trtmin reduce ... 2>&1 | head -1` once head has its line)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "minimize.cli", *args], stdout=write, stderr=write,
                              timeout=timeout, env=env, cwd=ROOT).returncode
    finally:
        os.close(write)


def run_cli_here(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in this process (minimize.cli.run, what `trtmin` runs less its
    signal handlers and fast exit), for errors found before any worker starts: the same
    words and exit code without a new interpreter importing torch (3-7 s each). An
    exception that escapes is written to stderr as its traceback, as a process would."""
    import contextlib
    import io
    import traceback

    from minimize import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.run(list(args))
        except BaseException:  # noqa: BLE001 - a traceback is what the test must see
            traceback.print_exc()
            code = 1
    code = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["trtmin", *args], code, out.getvalue(), err.getvalue())


def check_here(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli_here("check", *with_question(*args))


def reduce_here(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli_here("reduce", *with_question(*args))


def with_question(*args: str) -> tuple[str, ...]:
    """`check` or `reduce` arguments with the question asked: --oracle mismatch and
    --backend inductor where a test about something else gives neither."""
    extra = (() if "--oracle" in args else ("--oracle", "mismatch")) + \
        (() if "--backend" in args else ("--backend", "inductor"))
    return (*args, *extra)


def run_check(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run_cli("check", *with_question(*args), timeout=timeout)


def run_reduce(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run_cli("reduce", *with_question(*args), timeout=timeout)


def run_repro(folder: Path, backend: str | None = None, timeout: float = 600,
              script: str = "repro.py", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs repro.py (or another script of the folder) alone, in a new process, from a clean
    environment (no trtmin on the path; `env` added)."""
    env = alone_env(**({"TRTMIN_BACKEND": backend} if backend else {}), **(env or {}))
    return subprocess.run([sys.executable, str(folder / script)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=folder)


SNIPPET_CHECK = '''
import importlib.util
spec = importlib.util.spec_from_file_location("repro", "repro.py")
repro = importlib.util.module_from_spec(spec)
spec.loader.exec_module(repro)
with torch.no_grad():
    inputs = [x.to(repro.DEVICE) if isinstance(x, torch.Tensor) else x for x in repro.make_inputs()]
    ran = repro.Repro().to(repro.DEVICE)(*inputs)
    expected = list(ran) if isinstance(ran, (list, tuple)) else [ran]
eager_out = list(out) if isinstance(out, (list, tuple)) else [out]
assert len(eager_out) == len(expected), (len(eager_out), len(expected))
for a, b in zip(eager_out, expected):
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
print("SNIPPET OK")
if "got" in globals():  # the backend's call ran: say whether it differs from eager, as the bug does
    compiled = list(got) if isinstance(got, (list, tuple)) else [got]
    same = len(compiled) == len(eager_out) and all(
        torch.allclose(a.float(), b.float().to(a.device), rtol=1e-3, atol=1e-3, equal_nan=True)
        for a, b in zip(compiled, eager_out))
    print("SNIPPET BACKEND", "SAME" if same else "DIFFERS")
'''
COMPARE = "torch.testing.assert_close(got, out, "  # a mismatch snippet's last line: it raises on the bug


def report_snippet_text(folder: Path) -> str:
    """The snippet at the top of report.md: its first python block."""
    return (folder / "report.md").read_text().split("```python\n", 1)[1].split("```", 1)[0]


def run_report_snippet(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Runs the eager snippet at the top of report.md alone (beside repro.py, whose tensors
    file it may read; `env` added to its environment) and checks it computes what repro.py's
    Repro does, exactly. A
    mismatch's last line, its assert, runs after that check: it prints SNIPPET ASSERT
    RAISES with assert_close's first words where it raises, as it does on the bug."""
    lines = report_snippet_text(folder).rstrip("\n").splitlines()
    compare = lines.pop() if lines and lines[-1].startswith(COMPARE) else ""
    after = (f"try:\n    {compare}\n    print('SNIPPET ASSERT PASSES')\nexcept AssertionError as e:\n"
             f"    print('SNIPPET ASSERT RAISES', str(e).strip().splitlines()[0])\n") if compare else ""
    check = folder.parent / f"{folder.name}_snippet_check.py"
    check.write_text("\n".join(lines) + "\n" + SNIPPET_CHECK + after)
    return subprocess.run([sys.executable, str(check)], capture_output=True, text=True, timeout=300,
                          env=alone_env(**env), cwd=folder)


def repro_info(verdict: Any, title: str = "t", device: str = "cpu") -> Any:
    """A ReproInfo for a bug that shows as `verdict`, cut from 18 nodes to 3 in 3 calls at
    trtmin's default tolerances, as reduce would hand it to the emitters."""
    from minimize.emit.script import ReproInfo
    from oracles.verdict import Signature

    return ReproInfo(title=title, source_model="model.pt2", original_nodes=18, final_nodes=3, oracle_calls=3,
                     oracle=verdict.kind, verdict=verdict, signature=Signature.of(verdict), match=None, atol=1e-3,
                     rtol=1e-3, device=device, needs_subprocess=False, timeout=300.0)


def write_repro(folder: Path, gm: Any, inputs: dict[str, Any], constants: dict[str, Any], verdict: Any,
                backend: Any, device: str = "cpu") -> str:
    """repro.py of the graph `gm` (fed `inputs`, with `constants`) for a bug that shows as
    `verdict` on `backend`, as trtmin writes it, into `folder` with its tensors file."""
    import torch

    from minimize.emit.script import INPUTS_FILE, render_script

    info = repro_info(verdict, f"{verdict.kind} on {backend.describe()}", device)
    script, big = render_script(info, gm, inputs, constants, backend)
    (folder / "repro.py").write_text(script)
    torch.save(big, folder / INPUTS_FILE)
    return script


def cpu_program(module: Any, *inputs: Any, **options: Any) -> Any:
    """`module` exported with `inputs` and loaded as trtmin loads a model on --device cpu
    (minimize/program/inputs.py prepare), as a Program fed those inputs; `options` are
    Program's (fixed_random)."""
    import torch

    from minimize.program.inputs import prepare
    from minimize.program.model import Program

    return Program(prepare(torch.export.export(module, tuple(inputs)), "cpu"), list(inputs), **options)


def reduce_with(program: Any, judge: Callable[[Any], Any], passes: Callable[[Any], None] | None = None,
                jobs: int = 1, settings: dict[str, str] | None = None,
                check_original: Callable[[Any], None] = lambda v: None,
                partitions: Callable[[Any], list[list[str]]] | None = None, **rules: Any) -> Any:
    """A reduction in this process against a pure oracle, as the CLI runs it but with no
    workers: `judge(candidate)` gives a Verdict (or a list, for --repeat); `passes(problem)`
    is what runs (default: the whole reduction); `rules` are the problem's Rules (localize,
    generate_values, ...); `partitions` the backend's engines of a candidate, where it reports
    them. The problem comes back with `.evaluated`, every candidate the
    oracle was asked, in order."""
    from minimize.search.problem import ReductionProblem, Rules
    from minimize.search.scheduler import run_reduction

    evaluated: list[Any] = []

    def evaluate(cands: list[Any]) -> list[Any]:
        evaluated.extend(cands)
        return [judge(c) for c in cands]

    problem = ReductionProblem(program, evaluate, Rules(**rules), settings=settings, jobs=jobs,
                               check_original=check_original, partitions=partitions)
    problem.evaluated = evaluated
    (passes or run_reduction)(problem)
    return problem


def worker_in_process(folder: Path, program: Any, plugin_source: str, function: str) -> Callable[[dict], dict]:
    """A worker's run function, set up in this process on `program` with a plugin backend
    (`plugin_source`'s `function`) written into `folder`: what a worker answers a job with."""
    import gc

    from minimize.run.worker_side import save_state, worker_setup
    save_state(program, folder)
    (folder / "plugin.py").write_text(plugin_source)
    try:
        return worker_setup(str(folder), f"{folder / 'plugin.py'}:{function}", {}, 1e-3, 1e-3, "cpu")
    finally:
        gc.unfreeze()  # worker_setup freezes the heap, as a worker process does


def running(pid: int) -> bool:
    """Whether process `pid` runs: gone, or a zombie (dead, waiting for a reaper that may be
    no parent of ours), it does not."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False

