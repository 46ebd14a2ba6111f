"""Isolated worker processes with timeouts (DESIGN.md key idea 6).

Each worker is a fresh `spawn`ed interpreter that builds its job runner from a
`module:function` setup spec, so this module imports nothing of the reducer. A
worker that dies (segfault, abort, SIGKILL) or overruns its timeout is killed and
replaced; its death becomes a verdict, never the end of the tool.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable

from oracles import bytecode
from oracles.errors import TrtminError

READY = "__ready__"
STARTUP_TIMEOUT_S = 600.0
STOP_GRACE_S = 5.0  # for all workers together to exit cleanly before they are killed


@dataclass
class WorkerConfig:
    setup: str                       # "module:function" returning a job runner
    setup_kwargs: dict[str, Any]
    timeout_s: float = 300.0         # per job
    memory_limit_bytes: int | None = None
    env: dict[str, str] = field(default_factory=dict)


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the main process dies (even by kill -9), so a
    hung compile never outlives trtmin."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
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


def _worker_main(conn: Connection, cfg: WorkerConfig, env: dict[str, str], log_path: str) -> None:
    # Native crash output (a segfault's message, an abort's assertion) goes to a log
    # file so it can be quoted in the verdict.
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ.update(env)
    bytecode.enable()  # the parent's bytecode cache, if it keeps one (before the runner imports torch)
    _die_with_parent()
    if cfg.memory_limit_bytes:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (cfg.memory_limit_bytes, cfg.memory_limit_bytes))
    try:
        t0 = time.monotonic()
        module, _, fn = cfg.setup.partition(":")
        setup = getattr(importlib.import_module(module), fn)
        imported = round(time.monotonic() - t0, 2)
        runner: Callable[[Any], Any] = setup(**cfg.setup_kwargs)
    except BaseException as e:  # noqa: BLE001
        conn.send(("setup_error", f"{type(e).__name__}: {e}"))
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


class DiedStarting(TrtminError):
    """A worker process ended before it was ready (killed from outside, or a crash)."""


class _Worker:
    def __init__(self, cfg: WorkerConfig, slot: int, log_dir: Path):
        self.cfg = cfg
        self.slot = slot
        self.log_path = str(log_dir / f"worker{slot}.log")
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.conn: Connection = parent
        env = dict(cfg.env)
        self.proc = ctx.Process(target=_worker_main, args=(child, cfg, env, self.log_path), daemon=True)
        self.proc.start()
        child.close()
        # The start-up limit counts from when the pool first waits for this worker: one
        # started early waits for the main process's load, which is not its own start.
        self.waited_since: float | None = None
        self.job_started = 0.0
        self.ready = False
        self.start_phases: dict[str, float] | None = None

    def start_deadline(self) -> float:
        if self.waited_since is None:
            self.waited_since = time.monotonic()
        return self.waited_since + STARTUP_TIMEOUT_S

    def take_ready(self) -> None:
        """Read the first message of a worker that answered or ran out of start-up time."""
        if not self.conn.poll(0):
            self.kill()
            raise TrtminError(f"a worker did not start within {STARTUP_TIMEOUT_S:.0f} s; see {self.log_path}")
        try:
            tag, payload = self.conn.recv()
        except EOFError:
            raise DiedStarting(f"a worker died while starting ({self.exit_description()}); see {self.log_path}") from None
        if tag != READY:
            raise TrtminError(f"a worker could not start: {payload}")
        self.ready, self.start_phases = True, payload

    def exit_description(self) -> str:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    def log_tail(self, lines: int = 12) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=10)
        self.conn.close()

    def ask_to_stop(self) -> None:
        if not self.ready:  # still starting (or waiting for the state): it reads no messages
            self.kill()
            return
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass

    def finish_stop(self, grace_s: float) -> None:
        self.proc.join(timeout=grace_s)
        if self.proc.is_alive():
            self.kill()

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        self.ask_to_stop()
        self.finish_stop(grace_s)


def death_verdict(description: str, log_tail: str) -> dict[str, Any]:
    """A worker that died mid-job: a crash verdict named after its signal."""
    sig = description.removeprefix("killed by ") if description.startswith("killed by") else ""
    exc_type = "Signal" if sig else "ProcessExit"
    return {"kind": "crash", "exc_type": exc_type, "message": sig or description,
            "detail": "the worker process died", "extra": {"log_tail": log_tail}}


def hang_verdict(timeout_s: float) -> dict[str, Any]:
    return {"kind": "hang", "message": f"no result within the {timeout_s:g} s timeout; the worker was killed"}


class WorkerPool:
    """N workers; `run(jobs)` returns results in job order, whatever finishes first."""

    def __init__(self, cfg: WorkerConfig, jobs: int = 1, per_worker_env: list[dict[str, str]] | None = None,
                 retries: int = 1):
        self.cfg = cfg
        self.retries = retries
        self.n = max(1, jobs)
        self.per_worker_env = per_worker_env or [{} for _ in range(self.n)]
        self._tmp = tempfile.TemporaryDirectory(prefix="trtmin-workers-")
        self.log_dir = Path(self._tmp.name)
        self.workers: list[_Worker | None] = [None] * self.n
        self.restarts = 0
        self.start_retries = [0] * self.n  # per slot: workers that died while starting, replaced
        self.first_start_phases: dict[str, float] | None = None  # of the first worker ready: where start-up goes

    def _start(self, slot: int) -> _Worker:
        """The slot's worker, started if it is missing, or dead after it was ready (one
        that dies while starting is for `_take_ready`, which reads why)."""
        w = self.workers[slot]
        if w is None:
            return self._spawn(slot)
        if w.ready and not w.alive():
            return self._replace(w)
        return w

    def _replace(self, w: _Worker) -> _Worker:
        w.kill()
        self.restarts += 1
        return self._spawn(w.slot)

    def _spawn(self, slot: int) -> _Worker:
        cfg = WorkerConfig(**{**self.cfg.__dict__, "env": {**self.cfg.env, **self.per_worker_env[slot]}})
        w = self.workers[slot] = _Worker(cfg, slot, self.log_dir)
        return w

    def start(self) -> None:
        """Start every worker now (they import in parallel with whatever comes next)."""
        for slot in range(self.n):
            self._start(slot)

    def _take_ready(self, w: _Worker) -> None:
        """A starting worker has answered: it is ready, or its start failed (TrtminError).
        One that died while starting (the OOM killer at the peak of start-up, a stray
        SIGKILL) is replaced, `retries` times a slot; a setup that raises is not retried."""
        try:
            w.take_ready()
        except DiedStarting:
            if self.start_retries[w.slot] >= self.retries:
                raise
            self.start_retries[w.slot] += 1
            self._replace(w)
            return
        if self.first_start_phases is None:
            self.first_start_phases = w.start_phases

    def run(self, jobs: list[Any], while_waiting: Callable[[], None] | None = None) -> list[Any]:
        """Results in job order. A job whose worker dies is run once more (by whichever
        worker is ready first; the dead one is replaced): a worker killed from outside (the
        OOM killer, a stray SIGKILL) is a retry, a compiler that kills its process every
        time is a verdict. `while_waiting` runs once, when the first jobs are out."""
        results: list[Any] = [None] * len(jobs)
        pending = list(range(len(jobs)))[::-1]
        tries = [0] * len(jobs)
        busy: dict[int, int] = {}  # slot -> job index

        def died(j: int, w: _Worker) -> None:
            w.kill()
            tries[j] += 1
            if tries[j] <= self.retries:
                pending.append(j)  # next in line
            else:
                results[j] = death_verdict(w.exit_description(), w.log_tail())

        # While jobs wait, every slot has a worker (missing ones start together and import
        # torch in parallel). A job goes to whichever worker is ready first (their starts
        # differ by a second or more on a GPU machine); results stay in job order, so which
        # one ran it never shows.
        while pending or busy:
            for slot in range(self.n):
                if slot in busy or not pending:
                    continue
                w = self._start(slot)
                if not w.ready:
                    continue
                j = pending.pop()
                try:
                    w.conn.send(jobs[j])
                except (OSError, BrokenPipeError):
                    died(j, w)
                    continue
                w.job_started = time.monotonic()
                busy[slot] = j
            if busy and while_waiting is not None:
                while_waiting()
                while_waiting = None
            starting = [w for s, w in enumerate(self.workers)
                        if pending and s not in busy and w is not None and not w.ready]
            if not busy and not starting:
                continue
            now = time.monotonic()
            deadline = min([self.workers[s].job_started + self.cfg.timeout_s for s in busy]  # type: ignore[union-attr]
                           + [w.start_deadline() for w in starting])
            ready = wait([self.workers[s].conn for s in busy] + [w.conn for w in starting],  # type: ignore[union-attr]
                         timeout=max(0.0, deadline - now))
            for w in starting:
                if w.conn in ready or time.monotonic() >= w.start_deadline():
                    self._take_ready(w)  # raises if it could not start
            for slot in list(busy):
                w = self.workers[slot]
                assert w is not None
                j = busy[slot]
                if w.conn in ready:
                    del busy[slot]
                    try:
                        tag, payload = w.conn.recv()
                    except (EOFError, OSError):
                        died(j, w)
                        continue
                    results[j] = payload
                    if isinstance(payload, dict) and payload.get("restart"):
                        w.stop()  # it asked for a fresh process (e.g. a broken CUDA context)
                        self.workers[slot] = None
                        self.restarts += 1
                elif time.monotonic() - w.job_started >= self.cfg.timeout_s:
                    w.kill()
                    results[j] = hang_verdict(self.cfg.timeout_s)
                    del busy[slot]
        return results

    def close(self) -> None:
        """Stop every worker at once: a worker's exit (CUDA context, compiler pools) takes
        seconds, and one after another they made most of --jobs 4's end on a GPU."""
        live = [w for w in self.workers if w is not None]
        for w in live:
            w.ask_to_stop()
        deadline = time.monotonic() + STOP_GRACE_S
        for w in live:
            w.finish_stop(max(0.0, deadline - time.monotonic()))
        self.workers = [None] * self.n
        self._tmp.cleanup()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
