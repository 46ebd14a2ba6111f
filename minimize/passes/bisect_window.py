"""Block bisection: the minimal contiguous failing window, in O(log n) oracle calls.

A binary search for the shortest failing prefix [0, h) (cut nodes feed the rest as
inputs), then for the shortest failing suffix [l, h) of it. With --jobs, the top of each
search's decision tree is evaluated at once (ReductionProblem.first_true). Searching
the suffix of the whole program at the same time would parallelize better, but costs
log(n/h) + 1 more calls at --jobs 1, and oracle calls are the currency. Borrowed in
spirit from torch.fx net_min_base's block traverse and Polygraphy's `debug reduce`.
"""

from __future__ import annotations

from minimize.problem import Candidate, ReductionProblem


def bisect_window(problem: ReductionProblem) -> None:
    cur = problem.current
    n = len(cur)
    if n < 4:
        return
    norm = problem.program.normalize

    def prefix(h: int) -> Candidate:
        return norm(cur[:h])

    end = problem.first_true(1, n, prefix)

    def suffix(w: int) -> Candidate:
        return norm(cur[end - w:end])

    window = suffix(problem.first_true(1, end, suffix))
    if window and window != cur and problem.is_interesting(window):
        problem.accept(window)
