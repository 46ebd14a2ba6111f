"""The reduction problem: the current best candidate, the verdict cache and the counters.

Passes only propose candidates; this applier tests them (DESIGN.md key idea 4). With
N workers it evaluates up to N candidates at once *speculatively*, but the answer is
always the first success in the pass's fixed order, so the result is byte-identical
for any N. `oracle_calls` counts only the calls the sequential (N=1) algorithm makes;
speculative extra work is reported separately, as timing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from minimize.program import Program
from minimize.search import SearchFactory, replay, speculative_probes
from oracles.verdict import Signature, Verdict

Candidate = tuple[int, ...]
Settings = tuple[tuple[str, str], ...]  # backend settings (--set), sorted: part of the cache key
Key = tuple[Candidate, Settings]


@dataclass
class PassStats:
    calls: int = 0
    accepted: int = 0
    removed: int = 0
    seconds: float = 0.0


@dataclass
class Counters:
    oracle_calls: int = 0          # calls the sequential algorithm needed (deterministic)
    evaluations: int = 0           # worker calls actually made (>= oracle_calls with --jobs > 1)
    batches: int = 0               # rounds of parallel evaluation: the wall-time currency with --jobs
    first_batch_seconds: float = 0.0  # includes starting the workers
    accepted: int = 0
    invalid: int = 0
    oracle_seconds: float = 0.0


class ReductionProblem:
    def __init__(self, program: Program, evaluate_batch: Callable[[list[Key]], Sequence[Verdict | list[Verdict]]],
                 jobs: int = 1, match: re.Pattern[str] | None = None, any_failure: bool = False,
                 on_change: Callable[["ReductionProblem"], None] | None = None,
                 on_evaluated: Callable[[Key, list[Verdict]], None] | None = None,
                 settings: dict[str, str] | None = None, partitions: Callable[[Key], list[list[str]]] | None = None):
        self.program = program
        self.settings: Settings = tuple(sorted((settings or {}).items()))
        self.partitions = partitions  # the backend's compiled partitions of a candidate, if it reports them
        self.op_fallback_setting: str | None = None  # e.g. torch_executed_ops
        self.notes: dict[str, Any] = {}  # diagnostics for the report: culprit op, failing engine
        self.localize = False  # may bisect_window guess from a run with every value an output (minimize/localize.py)
        # With --repeat N, a candidate's verdicts are N runs; it is interesting when at
        # least `min_failures` of them fail the same way (set from the original's rate).
        self.min_failures = 1
        self.on_evaluated = on_evaluated or (lambda c, v: None)
        self._evaluate_batch = evaluate_batch
        self.jobs = max(1, jobs)
        self.match = match
        self.any_failure = any_failure
        self.on_change = on_change or (lambda p: None)
        self.current: Candidate = program.normalize(program.all_kept())
        self.cache: dict[Key, list[Verdict]] = {}
        self._charged: set[Key] = set()
        self.counters = Counters()
        self.pass_stats: dict[str, PassStats] = {}
        self.signature: Signature | None = None
        self.first_verdict: Verdict | None = None
        self.last_verdict: Verdict | None = None
        self.current_pass = "check"

    # ---- evaluation --------------------------------------------------------------
    def key(self, cand: Candidate, settings: Settings | None = None) -> Key:
        return (cand, self.settings if settings is None else settings)

    def _ensure(self, cands: Sequence[Candidate]) -> None:
        self._ensure_keys([self.key(c) for c in cands])

    def _ensure_keys(self, keys: Sequence[Key]) -> None:
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if not todo:
            return
        t0 = time.monotonic()
        results = self._evaluate_batch(todo)
        if not self.counters.batches:
            self.counters.first_batch_seconds = time.monotonic() - t0
        self.counters.oracle_seconds += time.monotonic() - t0
        self.counters.evaluations += len(todo)
        self.counters.batches += 1
        for c, r in zip(todo, results):
            runs = r if isinstance(r, list) else [r]
            self.cache[c] = runs
            self.on_evaluated(c, runs)
            if runs[0].kind == "invalid":
                self.counters.invalid += 1

    def preload(self, cache: dict[Key, list[Verdict]]) -> None:
        """Verdicts from an interrupted run's journal: replaying them is free."""
        self.cache.update(cache)

    def runs(self, cand: Candidate, settings: Settings | None = None) -> list[Verdict]:
        """The sequential algorithm asks for a verdict: charge it once."""
        key = self.key(cand, settings)
        self._ensure_keys([key])
        if key not in self._charged:
            self._charged.add(key)
            self.counters.oracle_calls += 1
        self.on_change(self)
        return self.cache[key]

    def _matches(self, v: Verdict) -> bool:
        if self.signature is None:
            return v.failed
        return self.signature.matches(v, self.match, self.any_failure)

    def _count_failures(self, runs: list[Verdict]) -> int:
        return sum(1 for v in runs if self._matches(v))

    def failures(self, cand: Candidate, settings: Settings | None = None) -> int:
        return self._count_failures(self.runs(cand, settings))

    def verdict(self, cand: Candidate, settings: Settings | None = None) -> Verdict:
        """The representative verdict: the first run that fails the same way, else the first."""
        self.runs(cand, settings)
        return self.known_verdict(cand, settings)  # type: ignore[return-value]

    def is_interesting(self, cand: Candidate, settings: Settings | None = None) -> bool:
        ok = self.failures(cand, settings) >= self.min_failures
        if ok:
            self.last_verdict = self.verdict(cand, settings)
        return ok

    def first_settings(self, options: Sequence[Settings], want_failure: bool = True) -> int | None:
        """Index of the first settings under which the current candidate fails (or, with
        want_failure=False, passes); speculates N at a time like try_first."""
        for start in range(0, len(options), self.jobs):
            self._ensure_keys([self.key(self.current, o) for o in options[start:start + self.jobs]])
            for i in range(start, min(start + self.jobs, len(options))):
                if self.is_interesting(self.current, options[i]) == want_failure:
                    return i
        return None

    def try_first(self, cands: Sequence[Candidate]) -> int | None:
        """Index of the first interesting candidate, in order; speculates N at a time."""
        for start in range(0, len(cands), self.jobs):
            self._ensure(cands[start:start + self.jobs])
            for i in range(start, min(start + self.jobs, len(cands))):
                if self.is_interesting(cands[i]):
                    return i
        return None

    def run_search(self, factory: SearchFactory, make: Callable[[Any], Candidate] = lambda c: c) -> Any:
        """A sequential search over candidates (or over whatever `make` turns into
        candidates), sped up by speculation.

        With N workers, each round evaluates the N probes the search may need next
        (most probable paths first, minimize/search.py), then replays it as far as the
        known verdicts take it. The walk is the sequential one, so the result and the
        charged calls are the same for any N.
        """
        while True:
            x, result = replay(factory, lambda p: self._charged_answer(make(p)))
            if x is None:
                return result
            self._ensure([make(p) for p in speculative_probes(factory, lambda p: self._peek(make(p)), self.jobs)])

    def known_verdict(self, cand: Candidate, settings: Settings | None = None) -> Verdict | None:
        """The representative verdict of a candidate already evaluated, uncharged (a
        search replayed under hypothetical answers may ask for one it has not got)."""
        runs = self.cache.get(self.key(cand, settings))
        return None if runs is None else next((v for v in runs if self._matches(v)), runs[0])

    def _peek(self, cand: Candidate) -> bool | None:
        """A known answer, uncharged: speculation's guesses are not calls of the sequential algorithm."""
        runs = self.cache.get(self.key(cand))
        return None if runs is None else self._count_failures(runs) >= self.min_failures

    def _charged_answer(self, cand: Candidate) -> bool | None:
        """The sequential walk's answer for a candidate already evaluated (charged), else None."""
        if self.key(cand) not in self.cache:
            return None
        return self.is_interesting(cand)

    # ---- acceptance -----------------------------------------------------------------
    def accept(self, cand: Candidate) -> None:
        self.current = cand
        self.counters.accepted += 1
        self.on_change(self)

    def check_original(self, speculate: Sequence[Key] = ()) -> Verdict:
        """The original's verdict. `speculate`: the first pass's opening runs, evaluated
        in the same batch when workers are free (the original is expected to fail)."""
        self._ensure_keys([self.key(self.current), *speculate[:self.jobs - 1]])
        v = self.verdict(self.current)
        self.first_verdict = self.last_verdict = v
        return v
