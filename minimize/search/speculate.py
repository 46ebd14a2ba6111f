"""Speculation over the whole reduction: what to evaluate beside the run it needs now.

The reduction (every pass, in the scheduler's order) is deterministic given the
verdicts it gets, so it can be replayed from its start on a dry copy of the problem
(ReductionProblem.dry_copy) that answers from the verdicts already known and from
hypothetical yes/no answers, and stops at the first run it has neither for. That run
is the next probe on that path; search.speculative_probes branches on both of its
answers, likeliest paths first. So one round may hold the guessed prefix of
bisect_window, the suffixes that follow it and the module-block deletion that
follows those: probes of different passes, which per-pass speculation cannot pair.

A replay costs the reduction's own bookkeeping from the start (no oracle calls): well
under a millisecond a pass on small programs, and it is only done with --jobs > 1.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

from minimize.program.candidate import Candidate
from minimize.search.problem import NeedsProbe, PathEnds, ReductionProblem
from minimize.search.searches import Walk, speculative_probes

Pipeline = Callable[[ReductionProblem], None]


def reduction_walk(problem: ReductionProblem, pipeline: Pipeline) -> Walk:
    """The walk of the whole reduction: its first run, under `guess`, with no verdict."""
    def walk(guess: dict[Any, bool]) -> tuple[Hashable, float] | None:
        try:
            pipeline(problem.dry_copy(guess))
        except NeedsProbe as need:
            return need.cand, need.p_true
        except PathEnds:
            pass
        return None
    return walk


def next_runs(problem: ReductionProblem, pipeline: Pipeline, budget: int) -> list[Candidate]:
    """Up to `budget` runs the reduction may ask for next, the one it needs now first."""
    return speculative_probes(reduction_walk(problem, pipeline), budget)
