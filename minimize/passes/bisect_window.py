"""Block bisection: the minimal contiguous failing window, in O(log n) oracle calls.

Binary search for the shortest failing prefix (cut nodes feed the rest as inputs),
then for the shortest failing suffix of that prefix. Borrowed in spirit from
torch.fx net_min_base's block traverse and Polygraphy's `debug reduce`.
"""

from __future__ import annotations

from minimize.problem import ReductionProblem


def bisect_window(problem: ReductionProblem) -> None:
    cur = problem.current
    n = len(cur)
    if n < 4:
        return
    norm = problem.program.normalize

    def prefix(h: int):
        return norm(cur[:h])

    h = problem.first_true(1, n, prefix)
    # prefix(h) may normalize to empty (e.g. a lone getitem); keep searching only on real candidates
    end = h

    def suffix(w: int):
        return norm(cur[end - w:end])

    w = problem.first_true(1, end, suffix)
    best = suffix(w)
    if best and best != cur and problem.is_interesting(best):
        problem.accept(best)
