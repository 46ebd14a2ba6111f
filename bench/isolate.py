"""Run one call in a forked child, for benchmark cases whose compiler kills its process
(KILLS_PROCESS): fx_minifier and check_cases.py call the compiler in-process, and a
segfault there would end the benchmark. A fork is what PyTorch's own minifier does with
its isolated mode (a subprocess per check), at a fraction of the cost (the child runs
torch single-threaded: its parent has used OpenMP's threads, which a fork cannot.)"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from typing import Any, Callable


class Killed(Exception):
    """The child died by a signal; the message is the signal's name (SIGSEGV)."""


def in_fork(fn: Callable[[], Any]) -> Any:
    """fn()'s result (it must pickle), fn's exception re-raised as RuntimeError, or Killed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(r)
        torch = sys.modules.get("torch")
        if torch is not None:  # GNU OpenMP hangs a fork whose parent used its threads
            torch.set_num_threads(1)
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as e:  # noqa: BLE001
            payload = pickle.dumps(("error", f"{type(e).__name__}: {e}"))
        with os.fdopen(w, "wb") as f:
            f.write(payload)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code < 0:
        raise Killed(signal.Signals(-code).name)
    tag, value = pickle.loads(data)
    if tag == "error":
        raise RuntimeError(value)
    return value
