"""Isolated worker processes with timeouts (docs/design.md#a-reduction-end-to-end).

Each worker builds its job runner from a `module:function` setup spec
(oracles/worker_process.py), so this module imports nothing of the reducer. On Linux
workers are forked from a zygote that has imported and warmed up once
(oracles/zygote.py); elsewhere, or when the zygote is gone, each is a fresh `spawn`ed
interpreter. A worker that dies (segfault, abort, SIGKILL) or overruns its timeout is killed and
replaced; its death becomes a verdict, never the end of the tool.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import sysconfig
import tempfile
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable

from oracles.errors import TrtminError
from oracles.worker_process import READY, WorkerConfig, exit_now, kill_worker, sigint_ignored, worker_main
from oracles.zygote import ForkedProcess, Zygote, zygote_wanted

__all__ = ["WorkerConfig", "WorkerPool", "exit_now"]

STARTUP_TIMEOUT_S = 600.0
STOP_GRACE_S = 5.0  # for all workers together to exit cleanly before they are killed


class DiedStarting(TrtminError):
    """A worker process ended before it was ready (killed from outside, or a crash)."""


class SetupFailed(TrtminError):
    """A worker's setup raised (no compiler, a plugin that fails on import)."""


class _Worker:
    def __init__(self, cfg: WorkerConfig, slot: int, log_dir: Path, zygote: Zygote | None):
        """Forked from the zygote where there is one, else spawned (a fresh interpreter)."""
        self.cfg = cfg
        self.slot = slot
        self.log_path = str(log_dir / f"worker{slot}.log")
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.conn: Connection = parent
        self.proc: Any
        if zygote is not None:
            self.proc = zygote.fork(child, cfg, self.log_path)
        else:
            self.proc = ctx.Process(target=worker_main, args=(child, cfg, self.log_path), daemon=True)
            with sigint_ignored():  # the terminal's Ctrl-C is the main process's to handle
                self.proc.start()
        child.close()
        # The start-up limit counts from when the pool first waits for this worker: one
        # started early waits for the main process's load, which is not its own start.
        self.waited_since: float | None = None
        self.job_started = 0.0
        self.busy = False  # a job sent and not answered: it reads no stop message until the job ends
        self.job_timeout = cfg.timeout_s  # the running job's: a job may ask for less ("timeout_s")
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
            raise SetupFailed(f"a worker could not start: {payload}")
        self.ready, self.start_phases = True, payload

    def exit_description(self) -> str:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        if code is None:
            return "still running" if self.proc.is_alive() else "ended with the zygote it was forked from"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 12) -> str:
        return "\n".join(self.log_text().strip().splitlines()[-lines:])

    def alive(self) -> bool:
        return self.proc.is_alive()

    def stuck_site(self, wait_s: float = 1.0) -> str:
        """Where a worker that ran out of time is stuck, before it is killed: SIGUSR1 makes
        its fault handler write the main thread's Python stack to the log
        (oracles/worker_process.py), read as death_site reads a death's. "" where no stack
        comes within wait_s (a platform without SIGUSR1, a process that cannot take it)."""
        pid = getattr(self.proc, "pid", None)
        if not pid or not hasattr(signal, "SIGUSR1"):
            return ""
        try:
            start = os.path.getsize(self.log_path)
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            return ""
        deadline, seen, said = time.monotonic() + wait_s, -1, ""
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(start)
                    said = f.read().decode(errors="replace")
            except OSError:  # the log is gone: no site, the hang is a verdict all the same
                return ""
            if STACK_HEADER in said and said.endswith("\n") and len(said) == seen:  # written, and no more comes
                break
            seen = len(said)
        return stack_site(said.rpartition(STACK_HEADER)[2], past_stdlib=True) if STACK_HEADER in said else ""

    def kill(self) -> None:
        if self.proc.is_alive():
            if self.proc.pid:
                kill_worker(self.proc.pid)  # with what the compiler started in its group
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


# A frame of the fault handler's stack (oracles/worker_process.py enables it in each worker)
FAULT_FRAME = re.compile(r'^\s*File "([^"]*)", line \d+ in (\S+)\s*$')
STDLIB = sysconfig.get_paths()["stdlib"]
FAULT_HEADER = "Fatal Python error:"
STACK_HEADER = "(most recent call first):"  # the fault handler's words before a thread's frames


def stack_site(frames: str, past_stdlib: bool = False) -> str:
    """The innermost function of the fault handler's `frames` and its caller:
    "string_at (called from segfault_on_tanh)"; "" where there are none. `past_stdlib`: from
    the innermost frame outside Python's own library (a hang waits in threading's join or
    subprocess's select, which names no compiler), and the installed package it is of."""
    found = [m.groups() for m in map(FAULT_FRAME.match, frames.splitlines()) if m]
    if past_stdlib:
        found = [(path, name) for path, name in found if not _in_stdlib(path)] or found
    names = [name for _, name in found]
    site = f"{names[0]} (called from {names[1]})" if len(names) > 1 else "".join(names)
    package = _INSTALLED_PACKAGE.search(found[0][0]) if past_stdlib and found else None
    return f"{site} in {package.group(1).removesuffix('.py')}" if package else site


# the package an installed file is of: a hang "in onnx_ir" is torch.onnx's export's, not the
# TensorRT build the user may take it for (a TensorRT user's hunt)
_INSTALLED_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([^/\\]+)")


def _in_stdlib(path: str) -> bool:
    return path.startswith("<frozen") or (path.startswith(STDLIB) and "-packages" not in path)


def death_site(log: str) -> str:
    """Where a worker died, from the fault handler's stack in its log: the innermost Python
    function and its caller, "string_at (called from segfault_on_tanh)". Two crashes by the
    same signal at other sites are two bugs, and a reduction must not slip from one to the
    other. "" where the log holds no stack (a SIGKILL, a native thread with no Python frame)."""
    return stack_site(log.rpartition(FAULT_HEADER)[2]) if FAULT_HEADER in log else ""


def death_verdict(description: str, log_tail: str, site: str = "") -> dict[str, Any]:
    """A worker that died mid-job: a crash verdict named after its signal and, where the
    fault handler told, the site: "SIGSEGV in string_at (called from segfault_on_tanh)"."""
    sig = description.removeprefix("killed by ") if description.startswith("killed by") else ""
    exc_type = "Signal" if sig else "ProcessExit"
    message = f"{sig} in {site}" if sig and site else sig or description
    return {"kind": "crash", "exc_type": exc_type, "message": message,
            "detail": "the worker process died", "extra": {"log_tail": log_tail}}


def hang_verdict(timeout_s: float, site: str = "") -> dict[str, Any]:
    """A job that overran its timeout; `site`: where the worker was stuck (stuck_site). A
    hang's signature is its kind alone, so the site is for the reader, not the match."""
    where = f", stuck in {site}," if site else ""
    return {"kind": "hang", "message": f"no result within the {timeout_s:g} s timeout; the worker{where} was killed"}


WORKERS_PREFIX = "trtmin-workers-"


class WorkerPool:
    """N workers; `run(jobs)` returns results in job order, whatever finishes first."""

    def __init__(self, cfg: WorkerConfig, jobs: int = 1, per_worker_env: list[dict[str, str]] | None = None,
                 retries: int = 1):
        self.cfg = cfg
        self.retries = retries
        self.n = max(1, jobs)
        self.per_worker_env = per_worker_env or [{} for _ in range(self.n)]
        # the pid in the name: a killed run's folder is known as such and removed by the next
        # (minimize/run/workers.remove_stale_state)
        self._tmp = tempfile.TemporaryDirectory(prefix=f"{WORKERS_PREFIX}{os.getpid()}-")
        self.log_dir = Path(self._tmp.name)
        self.workers: list[_Worker | None] = [None] * self.n
        self.restarts = 0
        self.start_retries = [0] * self.n  # per slot: workers that died while starting, replaced
        self.first_start_phases: dict[str, float] | None = None  # of the first worker ready: where start-up goes
        self.zygote: Zygote | None = None
        self.forked = 0  # workers started from the zygote (the rest were spawned)
        self._use_zygote = zygote_wanted()  # fork workers from a zygote (oracles/zygote.py)

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
        zygote = self._zygote()
        try:
            w = _Worker(cfg, slot, self.log_dir, zygote)
        except OSError:  # the zygote is gone (its pipe is closed): spawn from now on
            if zygote is None:
                raise
            zygote.gone = True
            w = _Worker(cfg, slot, self.log_dir, self._zygote())
        self.workers[slot] = w
        return w

    def _zygote(self) -> Zygote | None:
        """The zygote to fork from, started on first use; None once it has died (the OOM
        killer, say: its workers died with it) or a fork could not start: the rest of the
        run spawns workers."""
        if self.zygote is not None and self.zygote.gone:
            self.zygote.close()
            self.zygote, self._use_zygote = None, False
        if self.zygote is None and self._use_zygote:
            self.zygote = Zygote(self.cfg, str(self.log_dir / "zygote.log"))
        return self.zygote if self._use_zygote else None

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
            if isinstance(w.proc, ForkedProcess) and w.proc.zygote.is_gone():
                w.kill()  # never forked, or killed with the zygote: not this worker's failure
                self._spawn(w.slot)
                return
            if self.start_retries[w.slot] >= self.retries:
                raise
            self.start_retries[w.slot] += 1
            self._replace(w)
            return
        except SetupFailed:
            if not isinstance(w.proc, ForkedProcess):
                raise
            # A setup that fails in a fork may only fail there (a CUDA the zygote's imports
            # started): spawn this worker and the next ones; a spawned one that fails says
            # why. The zygote stays until the pool closes: its other workers may be busy.
            w.kill()
            self._use_zygote = False
            self._spawn(w.slot)
            return
        if self.first_start_phases is None:
            self.first_start_phases = self._start_path(w)
        self.forked += isinstance(w.proc, ForkedProcess)

    def _start_path(self, w: _Worker) -> dict[str, float] | None:
        """Seconds by step from nothing to the worker ready: the zygote's steps (if it was
        forked) and its own, added up by name."""
        phases = dict(w.start_phases or {})
        if isinstance(w.proc, ForkedProcess) and self.zygote is not None:
            self.zygote.read()
            for step, seconds in (self.zygote.preload_phases or {}).items():
                phases[step] = round(phases.get(step, 0.0) + seconds, 2)
        return phases or None

    def run(self, jobs: list[Any], while_waiting: Callable[[], None] | None = None,
            on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
        """Results in job order. A job whose worker dies is run once more (by whichever
        worker is ready first; the dead one is replaced): a worker killed from outside (the
        OOM killer, a stray SIGKILL) is a retry, a compiler that kills its process every
        time is a verdict. `while_waiting` runs once, when the first jobs are out;
        `on_result(j, result)` as each job's result lands (the journal keeps it at once: a
        stop while a slower job of the batch runs loses none)."""
        results: list[Any] = [None] * len(jobs)
        landed = on_result or (lambda j, result: None)
        pending = list(range(len(jobs)))[::-1]
        tries = [0] * len(jobs)
        busy: dict[int, int] = {}  # slot -> job index

        def died(j: int, w: _Worker) -> None:
            w.kill()
            if isinstance(w.proc, ForkedProcess) and w.proc.exitcode is None and w.proc.zygote.gone:
                pending.append(j)  # killed with its zygote (the OOM killer took it): not a try
                return
            tries[j] += 1
            if tries[j] <= self.retries:
                pending.append(j)  # next in line
            else:
                results[j] = death_verdict(w.exit_description(), w.log_tail(), death_site(w.log_text()))
                landed(j, results[j])

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
                w.job_started, w.busy = time.monotonic(), True
                asked = jobs[j].get("timeout_s") if isinstance(jobs[j], dict) else None
                w.job_timeout = min(self.cfg.timeout_s, asked) if asked else self.cfg.timeout_s
                busy[slot] = j
            if busy and while_waiting is not None:
                while_waiting()
                while_waiting = None
            starting = [w for s, w in enumerate(self.workers)
                        if pending and s not in busy and w is not None and not w.ready]
            if not busy and not starting:
                continue
            now = time.monotonic()
            deadline = min([self.workers[s].job_started + self.workers[s].job_timeout for s in busy]  # type: ignore[union-attr]
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
                    w.busy = False
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
                    landed(j, payload)
                elif time.monotonic() - w.job_started >= w.job_timeout:
                    site = w.stuck_site()
                    w.kill()
                    results[j] = hang_verdict(w.job_timeout, site)
                    del busy[slot]
                    landed(j, results[j])
        return results

    def close(self) -> None:
        """Stop every worker at once: a worker's exit (CUDA context, compiler pools) takes
        seconds, and one after another they made most of --jobs 4's end on a GPU."""
        live = [w for w in self.workers if w is not None]
        try:
            for w in live:  # one busy (a Ctrl-C mid-job: workers ignore SIGINT) is killed with its group now
                if w.busy:
                    w.kill()
                else:
                    w.ask_to_stop()
            deadline = time.monotonic() + STOP_GRACE_S
            for w in live:
                w.finish_stop(max(0.0, deadline - time.monotonic()))
        finally:  # a second Ctrl-C while they stop: none is left running, nor what it started
            for w in live:
                if w.proc.is_alive():
                    w.kill()
        self.workers = [None] * self.n
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        self._tmp.cleanup()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
