"""The nodes a failing window needs inside it, in about log2(n) oracle calls each.

bisect_window leaves a window whose first and last nodes the failure needs; what else it
needs is often one node among many (scaled_query_segfault: the first flow step's
attention, among the 20 nodes of that step), which delta debugging finds in about 2n
calls. Here the last node is kept, and the shortest prefix of the rest that still fails
with it is searched for: that prefix's last node is needed too. It joins the kept nodes,
the prefix before it is searched the same way, and so on until a search finds that none
of what is left is needed (QuickXplain's idea, from one side). Every candidate is still
decided by the oracle; delete_chunks then makes the result 1-minimal.

Where the needed node was the one next to the kept ones, the next is likely so too (a
chain, as in the real Torch-TensorRT RoPE window where all 20 nodes were needed and the
gallop spent 72 calls): that cut alone is asked first, 1 call per node. A window found
all needed this way has had every one-node cut asked, so delete_chunks asks only those
(from the cache) rather than chunks.
"""

from __future__ import annotations

from minimize.program.candidate import Nodes
from minimize.search.problem import ReductionProblem
from minimize.search.searches import Expect, Search, gallop_first_true, mapped

MIN_LEN = 8  # below this, delta debugging is as cheap
CHAIN_P = 0.8  # a needed node's neighbour is needed too (ranks speculation only)


def _needed_search(problem: ReductionProblem, cur: Nodes) -> Search:
    """The nodes of `cur` found needed, its last node first kept."""
    norm = problem.program.normalize
    kept, left = [cur[-1]], list(cur[:-1])
    adjacent = False  # the last node found needed was next to the kept ones
    while left:
        # left[:h] + kept fails for h = len(left) (the candidate found last); the smallest
        # such h: 0 (nothing of left is needed), or its node h - 1 is. Probes 0 and 1
        # first: after the first search the next needed node is often the window's first.
        if adjacent and not (yield Expect(norm(left[:-1] + kept), False, CHAIN_P)):
            h = len(left)  # without its last node it passes: that node is needed
        else:
            hi = len(left) - 1 if adjacent else len(left)  # asked already: left[:-1] + kept fails
            h = yield from mapped(gallop_first_true(0, hi, max_steps=2), lambda h: norm(left[:h] + kept))
        if h == 0:
            break
        adjacent = h == len(left)
        kept, left = [left[h - 1], *kept], left[:h - 1]
    return norm(kept)


def keep_needed(problem: ReductionProblem) -> None:
    cur = problem.current.nodes
    if len(cur) < MIN_LEN:
        return
    needed = problem.run_search(lambda: _needed_search(problem, cur))
    if needed == cur:
        problem.notes["_all_needed"] = list(cur)  # each one-node cut was asked, and passes
    elif needed:
        problem.consider(problem.at(needed))
