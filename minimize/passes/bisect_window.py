"""Block bisection: the minimal contiguous failing window, in O(log n) oracle calls.

Two binary searches, independent so that they run side by side with --jobs: the
shortest failing prefix [0, h) and the shortest failing suffix [l, n) (cut nodes feed
the rest as inputs). Their intersection [l, h) is the window; if it does not fail (a
bug spread over two places), the shortest failing suffix of the prefix is searched
instead. Borrowed in spirit from torch.fx net_min_base's block traverse and
Polygraphy's `debug reduce`.
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

    def suffix(w: int) -> Candidate:
        return norm(cur[n - w:])

    h, w = problem.first_true_many([(1, n, prefix), (1, n, suffix)])
    window = norm(cur[n - w:h]) if n - w < h else ()
    if not (window and problem.is_interesting(window)):
        end = h
        w = problem.first_true(1, end, lambda k: norm(cur[end - k:end]))
        window = norm(cur[end - w:end])
    if window and window != cur and problem.is_interesting(window):
        problem.accept(window)
