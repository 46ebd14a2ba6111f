"""After the reduction, repro.py is run alone, in a new process, as a maintainer will run it.

Every verdict of the reduction came from a warm worker; the deliverable is a script. Running
it once shows that it reproduces on its own (its inputs file, its copied plugin, a fresh
interpreter and compiler), and catches what a worker hides: a compiler that fails only
sometimes (a flaky bug passes here), a bug that needs process state, a script that cannot
run. One compile of the reduced program: a few seconds, against the reduction's calls.
`--no-verify` skips it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from oracles.errors import without_scratch_folders
from oracles.script_run import REPRODUCED, classify, run_script

SCRIPT_SWITCHES = ("TRTMIN_BACKEND", "TRTMIN_CHILD")  # what repro.py itself reads (the control, its child)
START_UP_S = 300.0  # beside the oracle's timeout: a new interpreter, torch's import, the compile


def run_alone(script: Path, timeout: float) -> dict[str, Any]:
    """status (REPRODUCED, FIXED, SKIPPED, CHANGED or ERROR, as `repros run` says it), the
    script's exit code, its verdict line (or why there is none), and seconds; a run killed by
    SIGKILL from outside is run once more, as a worker's job is. The script's
    own switches (TRTMIN_BACKEND=eager, TRTMIN_CHILD) are not passed on from this shell; the
    rest of the environment is, a plugin's own TRTMIN_-named settings and PYTHONPATH included
    (the report then names PYTHONPATH as _search_path gives it)."""
    limit = timeout + START_UP_S
    rc, out, err, timed_out, seconds = run_script(script, limit, without=SCRIPT_SWITCHES)
    if rc == -signal.SIGKILL and not timed_out:  # killed from outside (the OOM killer, a user): once more, as a
        rc, out, err, timed_out, more = run_script(script, limit, without=SCRIPT_SWITCHES)  # worker's job is
        seconds += more
    status, reason, verdict = classify(rc, out, err, timed_out, limit)
    search_path = _search_path()
    return {"status": status, "exit": rc, "line": verdict or reason, "seconds": round(seconds, 1),
            **({"pythonpath": search_path} if search_path else {})}


def _search_path() -> str:
    """PYTHONPATH as the report names it: each folder once, less trtmin's own checkout,
    which repro.py never imports (a maintainer would read it as something to set up)."""
    own = os.path.realpath(Path(__file__).resolve().parents[2])
    folders = os.environ.get("PYTHONPATH", "").split(os.pathsep)  # "": the cwd
    return os.pathsep.join(dict.fromkeys(f for f in folders if not f or os.path.realpath(f) != own))


def report_line(alone: dict[str, Any], repeat: int = 1) -> str:
    """What the report and the CLI say of it: a plain fact when it reproduced, else what
    that likely means and what to do."""
    said = f"`{without_scratch_folders(alone['line'])}`" if alone["line"] else "nothing"  # its temporary folder is gone
    where = f" (with PYTHONPATH={alone['pythonpath']})" if alone.get("pythonpath") else ""
    if alone["status"] == REPRODUCED:
        return f"Run alone after the reduction, `python repro.py`{where} printed {said} (exit 1)."
    flaky = ("measure it with `trtmin check --repeat 10` and reduce with --repeat" if repeat == 1 else
             f"it may fail less often than --repeat {repeat} can tell: measure it with `trtmin check --repeat "
             f"{max(10, 4 * repeat)}`")
    return (f"WARNING: run alone after the reduction, `python repro.py`{where} ended {alone['status']} (exit "
            f"{alone['exit']}) and printed {said}. The reduction's verdicts came from trtmin's workers: if the "
            f"compiler fails only sometimes, {flaky}; if the script cannot run here, see its message; else "
            f"repro.py does not run what the workers ran, which is trtmin's bug: please report it, with this folder.")
