"""How a real case's reduction schedules with --jobs N, without its compiler.

    python bench/replay_journal.py JOURNAL MODEL [--inputs FILE] [--jobs 1 4]

runs the reduction in this process against the verdicts a `--jobs 1` run of the same case
journaled (its `journal.jsonl`, from any machine: a GPU run's journal replays on a CPU), and
prints for each N the rounds of parallel evaluation it takes (the wall-time currency with
--jobs), beside the clairvoyant floor (bench/clairvoyant.py: speculation that knows the
calls to come). A speculative run the journal has no verdict for is answered "pass"; the
calls the reduction needs are all in the journal, or the tool says the journal is another
version's. Tuning the speculation's priors on real cases is then a matter of seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minimize.program.candidate import Candidate  # noqa: E402
from minimize.program.inputs import load_inputs, make_inputs, prepare, saved_example_inputs  # noqa: E402
from minimize.program.model import Program, load_exported  # noqa: E402
from minimize.search import scheduler  # noqa: E402
from minimize.options import Options  # noqa: E402
from minimize.reduce import rules_of  # noqa: E402
from minimize.search.problem import ReductionProblem  # noqa: E402
from bench.clairvoyant import recorded_next_runs  # noqa: E402
from oracles.backends import BUILTIN  # noqa: E402
from oracles.backends.base import Backend  # noqa: E402
from oracles.verdict import VALUE_ORACLES, Verdict  # noqa: E402


def read_journal(path: Path, model: Path) -> tuple[Options, list[Candidate], dict[Candidate, list[Verdict]]]:
    """The run's options (from the header), the calls in their order, and their verdicts."""
    lines = path.read_text().splitlines()
    recorded = json.loads(lines[0])["header"]["options"]
    options = Options(model=model, **{k: v for k, v in recorded.items() if k in {f.name for f in fields(Options)}})
    records = [json.loads(line) for line in lines[1:] if line.strip()]
    calls = [Candidate.from_record(r) for r in records]
    return options, calls, {c: [Verdict.from_dict(v) for v in r["runs"]] for c, r in zip(calls, records)}


def replay(program: Program, opts: Options, calls: list[Candidate],
           verdicts: dict[Candidate, list[Verdict]], jobs: int, clairvoyant: bool) -> ReductionProblem:
    backend = BUILTIN.get(opts.backend.split(":")[0], Backend)  # its class: what it lets the passes try
    rules = rules_of(opts, backend, re.compile(opts.match) if opts.match else None)
    problem = ReductionProblem(program, lambda cands: [verdicts.get(c, [Verdict("pass")]) for c in cands], rules,
                               settings=opts.settings, jobs=jobs)
    real_next_runs = scheduler.next_runs
    if clairvoyant:
        scheduler.next_runs = recorded_next_runs(calls)
    try:
        scheduler.run_reduction(problem)
    finally:
        scheduler.next_runs = real_next_runs
    unknown = [c for c in problem.charged if c not in verdicts]
    if unknown:
        sys.exit(f"{len(unknown)} calls the reduction needs are not in the journal: it is another version's run")
    return problem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("journal", type=Path)
    ap.add_argument("model", type=Path)
    ap.add_argument("--inputs", type=Path)
    ap.add_argument("--jobs", nargs="+", type=int, default=[1, 4])
    a = ap.parse_args()
    options, calls, verdicts = read_journal(a.journal, a.model)
    ep = load_exported(a.model)
    saved = None if a.inputs else saved_example_inputs(ep)  # as a reduction without --inputs runs (Session)
    inputs = load_inputs(a.inputs, ep) if a.inputs else saved if saved is not None else make_inputs(ep)
    program = Program(prepare(ep, "cpu"), inputs, device="cpu", fixed_random=options.oracle in VALUE_ORACLES)
    if calls[0].nodes != program.normalize(program.all_kept()):
        sys.exit("the journal's first call is not this model's whole program: another model")
    for jobs in a.jobs:
        real = replay(program, options, calls, verdicts, jobs, clairvoyant=False)
        floor = replay(program, options, calls, verdicts, jobs, clairvoyant=True)
        c = real.counters
        print(f"--jobs {jobs}: {c.oracle_calls} calls, {len(real.current.nodes)} nodes, {c.batches} rounds "
              f"({c.evaluations} runs); clairvoyant {floor.counters.batches} rounds")


if __name__ == "__main__":
    main()
