"""The worker pool itself (oracles/worker.py), with workers that import nothing heavy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from oracles.errors import TrtminError
from oracles import worker
from oracles.worker import WorkerConfig, WorkerPool
from tests.helpers import ROOT, running


def slow_start_runner() -> Callable[[Any], dict[str, Any]]:
    """A worker's setup: sleeps TEST_START_SECONDS, then each job says which worker ran it."""
    time.sleep(float(os.environ.get("TEST_START_SECONDS", "0")))
    return lambda job: {"job": job, "worker": os.environ.get("TEST_WORKER")}


def failing_runner() -> Callable[[Any], Any]:
    raise RuntimeError("no compiler here")


def dying_runner() -> Callable[[Any], Any]:
    """Dies while starting: always, or (with TEST_DIE_ONCE=path) only the first time."""
    once = os.environ.get("TEST_DIE_ONCE")
    if not once or not os.path.exists(once):
        if once:
            open(once, "w").close()
        os._exit(3)
    return lambda job: job


def _pool(jobs: int, envs: list[dict[str, str]], setup: str = "slow_start_runner") -> WorkerPool:
    return WorkerPool(WorkerConfig(setup=f"tests.test_pool:{setup}", setup_kwargs={}, timeout_s=60), jobs, envs)


def test_jobs_go_to_the_worker_ready_first_and_come_back_in_order():
    # Slot 0 starts 20 s late: every job must run on slot 1 meanwhile, where the pool used
    # to wait for slot 0 before handing out the first job.
    pool = _pool(2, [{"TEST_WORKER": "late", "TEST_START_SECONDS": "20"}, {"TEST_WORKER": "early"}])
    t0 = time.monotonic()
    try:
        results = pool.run(list(range(5)))
    finally:
        pool.close()
    assert [r["job"] for r in results] == list(range(5))
    assert {r["worker"] for r in results} == {"early"}
    assert time.monotonic() - t0 < 15  # the late worker's start was never waited for


def test_a_worker_that_cannot_start_is_a_one_line_error():
    pool = _pool(2, [{}, {}], setup="failing_runner")
    try:
        with pytest.raises(TrtminError, match="a worker could not start: RuntimeError: no compiler here"):
            pool.run([1, 2])
    finally:
        pool.close()
    assert pool.restarts == 0  # a setup that raises is reported at once, not retried


def test_a_worker_killed_while_starting_is_replaced_once(tmp_path):
    pool = _pool(1, [{"TEST_DIE_ONCE": str(tmp_path / "died")}], setup="dying_runner")
    try:
        assert pool.run([7, 8]) == [7, 8]  # the replacement ran them
    finally:
        pool.close()
    assert pool.restarts == 1
    pool = _pool(1, [{}], setup="dying_runner")
    try:
        with pytest.raises(TrtminError, match=r"a worker died while starting \(exited with code 3\)"):
            pool.run([1])
    finally:
        pool.close()
    assert pool.restarts == 1  # one replacement, then the error


def test_the_start_limit_counts_from_when_the_pool_waits(monkeypatch):
    # Workers start before the main process loads the model; that wait is not their start.
    monkeypatch.setattr(worker, "STARTUP_TIMEOUT_S", 3.0)
    pool = _pool(1, [{"TEST_START_SECONDS": "5"}])
    try:
        pool.start()
        time.sleep(4)  # the main process's load: more than the limit since the spawn
        assert pool.run([1])[0]["job"] == 1  # ready 1 s into the wait
    finally:
        pool.close()


WATCH_START = """
import sys
from oracles.worker import WorkerPool
start = WorkerPool.start
def watched(self):
    start(self)
    print("torch imported when the workers started:", "torch" in sys.modules, flush=True)
WorkerPool.start = watched
sys.argv = ["trtmin", *sys.argv[1:]]
from minimize.cli import main
main()
"""


@pytest.mark.parametrize("command, code", [("check", 0), ("reduce", 2)])
def test_the_cli_starts_its_workers_before_it_imports_torch(host_program, tmp_path, command, code):
    # The workers' start (torch, the compiler, Dynamo) is the path to the first oracle
    # call; the CLI's own imports of torch would delay it by a second or more.
    model, inputs = host_program
    extra = ["--out", str(tmp_path / "out")] if command == "reduce" else []
    r = subprocess.run([sys.executable, "-c", WATCH_START, command, str(model), "--inputs", str(inputs),
                        "--backend", "eager", "--oracle", "crash", *extra],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "torch imported when the workers started: False" in r.stdout, r.stdout + r.stderr[-2000:]
    # eager never crashes: check says so (0); reduce refuses a program that does not fail (2)
    assert r.returncode == code, r.stdout + r.stderr[-2000:]


def test_one_worker_per_visible_gpu_without_importing_torch(monkeypatch):
    from minimize.run import workers
    monkeypatch.setattr(workers, "nvml_gpu_count", lambda: 8)  # what the driver says
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert workers.gpu_env(3, "cuda") == [{"CUDA_VISIBLE_DEVICES": d} for d in ("3", "5", "3")]
    assert workers.gpu_env(2, "cpu") == [{}, {}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert workers.visible_gpu_count() == 0 and workers.gpu_env(2, "cuda") == [{}, {}]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert workers.visible_gpu_count() == 8
    monkeypatch.setattr(workers, "nvml_gpu_count", lambda: 1)
    assert workers.gpu_env(2, "cuda") == [{"CUDA_VISIBLE_DEVICES": "0"}] * 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # more entries than GPUs: as torch, count those there are
    assert workers.visible_gpu_count() == 1 and workers.gpu_env(2, "cuda") == [{"CUDA_VISIBLE_DEVICES": "0"}] * 2
    monkeypatch.setattr(workers, "nvml_gpu_count", lambda: None)  # no NVIDIA driver: torch says
    import torch
    assert workers.visible_gpu_count() == (torch.cuda.device_count() if torch.cuda.is_available() else 0)


def test_workers_that_cannot_start_leave_no_state_behind(monkeypatch):
    from minimize.options import Options
    from minimize.run.workers import Workers
    made = []
    real = WorkerPool.start

    def failing_start(self):
        made.append(self)
        real(self)
        raise OSError("fork: Resource temporarily unavailable")

    monkeypatch.setattr(WorkerPool, "start", failing_start)
    with pytest.raises(OSError):
        Workers(Options(model=ROOT / "missing.pt2", oracle="crash"))
    assert made and not Path(made[0].cfg.setup_kwargs["state"]).exists()  # the state folder is gone
    assert made[0].workers == [None]  # and the started worker stopped


def sleepy_runner() -> Callable[[Any], Any]:
    return lambda job: time.sleep(job["sleep"] if isinstance(job, dict) else job) or time.monotonic()


def test_a_job_may_ask_for_less_time_than_the_pools():
    """A job's "timeout_s" (the one-op controls' ONE_OP_TIMEOUT_S) ends it sooner than the
    pool's 60 s: a hang verdict of its own time; the next job has the pool's again."""
    pool = _pool(1, [{}], setup="sleepy_runner")
    try:
        start = time.monotonic()
        hung, after = pool.run([{"sleep": 30, "timeout_s": 1.0}, {"sleep": 1.5}])
    finally:
        pool.close()
    assert hung["kind"] == "hang" and "the 1 s timeout" in hung["message"], hung
    assert isinstance(after, float) and time.monotonic() - start < 25


def test_a_job_may_not_ask_for_more_time_than_the_pools():
    """A job's "timeout_s" only shortens the pool's --timeout, never lengthens it."""
    pool = WorkerPool(WorkerConfig(setup="tests.test_pool:sleepy_runner", setup_kwargs={}, timeout_s=1.0), 1, [{}])
    try:
        start = time.monotonic()
        hung, = pool.run([{"sleep": 30, "timeout_s": 20.0}])
    finally:
        pool.close()
    assert hung["kind"] == "hang" and "the 1 s timeout" in hung["message"], hung
    assert time.monotonic() - start < 15


def test_a_deaths_site_is_the_workers_own_last_stack_in_its_log() -> None:
    """A compiler's child process that shares the worker's stderr (a compile worker of its
    own) may crash first and write its stack to the log: the worker's death is the last."""
    from oracles.worker import death_site

    child = ('Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n'
             '  File "/home/me/child.py", line 3 in compile_kernel\n  File "/home/me/child.py", line 9 in main\n')
    worker = ('Fatal Python error: Aborted\n\nCurrent thread 0x2 (most recent call first):\n'
              '  File "/home/me/compiler.py", line 7 in build\n  File "/home/me/plugin.py", line 2 in backend\n')
    assert death_site(child + "compile worker 3 died\n" + worker) == "build (called from backend)"
    assert death_site("no stack here\n") == ""


def test_a_worker_that_exits_is_no_signal() -> None:
    """A death by a signal is named by it (and its site); a compiler that ends the process
    with an exit code (os._exit in a native library) died otherwise, and is said so."""
    from oracles.worker import death_verdict

    segv = death_verdict("killed by SIGSEGV", "tail", "build (called from backend)")
    assert (segv["exc_type"], segv["message"]) == ("Signal", "SIGSEGV in build (called from backend)")
    exited = death_verdict("exited with code 3", "tail", "build (called from backend)")
    assert (exited["exc_type"], exited["message"]) == ("ProcessExit", "exited with code 3")


def test_while_waiting_runs_once_while_the_first_jobs_are_out():
    pool = _pool(2, [{}, {}], setup="sleepy_runner")
    calls = []
    try:
        pool.run([0])  # both workers started
        finished = pool.run([1.5, 1.5], while_waiting=lambda: calls.append(time.monotonic()))
    finally:
        pool.close()
    assert len(calls) == 1
    assert calls[0] < min(finished) - 1  # it ran while the jobs slept, not after them


def test_a_hangs_site_is_the_innermost_frame_outside_pythons_own_library() -> None:
    """A compiler waiting on its thread or its child process hangs in threading's join or
    subprocess's select: the site names the compiler's frame that waits, not the library's.
    A death keeps its innermost frame (a segfault in ctypes' string_at is at string_at)."""
    from oracles.worker import STDLIB, stack_site

    frames = "\n".join([
        f'  File "{STDLIB}/threading.py", line 1112 in _wait_for_tstate_lock',
        f'  File "{STDLIB}/threading.py", line 1095 in join',
        '  File "/home/me/compiler.py", line 5 in compile_in_thread',
        '  File "/home/me/plugin.py", line 9 in backend',
        f'  File "{STDLIB}/site-packages/x.py", line 9 in run'])
    assert stack_site(frames, past_stdlib=True) == "compile_in_thread (called from backend)"
    assert stack_site(frames) == "_wait_for_tstate_lock (called from join)"
    installed = "\n".join([  # a system Python's packages sit under its library: a compiler, not Python's own
        f'  File "{STDLIB}/threading.py", line 1095 in join',
        f'  File "{STDLIB}/site-packages/compiler/build.py", line 40 in build_engine',
        '  File "/home/me/plugin.py", line 9 in backend'])
    # with the package it is of: a hang in onnx_ir is torch.onnx's export's, not TensorRT's build
    assert stack_site(installed, past_stdlib=True) == "build_engine (called from backend) in compiler"
    exporting = '  File "/venv/lib/python3.12/site-packages/onnx_ir/_core.py", line 9 in _add_usage\n' \
                '  File "/venv/lib/python3.12/site-packages/onnx_ir/_core.py", line 99 in __init__\n'
    assert stack_site(exporting, past_stdlib=True) == "_add_usage (called from __init__) in onnx_ir"
    assert stack_site(exporting) == "_add_usage (called from __init__)"  # a death's site, matched as said
    only_stdlib = f'  File "{STDLIB}/selectors.py", line 415 in select\n'
    assert stack_site(only_stdlib, past_stdlib=True) == "select"  # nothing else: what there is


def sigint_runner() -> Callable[[Any], Any]:
    """Each job says whether this worker ignores SIGINT, and leads its own process group."""
    import signal
    return lambda job: {"ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
                        "own_group": os.getpgid(0) == os.getpid()}


def test_a_terminals_ctrl_c_is_the_main_processs_not_a_workers():
    """Ctrl-C reaches the terminal's whole foreground group: a worker still importing
    printed a KeyboardInterrupt traceback above trtmin's own "interrupted" line. Workers
    start with SIGINT ignored (the main process stops them), out of the terminal's group
    take SIGINT as usual again (what a compiler starts inherits it), and the main process
    keeps its own handler."""
    import signal
    handler = signal.getsignal(signal.SIGINT)
    pool = _pool(1, [{}], setup="sigint_runner")
    try:
        assert pool.run([0]) == [{"ignored": False, "own_group": True}]
    finally:
        pool.close()
    assert signal.getsignal(signal.SIGINT) is handler


def busy_runner() -> Callable[[Any], Any]:
    """Each job starts a helper process (its pid to TEST_HELPER_PID) and works for a minute."""
    def job(_: Any) -> Any:
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(os.environ["TEST_HELPER_PID"]).write_text(str(helper.pid))
        time.sleep(60)
    return job


def test_a_stop_mid_job_kills_the_busy_worker_and_its_helpers_at_once(tmp_path, monkeypatch):
    """Workers ignore the terminal's Ctrl-C: a busy one could not read the pool's stop
    message, and the stop waited out its grace (5 s, nothing on screen), a second Ctrl-C
    meanwhile leaving the job's helpers running. A busy worker is killed with its group now."""
    import signal
    monkeypatch.setenv("TEST_HELPER_PID", str(tmp_path / "helper"))
    pool = _pool(1, [{}], setup="busy_runner")
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.alarm(4)  # the Ctrl-C, as the main process sees it, while the job runs
        with pytest.raises(KeyboardInterrupt):
            pool.run([0])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        t0 = time.monotonic()
        pool.close()
        took = time.monotonic() - t0
    assert took < 2.5, took
    helper = int((tmp_path / "helper").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and running(helper):
        time.sleep(0.05)
    assert not running(helper), "the job's helper outlived its worker"

