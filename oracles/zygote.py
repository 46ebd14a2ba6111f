"""The zygote: one process that imports torch and the compiler and warms Dynamo up once,
then forks a worker whenever the pool asks for one.

A spawned worker pays that start itself (torch, the compiler, Dynamo's first compile:
seconds). A compiler that segfaults kills its worker on every failing candidate, twice
(the pool retries a death once), so on a crash oracle the starts were most of the run. A
fork of the warm zygote is ready in a fraction of a second, and `--jobs N` imports torch
once, not N times over few cores.

What must not cross a fork stays out of the zygote. It never starts CUDA: each worker
does, after the fork, pinned to its own GPU (where CUDA is available, the preload stops
before Dynamo's first compile, which starts the driver: minimize/run/worker_side.py). And it
runs no parallel CPU op: GNU OpenMP hangs a fork whose parent used its threads. After the
preload a test fork checks both; if it fails, the pool spawns workers instead, as it does
when the zygote dies or a fork cannot start. Workers are the zygote's children; it
reports their pids and exit codes to the pool, which kills them directly. Linux only;
TRTMIN_NO_ZYGOTE=1 spawns every worker.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

from oracles import bytecode
from oracles.cuda_fork import driver_started
from oracles.worker_process import (WorkerConfig, call_spec, die_with_parent, exit_now, kill_worker, log_to,
                                    sigint_ignored, worker_main)

REAP_INTERVAL_S = 0.05  # how often the zygote looks for workers that ended
FORK_TEST_S = 10.0      # for a test fork's parallel sum (0.04 s on 2 cores)
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"  # torch.cuda.is_available() without initializing CUDA


def zygote_wanted() -> bool:
    return sys.platform.startswith("linux") and os.environ.get("TRTMIN_NO_ZYGOTE") != "1"


class Zygote:
    """The pool's side: asks for forks, and learns the workers' pids and exit codes."""

    def __init__(self, cfg: WorkerConfig, log_path: str):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()  # a Unix socket pair: it carries the workers' pipe ends too
        self.proc = ctx.Process(target=_zygote_main, args=(child, cfg, log_path), daemon=True)
        with sigint_ignored():  # and the workers it forks: the terminal's Ctrl-C is the main process's
            self.proc.start()
        child.close()
        self.pids: dict[int, int] = {}    # token -> pid
        self.exits: dict[int, int] = {}   # token -> exit code (negative: the signal), as multiprocessing says
        self.preload_phases: dict[str, float] | None = None
        self.cancelled: set[int] = set()  # tokens killed before their fork: they never run a job
        self.gone = False                 # the zygote itself ended: its workers died with it
        self._tokens = 0

    def fork(self, conn: Connection, cfg: WorkerConfig, log_path: str) -> "ForkedProcess":
        """A worker that will run on `conn`'s other end (the caller closes its copy). Does
        not wait for the zygote, which may still be importing."""
        token, self._tokens = self._tokens, self._tokens + 1
        self.conn.send(("fork", token, cfg, log_path))
        send_handle(self.conn, conn.fileno(), self.proc.pid)
        return ForkedProcess(self, token)

    def kill(self, token: int) -> None:
        if token in self.pids:
            kill_worker(self.pids[token])
        elif not self.gone and token not in self.cancelled:
            self.cancelled.add(token)
            try:
                self.conn.send(("kill", token))  # not forked yet (the zygote may still be importing)
            except OSError:
                self.gone = True

    def read(self, timeout: float = 0.0) -> None:
        """Take in what the zygote has said, waiting up to `timeout` for a first message."""
        while not self.gone:
            try:
                if not self.conn.poll(timeout):
                    break
                tag, *rest = self.conn.recv()
            except (EOFError, OSError):
                self.gone = True
                break
            timeout = 0.0
            if tag == "forked":
                self.pids[rest[0]] = rest[1]
            elif tag == "exited":
                self.exits[rest[0]] = rest[1]
            elif tag == "preloaded":
                self.preload_phases = rest[0]
            elif tag == "unfit":  # it will fork nothing: the pool spawns workers instead
                self.gone = True

    def is_gone(self) -> bool:
        self.read()
        return self.gone

    def ended(self, token: int) -> bool:
        self.read()
        return token in self.exits or self.gone or (token in self.cancelled and token not in self.pids)

    def wait_exit(self, token: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ended(token):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.read(left)

    def close(self) -> None:
        self.read()
        if not self.pids and self.proc.is_alive():
            self.proc.kill()  # still importing, nothing forked: no need to wait for it
        try:
            self.conn.close()  # else it ends (and kills what is left of its workers) when its pipe does
        except OSError:
            pass
        self.gone = True
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)


class ForkedProcess:
    """A forked worker, with the calls the pool makes of a multiprocessing.Process."""

    def __init__(self, zygote: Zygote, token: int):
        self.zygote = zygote
        self.token = token

    @property
    def exitcode(self) -> int | None:
        self.zygote.read()
        return self.zygote.exits.get(self.token)

    @property
    def pid(self) -> int | None:
        self.zygote.read()
        return self.zygote.pids.get(self.token)

    def is_alive(self) -> bool:
        return not self.zygote.ended(self.token)

    def kill(self) -> None:
        self.zygote.read()
        self.zygote.kill(self.token)

    def join(self, timeout: float | None = None) -> None:
        self.zygote.wait_exit(self.token, 30.0 if timeout is None else timeout)


# ----------------------------------------------------------------- in the zygote process
_set_nvml_check = False


def _zygote_main(conn: Connection, cfg: WorkerConfig, log_path: str) -> None:
    log_to(log_path)
    _own_resource_tracker()
    bytecode.enable()
    die_with_parent()  # and its workers die with it (they ask the same of the zygote)
    global _set_nvml_check
    if NVML_CHECK not in os.environ:  # taken out again in each worker: the user's setting stays theirs
        os.environ[NVML_CHECK], _set_nvml_check = "1", True
    phases = _preload(cfg)
    unfit = _unfit()
    if unfit:
        print(f"{unfit}: workers will be spawned", flush=True)
        conn.send(("unfit", unfit))
        exit_now()
    conn.send(("preloaded", phases))
    tokens: dict[int, int] = {}      # pid -> token, of workers not yet reaped
    while True:
        try:
            requests = _pending(conn)
        except EOFError:
            break  # the pool closed, or the main process is gone
        # A worker killed before its fork is never forked: the pool asks for the kill
        # after the fork, so both may wait here together (the zygote was still importing).
        killed = {token for kind, token, *_ in requests if kind == "kill"}
        # Each worker must hold only its own pipe end: one that held another's would keep
        # that pipe open after its worker died, and the pool would wait for it forever.
        held = {rest[2] for kind, _, *rest in requests if kind == "fork"}
        for kind, token, *rest in requests:
            if kind == "kill":
                pid = next((p for p, t in tokens.items() if t == token), None)
                if pid is not None:  # else not forked yet: it never will be (above)
                    kill_worker(pid)
            elif token in killed:
                os.close(rest[2])
                held.discard(rest[2])
                conn.send(("exited", token, -signal.SIGKILL))
            else:  # a fork
                worker_cfg, worker_log, fd = rest
                _prefork(worker_cfg)
                zygote_pid = os.getpid()
                pid = os.fork()
                if pid == 0:
                    for other in held - {fd}:
                        os.close(other)
                    _worker_child(conn, fd, worker_cfg, worker_log, zygote_pid)
                os.close(fd)
                held.discard(fd)
                tokens[pid] = token
                conn.send(("forked", token, pid))
        _reap(conn, tokens)
    for pid in tokens:
        kill_worker(pid)
    exit_now()


def _own_resource_tracker() -> None:
    """Semaphores a worker made (the progress-bar lock of an fx Interpreter, say) outlive a
    worker that segfaults; the resource tracker frees them at the end and warns of "leaked
    semaphore objects". Forked workers use the zygote's own tracker, started here, which
    warns into the zygote's log instead of the user's terminal (the tracker inherited from
    the main process is forgotten, not stopped)."""
    from multiprocessing import resource_tracker
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    if getattr(tracker, "_fd", None) is not None:
        tracker._fd, tracker._pid = None, None  # type: ignore[union-attr]
    resource_tracker.ensure_running()


def _pending(conn: Connection) -> list[tuple[Any, ...]]:
    """Every request the pool has sent so far (waiting a moment for one); a fork request
    with the worker's pipe end that follows it."""
    requests: list[tuple[Any, ...]] = []
    if wait([conn], timeout=REAP_INTERVAL_S):
        while True:
            request = conn.recv()
            if request[0] == "fork":
                request = (*request, recv_handle(conn))
            requests.append(request)
            if not conn.poll(0):
                break
    return requests


def _preload(cfg: WorkerConfig) -> dict[str, Any]:
    """Import the setup's module and run the preload: seconds by step. A preload that
    fails is not the zygote's to report: each worker repeats the step and says why."""
    phases: dict[str, Any] = {}
    try:
        t0 = time.monotonic()
        module = cfg.setup.partition(":")[0]
        __import__(module)
        phases["import"] = round(time.monotonic() - t0, 2)
        if cfg.preload:
            steps, _ = call_spec(cfg.preload, cfg.setup_kwargs)
            phases.update(steps or {})
    except BaseException as e:  # noqa: BLE001
        print(f"preload failed, workers will start it again: {type(e).__name__}: {e}", flush=True)
    return phases


def _prefork(cfg: WorkerConfig) -> None:
    """The config's prefork step; one that fails leaves the worker to do that work itself."""
    if cfg.prefork:
        try:
            call_spec(cfg.prefork, cfg.setup_kwargs)
        except BaseException as e:  # noqa: BLE001
            print(f"prefork failed: {type(e).__name__}: {e}", flush=True)


def _unfit() -> str | None:
    """Why this zygote's forks could not work, if they could not: a compiler whose import
    started CUDA, or ran a parallel CPU op (GNU OpenMP hangs a fork whose parent used its
    threads: a fork that sums a large tensor must finish)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch.cuda.is_initialized() or driver_started():
        return "CUDA was initialized while preloading"
    pid = os.fork()
    if pid == 0:
        torch.ones(1 << 22).add_(1).sum()  # above ATen's grain size: it goes parallel
        os._exit(0)
    deadline = time.monotonic() + FORK_TEST_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return None if os.waitstatus_to_exitcode(status) == 0 else "a fork could not run torch"
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "a fork hung in torch's CPU thread pool, which the preload had started"


def _reap(conn: Connection, tokens: dict[int, int]) -> None:
    """Report the workers that ended (only them: a process the preload started is not ours)."""
    for pid in list(tokens):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done:
            conn.send(("exited", tokens.pop(pid), os.waitstatus_to_exitcode(status)))


def _worker_child(zygote_conn: Connection, fd: int, cfg: WorkerConfig, log_path: str, zygote_pid: int) -> None:
    """In the forked worker: die with the zygote (checked once set: it may have died
    already), drop the zygote's pipe (the pool must see it close when the zygote ends), and
    run as a spawned worker would."""
    die_with_parent()
    if os.getppid() != zygote_pid:
        os._exit(1)
    zygote_conn.close()
    if _set_nvml_check:
        del os.environ[NVML_CHECK]
    code = 0
    try:
        worker_main(Connection(fd), cfg, log_path)
    except BaseException:  # noqa: BLE001 - as a spawned worker would: the traceback to its log
        traceback.print_exc()
        code = 1
    exit_now(code)
