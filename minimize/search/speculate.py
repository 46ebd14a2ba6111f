"""Speculation over the whole reduction: what to evaluate beside the run it needs now.

The reduction (every pass, in the scheduler's order) is deterministic given the
verdicts it gets, so it can be replayed from its start (Replay, a view of the problem with
the same passes and the same consider()) that answers from the verdicts already known and
from hypothetical yes/no answers, and stops at the first run it has neither for. That run
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
from minimize.search.problem import NeedsProbe, PathEnds, ReductionProblem, Walk
from minimize.search.searches import ProbeWalk, speculative_probes
from oracles.verdict import Verdict

Pipeline = Callable[[ReductionProblem], None]
ORIGINAL_FAILS_P = 0.95  # the user says it fails


class Replay(ReductionProblem):
    """The reduction walked again from its start over what `real` knows (program, verdict
    cache, switches), as shrinkray's View over a problem: a run with a verdict is answered
    from the cache, one in `hypotheses` by its yes/no, and the first with neither ends the
    walk (NeedsProbe names it). It overrides only what reaches outside the walk: it never
    evaluates, charges, journals, shows or checks anything."""

    def __init__(self, real: ReductionProblem, hypotheses: dict[Candidate, bool]):
        self.__dict__.update(real.__dict__)  # the knowledge, shared
        self.walk = Walk(real.start)
        self.hypotheses = hypotheses
        self.on_change = self.check_original = lambda _: None  # the real walk shows and checks

    def runs(self, cand: Candidate, p_true: float = 0.5) -> list[Verdict]:
        if cand in self.cache:
            return self.cache[cand]
        if cand in self.hypotheses:
            raise PathEnds  # a hypothesis is a yes/no, not a verdict
        raise NeedsProbe(cand, self._prior(cand, p_true))

    def is_interesting(self, cand: Candidate, p_true: float = 0.5) -> bool:
        if cand not in self.cache and cand in self.hypotheses:
            return self.hypotheses[cand]
        return super().is_interesting(cand, p_true)

    def partitions(self, cand: Candidate) -> list[list[str]]:
        """A candidate the backend has not partitioned yet is hypothesized to compile to one
        engine, so isolate_partition cuts nothing and the walk goes on: the original's check
        and the localization run go in one round. A wrong guess costs speculative runs only."""
        return self.partition_cache.get(cand, [])

    def failing_sink(self, cand: Candidate) -> int | None:
        """Where `cand` only is hypothesized to fail: its last node when that is an output,
        where a localized prefix ends, the value seen off."""
        if self.known_verdict(cand) is not None:
            return super().failing_sink(cand)
        nodes = cand.nodes
        return nodes[-1] if nodes and nodes[-1] in self.program.outputs_of(nodes) else None

    def establish_original(self) -> Verdict | None:
        """With the original only hypothesized, the walk goes on with the failure it is
        expected to be (or ends, hypothesized to pass)."""
        if self.current in self.cache:
            return super().establish_original()
        if not self.is_interesting(self.current, p_true=ORIGINAL_FAILS_P):
            raise PathEnds
        return None


def reduction_walk(problem: ReductionProblem, pipeline: Pipeline) -> ProbeWalk:
    """The walk of the whole reduction: its first run, under `guess`, with no verdict."""
    def walk(guess: dict[Any, bool]) -> tuple[Hashable, float] | None:
        try:
            pipeline(Replay(problem, guess))
        except NeedsProbe as need:
            return need.cand, need.p_true
        except PathEnds:
            pass
        return None
    return walk


def next_runs(problem: ReductionProblem, pipeline: Pipeline, budget: int) -> list[Candidate]:
    """Up to `budget` runs the reduction may ask for next, the one it needs now first."""
    return speculative_probes(reduction_walk(problem, pipeline), budget)
