"""What speculation's replays cost trtmin itself, on a big model, without any compiler.

The whole reduction is replayed from its start for every speculative round
(minimize/search/speculate.py). This runs it on a .pt2 with a pure in-process oracle (a planted
2-node NaN near the end, localizable or not), at --jobs 1 and 4, and prints the rounds
and the seconds spent choosing speculative runs.

    python bench/replay_cost.py bench/results/cases/big_mlp_stack.pt2 [--no-localize]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import minimize.search.scheduler as scheduler  # noqa: E402
from minimize.program.inputs import make_inputs, prepare  # noqa: E402
from minimize.program.candidate import Candidate  # noqa: E402
from minimize.search.problem import ReductionProblem, Rules  # noqa: E402
from minimize.program.model import Program, load_exported  # noqa: E402
from oracles.verdict import Verdict  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--no-localize", action="store_true")
    a = ap.parse_args()
    ep = load_exported(a.model)
    program = Program(prepare(ep, "cpu"), make_inputs(ep), device="cpu")
    n = len(program.nodes)
    core = {n - 40, n - 39}

    def verdict(cand: Candidate) -> Verdict:
        if not core <= set(cand.nodes):
            return Verdict("pass")
        if cand.mark_all:
            off = [[i, Verdict("nan").to_dict()] for i in cand.nodes if i >= max(core)][:64]
            return Verdict("nan", extra={"deviating": off})
        return Verdict("nan")

    real_next_runs = scheduler.next_runs
    for jobs in (1, 4):
        spent = [0.0, 0]

        def timed(*args, **kwargs):
            t = time.monotonic()
            out = real_next_runs(*args, **kwargs)
            spent[0] += time.monotonic() - t
            spent[1] += 1
            return out

        scheduler.next_runs = timed
        problem = ReductionProblem(program, lambda cands: [verdict(c) for c in cands],
                                   Rules(localize=not a.no_localize), jobs=jobs)
        t0 = time.monotonic()
        scheduler.run_reduction(problem)
        c = problem.counters
        print(f"{n} nodes, --jobs {jobs}: {time.monotonic() - t0:.2f} s, {c.oracle_calls} calls, {c.batches} rounds, "
              f"{c.evaluations} runs; choosing speculative runs {spent[0]:.2f} s in {spent[1]} rounds; "
              f"result {sorted(problem.current.nodes) == sorted(core)}")
    scheduler.next_runs = real_next_runs


if __name__ == "__main__":
    main()
