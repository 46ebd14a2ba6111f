"""Block bisection: the minimal contiguous failing window, in O(log n) oracle calls.

A binary search for the shortest failing prefix [0, h) (cut nodes feed the rest as
inputs), then a galloping search for the shortest failing suffix of it: its last w
nodes, w = 1, 2, 4, 8, then a binary search. Bug cores are a few nodes, so the second
search costs about 2*log2(w) calls, not log2(h). When the prefix's verdict names the
output that is off (mismatch, NaN), the suffix search runs over that output's cone
only, if the cone alone still fails: on the Inductor example the prefix ends at node 98
and the cone is 4 nodes (arange * 1e9 and two more), so that search costs 4 calls, not
12. With --jobs, a search's next probes are evaluated at once
(ReductionProblem.run_search). Searching the suffix of the whole program at the same
time would parallelize better, but costs more calls at --jobs 1, and oracle calls are
the currency. Borrowed in spirit from torch.fx
net_min_base's block traverse and Polygraphy's `debug reduce`.
"""

from __future__ import annotations

from typing import Callable

from minimize.passes.outputs import failing_output_cone
from minimize.problem import Candidate, ReductionProblem
from minimize.search import SearchFactory, binary_first_true, speculative_probes


def _prefix_search(problem: ReductionProblem) -> tuple[SearchFactory, Callable[[int], Candidate]] | None:
    """The first search: the shortest failing prefix, as a search and its candidates."""
    cur, norm = problem.current, problem.program.normalize
    if len(cur) < 4:
        return None
    return (lambda: binary_first_true(1, len(cur))), (lambda h: norm(cur[:h]))


def opening_probes(problem: ReductionProblem, k: int) -> list[Candidate]:
    """The first k probes bisect_window may make, to evaluate beside the original."""
    search = _prefix_search(problem)
    if search is None or k < 1:
        return []
    factory, prefix = search
    return [prefix(h) for h in speculative_probes(factory, lambda h: None, k)]


def bisect_window(problem: ReductionProblem) -> None:
    search = _prefix_search(problem)
    if search is None:
        return
    factory, prefix = search
    region = prefix(problem.run_search(factory, prefix))
    cone = failing_output_cone(problem, region)
    if cone and cone != region and problem.is_interesting(cone):
        region = cone

    def suffix(w: int) -> Candidate:
        return problem.program.normalize(region[-w:])

    window = suffix(problem.first_true(1, len(region), suffix, gallop=True))
    if window and window != problem.current and problem.is_interesting(window):
        problem.accept(window)
