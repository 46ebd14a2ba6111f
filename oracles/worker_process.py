"""What runs inside a worker process: build the job runner from its setup spec, say
READY, then answer jobs until told to stop. Imports nothing of the reducer, so that the
pool (oracles/worker.py) and the zygote (oracles/zygote.py) can both start it.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Iterator

from oracles import bytecode
from oracles.address_space import mib_to_ask, set_address_limit
from oracles.errors import TrtminError

READY = "__ready__"


@dataclass
class WorkerConfig:
    setup: str                       # "module:function" returning a job runner
    setup_kwargs: dict[str, Any]
    timeout_s: float = 300.0         # per job
    memory_limit_bytes: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    # "module:function", called with setup_kwargs in the zygote before it forks workers: the
    # imports and warm-up every worker shares (nothing that must not cross a fork, like CUDA)
    preload: str | None = None
    # the same, called in the zygote before each fork (what became ready since, to share)
    prefork: str | None = None


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (even by kill -9), so a hung
    compile never outlives trtmin."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Around the start of a spawned process (the zygote, a worker): it inherits SIGINT
    ignored through its exec, and Python keeps it so. A terminal's Ctrl-C reaches the whole
    foreground group; the main process stops the workers itself, and a worker still
    importing printed a KeyboardInterrupt traceback above "interrupted". The main process's
    own handler is back once the process has started (from the main thread only: elsewhere
    signal handlers cannot be set, and the start goes as it did)."""
    try:
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def own_process_group() -> None:
    """Make this worker the leader of a process group of its own, which the processes a
    compiler starts (a linker, a build helper, a shell) join: a worker killed for a hang is
    killed with them (kill_worker), not leaving them running under init. The terminal's
    Ctrl-C then reaches the main process alone, which stops the workers itself."""
    try:
        os.setpgid(0, 0)
    except (OSError, AttributeError):  # not POSIX, or not allowed: the worker alone is killed
        return
    # Out of the terminal's group, it no longer needs SIGINT ignored (sigint_ignored): what
    # the compiler starts gets the usual SIGINT, as in repro.py or at a shell.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def kill_worker(pid: int) -> None:
    """SIGKILL a worker, then SIGTERM what it started in its group (own_process_group): a
    helper ends, and trtmin's command launcher (oracles/supervise.py), which a SIGKILL would
    stop before it killed its command's own group, ends that command first."""
    for send in (lambda: os.kill(pid, signal.SIGKILL), lambda: os.killpg(pid, signal.SIGTERM)):
        try:
            send()
        except (OSError, AttributeError):  # gone already; no group of its own yet (killed as it starts)
            pass


def exit_now(code: int = 0) -> None:
    """End this process now, its work done and its files closed: run the multiprocessing
    finalizers (they unregister semaphores with the resource tracker, which else warns of
    leaks), flush, and skip the interpreter's teardown of torch, CUDA and Dynamo (seconds
    a process, at the end of every run and of every worker; Inductor's compile helpers
    end themselves when their parent is gone)."""
    import multiprocessing.util
    multiprocessing.util._exit_function()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def log_to(path: str) -> None:
    """Send this process's stdout and stderr (native crash output too: a segfault's
    message, an abort's assertion) to a file, to be quoted in the verdict."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def log_position() -> int | None:
    """How much this worker has written to its log (log_to's file, both streams), for
    log_since; None where stderr is no file (a worker run by hand)."""
    try:
        return os.lseek(2, 0, os.SEEK_CUR)
    except OSError:
        return None


def log_since(position: int | None, limit: int = 64 << 10) -> str:
    """What the log gained after `position` (its first `limit` bytes: a cause is logged
    first): a job's native output, the compiler's words of an error it only returns a code for."""
    if position is None:
        return ""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        with open("/proc/self/fd/2", "rb") as log:
            log.seek(position)
            return log.read(limit).decode(errors="replace")
    except OSError:
        return ""


def call_spec(spec: str, kwargs: dict[str, Any]) -> tuple[Any, float]:
    """Import "module:function" and call it; returns its result and the import's seconds."""
    t0 = time.monotonic()
    module, _, fn = spec.partition(":")
    function = getattr(importlib.import_module(module), fn)
    imported = round(time.monotonic() - t0, 2)
    return function(**kwargs), imported


def limit_address_space(limit_bytes: int) -> None:
    """RLIMIT_AS for the jobs (oracles/address_space.py). Below what the worker already maps
    (torch, the compiler, the program), every job would die of it and the original would
    look like a crash."""
    mapped = set_address_limit(limit_bytes)
    if mapped is not None:
        raise TrtminError(f"--memory-limit {limit_bytes >> 20} MiB is below the address space a worker maps before "
                          f"its first job ({mapped >> 20} MiB: torch, the compiler and the program); "
                          f"use at least --memory-limit {mib_to_ask(mapped)}")


def worker_main(conn: Connection, cfg: WorkerConfig, log_path: str) -> None:
    own_process_group()
    log_to(log_path)
    faulthandler.enable(all_threads=False)  # a fatal signal's Python stack to the log: the site of a death
    if hasattr(faulthandler, "register") and hasattr(signal, "SIGUSR1"):  # and on the pool's SIGUSR1: a hang's
        faulthandler.register(signal.SIGUSR1, all_threads=False)
    os.environ.update(cfg.env)
    bytecode.enable()  # the parent's bytecode cache, if it keeps one (before the runner imports torch)
    die_with_parent()
    try:
        runner, imported = call_spec(cfg.setup, cfg.setup_kwargs)
        if cfg.memory_limit_bytes:  # for the jobs: the worker's own start is not the program's
            limit_address_space(cfg.memory_limit_bytes)
    except BaseException as e:  # noqa: BLE001
        conn.send(("setup_error", str(e) if isinstance(e, TrtminError) else f"{type(e).__name__}: {e}"))
        return
    phases = getattr(runner, "start_phases", None)  # seconds per start-up step, if the runner measured them
    conn.send((READY, {"import": imported, **phases} if isinstance(phases, dict) else None))
    while True:
        try:
            job = conn.recv()
        except EOFError:
            job = None
        if job is None:
            exit_now()
        result = runner(job)
        conn.send(("result", result))
        if isinstance(result, dict) and result.get("restart"):
            return  # e.g. a CUDA error left the context unusable: start fresh
