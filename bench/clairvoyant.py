"""The best `--jobs N` can do: speculation that knows every answer in advance.

    python bench/clairvoyant.py JOURNAL reduce MODEL ... --jobs 4

runs `trtmin reduce` with its speculation replaced by the calls a `--jobs 1` run of the same
case made, in their order (its `journal.jsonl`): beside each call the reduction needs, the
next N-1 it will need. No speculator that keeps the result the same for any N (only real
verdicts decide) can do better, so this run's time is a floor for the `--jobs N` figure on
that case: what the fixed costs and the calls' count allow, whatever the priors. A bench
tool, not a feature: the journal must come from the same case, options and commit.

The CLI starts its workers before it imports torch; the patch is put in when
`minimize.search.scheduler` is first imported, so that order, and the timing, stay as they are.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import runpy
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def recorded_calls(journal: Path) -> list[Any]:
    from minimize.program.candidate import Candidate
    return [Candidate.from_record(json.loads(line)) for line in journal.read_text().splitlines()[1:]]


def recorded_next_runs(calls: list[Any]) -> Any:
    """A next_runs for minimize.search.scheduler that offers the recorded calls in their order."""
    def next_runs(problem: Any, pipeline: Any, budget: int) -> list[Any]:
        return [k for k in calls if k not in problem.cache][:budget]
    return next_runs


class _PatchScheduler(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads minimize.search.scheduler as usual, then swaps its next_runs for the recorded order."""

    def __init__(self, journal: Path) -> None:
        self.journal = journal

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "minimize.search.scheduler":
            return None
        sys.meta_path.remove(self)
        self.spec = importlib.machinery.PathFinder.find_spec(name, path)
        sys.meta_path.insert(0, self)
        return importlib.machinery.ModuleSpec(name, self, origin=self.spec.origin)

    def create_module(self, spec: Any) -> Any:
        return None

    def exec_module(self, module: Any) -> None:
        module.__file__ = self.spec.origin
        exec(compile(Path(self.spec.origin).read_text(), self.spec.origin, "exec"), module.__dict__)
        module.next_runs = recorded_next_runs(recorded_calls(self.journal))


def main() -> None:
    journal = Path(sys.argv[1])
    if not journal.is_file():
        sys.exit(f"usage: python bench/clairvoyant.py JOURNAL reduce ... (no journal at {journal})")
    sys.meta_path.insert(0, _PatchScheduler(journal))
    sys.argv = ["trtmin", *sys.argv[2:]]
    runpy.run_module("minimize.cli", run_name="__main__")


if __name__ == "__main__":
    main()
