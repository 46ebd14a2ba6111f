"""Workers forked from a warm zygote (oracles/zygote.py): one preload for all of them,
crashes still described by their signal, and spawned workers when there is no zygote."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any, Callable

import pytest

from oracles import zygote
from oracles.worker import WorkerConfig, WorkerPool

PRELOADED: dict[str, Any] = {}  # set in the zygote by `preload`; a forked worker has it, a spawned one not


def preload(**_: Any) -> dict[str, float]:
    time.sleep(float(os.environ.get("TEST_PRELOAD_SECONDS", "0")))
    PRELOADED["pid"] = os.getpid()
    return {"preload_step": 0.5}


def family_runner() -> Callable[[Any], Any]:
    """Each job says who ran it: its pid, its parent, and the pid the preload ran in. Job
    "segv" reads address 0, as does "segv unless first" in any worker but TEST_WORKER=0."""
    def run(job: Any) -> dict[str, Any]:
        if job == "segv" or (job == "segv unless first" and os.environ.get("TEST_WORKER") != "0"):
            ctypes.string_at(0)
        if job == "segv unless first":
            time.sleep(0.5)  # the others take jobs meanwhile
        return {"job": job, "pid": os.getpid(), "parent": os.getppid(), "preloaded_in": PRELOADED.get("pid")}
    return run


def _pool(jobs: int) -> WorkerPool:
    cfg = WorkerConfig(setup="tests.test_zygote:family_runner", setup_kwargs={}, timeout_s=60,
                       preload="tests.test_zygote:preload")
    return WorkerPool(cfg, jobs)


def test_workers_are_forks_of_one_preloaded_zygote():
    pool = _pool(2)
    try:
        pool.start()
        a, b = pool.run(["a", "b"])
        zygote_pid = pool.zygote.proc.pid
        assert a["parent"] == b["parent"] == zygote_pid != os.getpid()
        assert a["preloaded_in"] == b["preloaded_in"] == zygote_pid  # the preload ran once, before the forks
        assert pool.first_start_phases["preload_step"] == 0.5  # the zygote's steps count in the start
        assert pool.forked >= len({a["pid"], b["pid"]})  # one worker may have run both, the other ready too
    finally:
        pool.close()
    assert not pool.zygote and not _exists(zygote_pid)  # close ends the zygote too


@pytest.mark.parametrize("forked", [True, False])
def test_a_crashing_worker_is_a_signal_verdict_and_is_replaced(monkeypatch, forked):
    if not forked:
        monkeypatch.setenv("TRTMIN_NO_ZYGOTE", "1")
    pool = _pool(1)
    try:
        crashed, after = pool.run(["segv", "next"])
    finally:
        pool.close()
    # the site, from the fault handler's stack in the worker's log: the innermost function and its caller
    assert crashed["kind"] == "crash" and crashed["message"] == "SIGSEGV in string_at (called from run)"
    assert pool.restarts == 2  # the crash is run once more, then the next job gets a fresh worker
    assert after["job"] == "next"
    assert (after["parent"] != os.getpid()) is forked
    assert (after["preloaded_in"] is not None) is forked
    assert pool.forked == (3 if forked else 0)


def test_closing_while_the_zygote_imports_does_not_wait_for_it(monkeypatch):
    monkeypatch.setenv("TEST_PRELOAD_SECONDS", "20")
    pool = _pool(2)
    pool.start()
    zygote = pool.zygote
    time.sleep(0.5)
    t0 = time.monotonic()
    pool.close()  # the forks are cancelled; the zygote is stopped mid-import
    assert time.monotonic() - t0 < 3
    assert not zygote.proc.is_alive()


def test_without_its_zygote_the_pool_spawns_workers():
    pool = _pool(1)
    try:
        first = pool.run(["a"])[0]
        os.kill(pool.zygote.proc.pid, signal.SIGKILL)  # the OOM killer, say: its worker dies with it
        deadline = time.monotonic() + 10
        while _exists(first["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        again = pool.run(["b"])[0]
    finally:
        pool.close()
    assert again["job"] == "b" and again["parent"] == os.getpid()  # spawned by the pool itself
    assert pool.zygote is None


def fork_shy_runner() -> Callable[[Any], Any]:
    """Sleeps TEST_START_SECONDS; with TEST_FAIL_IN_FORK, cannot start in a fork (a CUDA the
    zygote's imports started); each job sleeps its value and says who ran it."""
    time.sleep(float(os.environ.get("TEST_START_SECONDS", "0")))
    if PRELOADED and os.environ.get("TEST_FAIL_IN_FORK"):
        raise RuntimeError("cannot start here")
    return lambda job: time.sleep(job) or {"job": job, "pid": os.getpid(), "parent": os.getppid()}


def _shy_pool(envs: list[dict[str, str]], retries: int = 1) -> WorkerPool:
    cfg = WorkerConfig(setup="tests.test_zygote:fork_shy_runner", setup_kwargs={}, timeout_s=60,
                       preload="tests.test_zygote:preload")
    return WorkerPool(cfg, len(envs), envs, retries=retries)


def test_a_worker_that_cannot_start_in_a_fork_is_spawned():
    pool = _shy_pool([{"TEST_FAIL_IN_FORK": "1"}] * 2)
    try:
        results = pool.run([0, 0, 0])
        assert pool.zygote is not None  # it was tried
    finally:
        pool.close()
    assert [r["job"] for r in results] == [0, 0, 0]
    assert {r["parent"] for r in results} == {os.getpid()} and pool.forked == 0


def test_a_fork_that_cannot_start_leaves_the_busy_workers_alone():
    # Slot 0 runs a 3 s job in a fork while slot 1's fork fails to start: slot 1 is spawned,
    # and slot 0's job neither dies nor runs twice (it used to take the zygote down with it).
    pool = _shy_pool([{}, {"TEST_FAIL_IN_FORK": "1", "TEST_START_SECONDS": "1"}], retries=0)
    try:
        busy, after = pool.run([3, 0.5])
    finally:
        pool.close()
    assert busy["job"] == 3 and busy["parent"] != os.getpid()  # forked, and not a crash verdict
    assert after["job"] == 0.5
    assert pool.restarts == 0 and pool.forked == 1


def test_a_crash_is_seen_at_once_in_workers_forked_together(monkeypatch):
    # The forks are asked for while the zygote imports, so it makes them from one batch.
    # A worker that held another's pipe end kept that pipe open after the other crashed:
    # the pool saw no death and waited out the job's timeout (a hang verdict, not a crash).
    monkeypatch.setenv("TEST_PRELOAD_SECONDS", "1")
    cfg = WorkerConfig(setup="tests.test_zygote:family_runner", setup_kwargs={}, timeout_s=20,
                       preload="tests.test_zygote:preload")
    pool = WorkerPool(cfg, 3, [{"TEST_WORKER": str(i)} for i in range(3)], retries=0)
    t0 = time.monotonic()
    try:
        results = pool.run(["segv unless first"] * 6)
    finally:
        pool.close()
    assert {r.get("kind", "ran") for r in results} == {"crash", "ran"}  # the first forked never crashes
    assert time.monotonic() - t0 < 15


def test_a_worker_killed_before_its_fork_is_never_forked(monkeypatch):
    monkeypatch.setenv("TEST_PRELOAD_SECONDS", "1.5")
    pool = _pool(1)
    try:
        pool.start()
        w, zygote = pool.workers[0], pool.zygote
        w.kill()  # while the zygote is still importing: the fork and the kill wait together
        zygote.wait_exit(0, 10)
        deadline = time.monotonic() + 10
        while 0 not in zygote.exits and time.monotonic() < deadline:
            zygote.read(0.1)
        assert zygote.exits.get(0) == -signal.SIGKILL and 0 not in zygote.pids
        assert not os.path.exists(w.log_path)  # it never ran
    finally:
        pool.close()


def parallel_preload(**_: Any) -> dict[str, float]:
    import torch
    torch.set_num_threads(2)
    torch.ones(1 << 22).add_(1).sum()  # OpenMP's threads: a fork of this process hangs in its next parallel op
    return preload()


def prefork(**_: Any) -> None:
    PRELOADED["preforks"] = PRELOADED.get("preforks", 0) + 1


def prefork_runner() -> Callable[[Any], Any]:
    return lambda job: {"preforks": PRELOADED.get("preforks")}


def test_the_zygote_runs_the_prefork_step_before_each_fork():
    cfg = WorkerConfig(setup="tests.test_zygote:prefork_runner", setup_kwargs={}, timeout_s=60,
                       preload="tests.test_zygote:preload", prefork="tests.test_zygote:prefork")
    pool = WorkerPool(cfg, 2)
    try:
        pool.start()
        counts = {r["preforks"] for r in pool.run(["a", "b"] * 4)}
    finally:
        pool.close()
    assert counts <= {1, 2} and counts  # each worker saw the preforks made up to its own fork


def test_a_zygote_whose_preload_used_cpu_threads_forks_none():
    cfg = WorkerConfig(setup="tests.test_zygote:family_runner", setup_kwargs={}, timeout_s=60,
                       preload="tests.test_zygote:parallel_preload")
    pool = WorkerPool(cfg, 1)
    try:
        result = pool.run(["a"])[0]
    finally:
        pool.close()
    assert result["parent"] == os.getpid() and pool.forked == 0


def test_the_zygote_is_linux_only_and_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(zygote.sys, "platform", "darwin")
    assert not zygote.zygote_wanted()
    monkeypatch.setattr(zygote.sys, "platform", "linux")
    assert zygote.zygote_wanted()
    monkeypatch.setenv("TRTMIN_NO_ZYGOTE", "1")
    assert not zygote.zygote_wanted()


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def cuda_runner() -> Callable[[Any], Any]:
    import torch
    return lambda job: {"sum": float(torch.ones(4, device="cuda").sum()), "parent": os.getppid(),
                        "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


def cuda_preload(**_: Any) -> dict[str, float]:
    import torch
    torch.cuda.init()  # what a compiler's import might do: its forks could not use CUDA
    return {}


@pytest.mark.parametrize("preload_spec, forked", [("tests.test_zygote:preload", True),
                                                   ("tests.test_zygote:cuda_preload", False)])
def test_forked_workers_start_cuda_themselves_and_a_zygote_with_cuda_forks_none(preload_spec, forked):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    cfg = WorkerConfig(setup="tests.test_zygote:cuda_runner", setup_kwargs={}, timeout_s=120, preload=preload_spec)
    pool = WorkerPool(cfg, 2, [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "0"}])
    try:
        results = pool.run(["a", "b"])
    finally:
        pool.close()
    assert [r["sum"] for r in results] == [4.0, 4.0]
    assert all(r["visible"] == "0" for r in results)
    assert all((r["parent"] != os.getpid()) is forked for r in results)
    assert (pool.forked > 0) is forked  # one worker may have run both jobs before the other was ready


def test_the_zygote_loads_a_cpu_program_once_written_for_the_workers_forked_after(host_program, tmp_path,
                                                                                 monkeypatch):
    from minimize.run import worker_side
    from minimize.program.inputs import load_inputs, prepare
    from minimize.program.model import Program, load_exported
    model, inputs = host_program
    monkeypatch.setattr(worker_side, "_zygote_program", None)
    state = tmp_path / "state"
    state.mkdir()
    worker_side.before_fork(state=str(state), device="cpu")
    assert worker_side._zygote_program is None  # the main process has not written it yet
    ep = prepare(load_exported(model), "cpu")
    program = Program(ep, load_inputs(inputs, ep), device="cpu")
    worker_side.save_state(program, state)
    worker_side.before_fork(state=str(state), device="cuda")
    assert worker_side._zygote_program is None  # a CUDA run's workers load their own
    worker_side.before_fork(state=str(state), device="cpu")
    shared = worker_side._zygote_program
    assert [n.name for n in shared.nodes] == [n.name for n in program.nodes]
    monkeypatch.setattr(worker_side, "load_state", lambda *a: pytest.fail("a forked worker read the state again"))
    run = worker_side.worker_setup(state=str(state), backend="eager", settings={}, atol=1e-3, rtol=1e-3,
                                   device="cpu")
    result = run({"kept": list(range(len(shared.nodes)))})
    assert result["kind"] == "pass", result


CUDA_FORK_SCRIPT = """
import os, sys
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
import torch, torch._dynamo
from oracles.cuda_fork import driver_started
how = sys.argv[1]
torch._dynamo.reset()  # what the zygote does where there is CUDA
if how == "compile":
    torch.compile(lambda x: x + 1, backend="eager")(torch.zeros(1))
elif how == "count":
    torch._C._cuda_getDeviceCount()  # the CUDA runtime starts the driver; torch is not told
print(torch.cuda.is_initialized(), driver_started(), flush=True)
pid = os.fork()
if pid == 0:
    try:
        x = torch.arange(8.0, device="cuda")
        y = torch.compile(lambda t: torch.sin(t) * 2, backend="inductor")(x)
        os._exit(0 if torch.allclose(y, torch.sin(x) * 2) else 1)
    except BaseException:
        os._exit(3)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.parametrize("how, expected", [("reset", "False False\n0"),    # the zygote's preload: forks start CUDA
                                           ("compile", "True True\n3"),   # Dynamo's first compile starts it
                                           ("count", "False True\n3")])   # torch is not told: the driver is asked
def test_the_driver_check_sees_what_would_break_a_forks_cuda(how, expected):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", CUDA_FORK_SCRIPT, how], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.stdout.strip() == expected, r.stderr[-2000:]
