"""The nodes a failing window needs inside it, in about log2(n) oracle calls each.

bisect_window leaves a window whose first and last nodes the failure needs; what else it
needs is often one node among many (scaled_query_segfault: the first flow step's
attention, among the 20 nodes of that step), which delta debugging finds in about 2n
calls. Here the last node is kept, and the shortest prefix of the rest that still fails
with it is searched for: that prefix's last node is needed too. It joins the kept nodes,
the prefix before it is searched the same way, and so on until a search finds that none
of what is left is needed (QuickXplain's idea, from one side). Every candidate is still
decided by the oracle; delete_chunks then makes the result 1-minimal.
"""

from __future__ import annotations

from minimize.problem import Candidate, ReductionProblem
from minimize.search import Search, gallop_first_true, mapped

MIN_LEN = 8  # below this, delta debugging is as cheap


def _needed_search(problem: ReductionProblem, cur: Candidate) -> Search:
    """The nodes of `cur` found needed, its last node first kept."""
    norm = problem.program.normalize
    kept, left = [cur[-1]], list(cur[:-1])
    while left:
        # left[:h] + kept fails for h = len(left) (the candidate found last); the smallest
        # such h: 0 (nothing of left is needed), or its node h - 1 is. Probes 0 and 1
        # first: after the first search the next needed node is often the window's first.
        h = yield from mapped(gallop_first_true(0, len(left), max_steps=2), lambda h: norm(left[:h] + kept))
        if h == 0:
            break
        kept, left = [left[h - 1], *kept], left[:h - 1]
    return norm(kept)


def keep_needed(problem: ReductionProblem) -> None:
    cur = problem.current
    if len(cur) < MIN_LEN:
        return
    needed = problem.run_search(lambda: _needed_search(problem, cur))
    if needed and needed != cur and problem.is_interesting(needed):
        problem.accept(needed)
