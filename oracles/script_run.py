"""Run a generated script (repro.py) in a fresh process and say what its exit means: the
saved-repro runner and the check after a reduction read a script the same way.

Status of one run (``[sys.executable, repro.py]``, cwd = its folder, no shell, a timeout):

- exit 0 -> FIXED, exit 1 -> REPRODUCED,
- exit 2 with a last stdout line ``SKIPPED: <reason>`` -> SKIPPED (reason = the text after it),
- exit 3 with a last stdout line ``CHANGED: <how>`` -> CHANGED: the script ran, and the
  backend fails, but not as the reduced bug did (another error, a hang or a kill),
- death by SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL -> CHANGED: a script that runs its bug
  in-process now dies of the compiler; but where it had printed its verdict line, that
  verdict (it died at exit, after deciding: a native library's teardown),
- the timeout (the whole process group is killed) -> CHANGED (it hangs now), but where the
  script had printed its verdict line, that verdict (it hung at exit, after deciding),
- anything else -> ERROR with a reason: another exit code (3 without a ``CHANGED:`` line), a
  kill from outside (SIGKILL, SIGTERM), exit 2 without a ``SKIPPED:`` line (Python itself
  exits 2 when it cannot open the script), a verdict line that contradicts the exit code
  (exit 1 but "FIXED: ..."), or exit 0 or 1 without its ``FIXED:`` or ``REPRODUCED:`` line
  (an empty script exits 0, an uncaught exception 1: a broken script, not the bug).

The verdict line is the last non-empty line of stdout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from oracles.errors import without_colours
from oracles.supervise import supervised

FIXED, REPRODUCED, SKIPPED, CHANGED, ERROR = "FIXED", "REPRODUCED", "SKIPPED", "CHANGED", "ERROR"
STATUS_BY_EXIT = {0: FIXED, 1: REPRODUCED, 2: SKIPPED, 3: CHANGED}
VERDICT_MAX = 500


# Signals a process gets from its own fault (the compiler's, in a repro), not from outside
# (SIGKILL, SIGTERM: the OOM killer, a user): the bug now kills the process.
DEATHS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


# The line a script's main prints as it returns, word for word ("Fixed seed 0" is no verdict)
VERDICT_LINE = re.compile(r"(FIXED|REPRODUCED|SKIPPED|CHANGED):")

# A script Python cannot compile exits 1 with no traceback header, only this last line
SYNTAX_ERROR = re.compile(r"(SyntaxError|IndentationError|TabError)\b")


def _last_line(text: str) -> str:
    """The output's last line, without colour codes (torch.onnx's cyan "step 3/3" went into
    report.md's table as escape bytes)."""
    lines = [ln.strip() for ln in without_colours(text).splitlines() if ln.strip()]
    return lines[-1][:VERDICT_MAX] if lines else ""


def _prefix(verdict: str) -> str:
    return re.split(r"[:\s]", verdict, maxsplit=1)[0].upper() if verdict else ""


def classify(returncode: int | None, stdout: str, stderr: str, timed_out: bool = False,
             timeout: float | None = None) -> tuple[str, str, str]:
    """(status, reason, verdict line) of one finished (or killed) script run."""
    verdict = _last_line(stdout)
    err_last = _last_line(stderr)
    said = f": {verdict}" if verdict else (f" (stderr: {err_last})" if err_last else ", no output")
    printed = VERDICT_LINE.match(verdict)
    if timed_out and printed:  # main returned; the hang came after
        return (printed.group(1), f"it printed its verdict, then did not exit within {timeout:g} s and was killed "
                                  "(a hang at exit: a thread or a library's teardown)", verdict)
    if timed_out:  # a release that now hangs fails differently: no broken script (ERROR)
        return (CHANGED, f"no verdict within {timeout:g} s{said}: it hangs now, or the machine is slower "
                         "(raise --timeout)", f"CHANGED: no verdict within {timeout:g} s (a hang?)")
    assert returncode is not None
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if -returncode in DEATHS and printed:  # main returned and printed: the death came after, at exit
            return (printed.group(1), f"it printed its verdict, then died of {name} (at exit: a library's teardown)",
                    verdict)
        if -returncode in DEATHS:  # a script that runs its bug in-process dies with the compiler
            return CHANGED, f"the process died of {name}{said}", f"CHANGED: the process died of {name}"
        return ERROR, f"killed by {name}{said}", verdict
    status = STATUS_BY_EXIT.get(returncode)
    if status is None:
        return ERROR, f"exit code {returncode}{said}", verdict
    prefix = _prefix(verdict)
    if status == CHANGED and prefix != CHANGED:  # a 3 of the script's own making (sys.exit(3)) is no verdict
        return ERROR, f"exit code 3{said}", verdict
    if status == SKIPPED:
        if prefix != SKIPPED:
            return ERROR, f"exit code 2 without a 'SKIPPED: <reason>' line{said}", verdict
        return SKIPPED, verdict.split(":", 1)[1].strip() if ":" in verdict else "no reason given", verdict
    if prefix in (FIXED, REPRODUCED, SKIPPED, CHANGED) and prefix != status:
        return ERROR, f"exit code {returncode} ({status}) but the verdict line says {prefix}: {verdict}", verdict
    if status == REPRODUCED and prefix != REPRODUCED and ("Traceback (most recent call last)" in stderr
                                                          or SYNTAX_ERROR.match(err_last)):
        return ERROR, f"the script raised and exited 1 without a REPRODUCED line: {err_last}", verdict
    if prefix != status:  # an empty file exits 0, a bare sys.exit(1) 1: no verdict on the bug
        return ERROR, f"exit code {returncode} without a '{status}: ...' line{said}", verdict
    return status, "", verdict


def _kill_group(proc: subprocess.Popen) -> None:
    """End a script run_script started, with anything it started: on POSIX its supervisor,
    told by SIGTERM, kills the script's process group (the supervisor's own SIGKILL would
    leave that group running)."""
    try:
        proc.send_signal(signal.SIGTERM) if os.name == "posix" else proc.kill()  # neither once it is reaped
    except (ProcessLookupError, PermissionError):
        pass


_RUNNING: set[subprocess.Popen] = set()  # scripts running now, from any thread
STOPPING = threading.Event()  # set by kill_running: a script about to start does not


def kill_running() -> None:
    """End every script run_script is running (each with its process group), and start no
    more: the scripts of other threads when the main one is interrupted."""
    STOPPING.set()
    for proc in list(_RUNNING):
        _kill_group(proc)


TAIL_BYTES = 256 * 1024  # of a script's stdout and stderr: its verdict line is the last, its error near it


def _tail(f: Any) -> str:
    """The last TAIL_BYTES of a file a script wrote, as text (from a whole line)."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - TAIL_BYTES))
    text = f.read().decode("utf-8", errors="replace")
    return text if size <= TAIL_BYTES else f"[{size - TAIL_BYTES} bytes before this cut]\n" + text.split("\n", 1)[-1]


def run_script(script: Path, timeout: float, without: Sequence[str] = ()) -> tuple[int | None, str, str, bool, float]:
    """Run one script: (returncode, stdout, stderr, timed_out, seconds); `without`: variables
    of this environment the script must not see."""
    script = Path(script).resolve()
    env = {**{k: v for k, v in os.environ.items() if k not in without},
           "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.monotonic()
    if STOPPING.is_set():
        raise KeyboardInterrupt
    # On POSIX under a supervisor (oracles/supervise.py), which kills the script's
    # process group when trtmin dies, even by kill -9: a TensorRT build or a hang's child
    # outlived it before, in a session of its own.
    command = [*(supervised("") if os.name == "posix" else []), sys.executable, str(script)]
    # into files, of which the tails are read: a script printing 200 MB held them all in memory
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, cwd=script.parent, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=(os.name == "posix"))
        _RUNNING.add(proc)
        try:
            if STOPPING.is_set():  # kill_running ran between the check and the start
                raise KeyboardInterrupt
            proc.wait(timeout=timeout)
            return proc.returncode, _tail(out), _tail(err), False, time.monotonic() - start
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # the supervisor itself stuck: kill it
                proc.kill()
                proc.wait()
            return None, _tail(out), _tail(err), True, time.monotonic() - start
        except BaseException:  # KeyboardInterrupt: leave nothing running
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            _RUNNING.discard(proc)
