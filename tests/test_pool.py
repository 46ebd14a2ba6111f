"""The worker pool itself (oracles/worker.py), with workers that import nothing heavy."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import pytest

from oracles.errors import TrtminError
from oracles.worker import WorkerConfig, WorkerPool


def slow_start_runner() -> Callable[[Any], dict[str, Any]]:
    """A worker's setup: sleeps TEST_START_SECONDS, then each job says which worker ran it."""
    time.sleep(float(os.environ.get("TEST_START_SECONDS", "0")))
    return lambda job: {"job": job, "worker": os.environ.get("TEST_WORKER")}


def failing_runner() -> Callable[[Any], Any]:
    raise RuntimeError("no compiler here")


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
    assert pool.restarts == 0  # a start that fails is reported, not retried in a loop
