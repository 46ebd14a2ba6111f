"""Delta debugging over nodes: delete contiguous chunks, halving their size down to 1.

Deleted nodes are cut to inputs (their users read eager values). After a success the
same chunk size resumes at the same position, so progress is deterministic.
"""

from __future__ import annotations

from minimize.problem import ReductionProblem


def delete_chunks(problem: ReductionProblem) -> None:
    size = max(1, len(problem.current) // 2)
    while True:
        pos = 0
        while pos < len(problem.current):
            cur = problem.current
            cands, starts = [], []
            for start in range(pos, len(cur), size):
                c = problem.program.normalize(cur[:start] + cur[start + size:])
                if c and c != cur:
                    cands.append(c)
                    starts.append(start)
            i = problem.try_first(cands)
            if i is None:
                break
            problem.accept(cands[i])
            pos = starts[i]
        if size == 1:
            return
        size = max(1, size // 2)
