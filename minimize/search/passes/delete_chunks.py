"""Delta debugging over nodes: delete contiguous chunks, halving their size down to 1,
and the proof that the result is 1-minimal.

Deleted nodes are cut to inputs (their users read eager values). After a success the
same chunk size resumes at the same position, so progress is deterministic.
"""

from __future__ import annotations

from minimize.search.problem import ReductionProblem


def delete_chunks(problem: ReductionProblem) -> None:
    """Chunks of half the graph, then a quarter, down to single nodes; only single nodes
    where keep_needed found every node needed (those cuts are cached)."""
    all_needed = problem.notes.get("_all_needed") == list(problem.current.nodes)
    size = 1 if all_needed else max(1, len(problem.current.nodes) // 2)
    while True:
        pos = 0
        while pos < len(problem.current.nodes):
            cur = problem.current.nodes
            cands, starts = [], []
            for start in range(pos, len(cur), size):
                c = problem.program.normalize(cur[:start] + cur[start + size:])
                if c and c != cur:
                    cands.append(problem.at(c))
                    starts.append(start)
            i = problem.try_first(cands)
            if i is None:
                break
            problem.consider(cands[i])
            pos = starts[i]
        if size == 1:
            return
        size = max(1, size // 2)


def prove_one_minimal(problem: ReductionProblem) -> None:
    """Whether the graph is 1-minimal: no single node can be cut with the bug still there.
    Each one-node cut is tried (delete_chunks' last round asked them all, so they come from
    the cache); one that still fails is taken, and the tiers run again."""
    cur = problem.current.nodes
    cuts = [problem.at(c) for c in (problem.program.normalize(cur[:i] + cur[i + 1:]) for i in range(len(cur)))
            if c and c != cur]
    i = problem.try_first(cuts)
    if i is not None:
        problem.consider(cuts[i])
    problem.notes["one_minimal"] = {"proven": i is None, "cuts_tried": len(cuts) if i is None else i + 1}
