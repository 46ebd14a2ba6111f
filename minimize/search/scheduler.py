"""Runs the whole reduction: the original's check, then the tier list to a fixed point,
keeping per-pass statistics."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from minimize.search.passes import FINISHERS, PROOF, TIERS, Pass
from minimize.search.problem import PassStats, ReductionProblem
from minimize.search import CHECK_ORIGINAL, DONE
from minimize.search.speculate import next_runs


@contextmanager
def counted(problem: ReductionProblem, name: str) -> Iterator[None]:
    """The oracle calls, accepted steps, nodes removed and seconds of what runs inside, as
    row `name` of the per-pass table: the passes, and the checks outside them (the
    original's, the static sizes', the values the failing ops read), so the rows add up
    to the calls the report states."""
    stats = problem.pass_stats.setdefault(name, PassStats())
    calls0, acc0, size0 = problem.counters.oracle_calls, problem.counters.accepted, len(problem.current.nodes)
    t0 = time.monotonic()
    yield
    stats.calls += problem.counters.oracle_calls - calls0
    stats.accepted += problem.counters.accepted - acc0
    stats.removed += size0 - len(problem.current.nodes)
    stats.seconds += time.monotonic() - t0


def _run(problem: ReductionProblem, name: str, run_pass: Pass) -> None:
    problem.current_pass = name
    with counted(problem, name):
        run_pass(problem)


def reduce_to_fixpoint(problem: ReductionProblem, max_rounds: int = 20) -> None:
    for _ in range(max_rounds):
        before = problem.current.nodes
        for name, run_pass in TIERS:
            _run(problem, name, run_pass)
        if problem.current.nodes == before:
            _run(problem, *PROOF)  # every one-node cut, mostly from the cache
            if problem.current.nodes == before:
                break
    for name, run_pass in FINISHERS:
        _run(problem, name, run_pass)


def reduction(problem: ReductionProblem) -> None:
    """Everything the reducer asks the oracle, in order: a pure function of the verdicts,
    so that speculation can replay it (minimize/search/speculate.py)."""
    with counted(problem, CHECK_ORIGINAL):
        problem.establish_original()
    reduce_to_fixpoint(problem)


def run_reduction(problem: ReductionProblem) -> None:
    """The reduction, with speculation over all of it when there are workers to spare."""
    if problem.jobs > 1:
        problem.speculate = lambda budget: next_runs(problem, reduction, budget)
    try:
        reduction(problem)
        problem.current_pass = DONE  # the live line shows the result while the outputs are written
    finally:
        problem.speculate = None  # the checks after it (static sizes) are asked alone
