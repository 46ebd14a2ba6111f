"""The reduction problem: the current best candidate, the verdict cache and the counters.

Passes only propose candidates and ask for them one at a time, as sequential code
(docs/design.md#speculation). With N workers, each time the reduction needs a verdict it has
not got, up to N-1 more runs are evaluated beside it *speculatively*: the ones the
rest of the reduction, every pass, is most likely to ask for next
(minimize/search/speculate.py's Replay walks it from the start under hypothetical answers). The
walk itself only ever uses real verdicts, so the result is byte-identical for any N,
and `oracle_calls` counts only the calls the sequential (N=1) algorithm makes;
speculative extra work is reported separately, as timing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Sequence

from minimize.program.candidate import Candidate, Settings
from minimize.program.model import Program
from minimize.search.searches import SearchFactory, drive
from oracles.verdict import VALUE_ORACLES, Signature, Verdict, failing_outputs

GUESS_RIGHT_P = 0.9  # a candidate without the node localization named fails with 1 - this


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
    invalid: int = 0               # of the oracle calls, the candidates that could not be judged (any --jobs)
    oracle_seconds: float = 0.0


@dataclass
class Walk:
    """What one walk of the reduction changes, from its start: the current candidate and
    what the walk has learnt and counted. A replay (minimize/search/speculate.py) starts a
    fresh Walk over the same knowledge (program, verdict cache, options), so nothing here
    needs resetting by hand; each field reads and writes as an attribute of the problem."""

    current: Candidate
    notes: dict[str, Any] = field(default_factory=dict)  # diagnostics for the report: culprit op, failing engine
    pass_stats: dict[str, PassStats] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)
    charged: set[Candidate] = field(default_factory=set)  # runs counted as oracle calls
    signature: Signature | None = None
    # The nodes upstream of the original's failing output, itself included (a value bug's):
    # a candidate fails the same way only in an output among them. Another output's bug,
    # independent of it, is another bug (establish_original).
    symptom_cone: frozenset[int] | None = None
    first_verdict: Verdict | None = None
    last_verdict: Verdict | None = None
    guessed_node: int | None = None  # the node localization named: ranks speculation only
    # With --repeat N, a candidate's verdicts are N runs; it is interesting when at least
    # `min_failures` of them fail the same way (default: as many as the original where it
    # failed every run, else half its count: establish_original).
    min_failures: int = 1
    original_failures: int = 0
    current_pass: str = "check"


@dataclass(frozen=True)
class Rules:
    """What the options and the backend fix for the whole reduction: when a verdict is the
    same bug, and what the passes may try."""

    match: re.Pattern[str] | None = None  # --match: the failure text a candidate must show
    any_failure: bool = False  # --any-failure: a candidate that fails in any way will do
    min_failures: int | None = None  # --min-failures, else from the original (establish_original)
    localize: bool = False  # may bisect_window guess from a run with every value an output (localize.py)
    locate_from_errors: bool = False  # ... or from the node a compiler's error names (free)
    generate_values: bool = False  # may the last passes make values and shrink sizes (values.py, shapes.py)
    op_fallback_setting: str | None = None  # the backend's, e.g. torch_executed_ops
    lowering_toggles: tuple[tuple[str, str], ...] = ()  # the backend's, e.g. (("attn_bias_is_causal", "false"),)
    rewrite_words: str = "its lowering, before it converts ops"  # what the toggles turn off, in the report's words


class NeedsProbe(BaseException):
    """A replay under hypothetical answers reached a run it has neither a verdict nor a
    hypothesis for: the next probe on that path (BaseException: no pass may swallow it)."""

    def __init__(self, cand: Candidate, p_true: float):
        super().__init__(cand)
        self.cand, self.p_true = cand, p_true


class PathEnds(BaseException):
    """A replay needs more than a yes/no about a hypothetical run (its verdict's
    details, a localization, the compiled partitions): speculation stops on that path."""


class ReductionProblem:
    """One reduction: the program, the oracle behind a verdict cache, and the walk (the
    current candidate, notes and counters; its fields read as attributes: problem.current).
    Passes ask `is_interesting` of Candidate values and propose them with `consider`, the one
    place a step is taken (docs/design.md, "Acceptance"). speculate.Replay walks it again
    under hypothetical answers, overriding only what reaches outside the walk."""

    def __init__(self, program: Program,
                 evaluate_batch: Callable[[list[Candidate]], Sequence[Verdict | list[Verdict]]],
                 rules: Rules = Rules(), settings: dict[str, str] | None = None, jobs: int = 1,
                 partitions: Callable[[Candidate], list[list[str]]] | None = None,
                 on_change: Callable[["ReductionProblem"], None] | None = None,
                 check_original: Callable[[Verdict], None] = lambda v: None):
        """`evaluate_batch`: the oracle, each candidate's runs; `settings`: the backend's, to
        start from; `partitions`: the backend's compiled partitions of a candidate, where it
        reports them; `on_change`: shows the walk (the journal keeps each verdict as it lands:
        Session.on_verdict); `check_original`: raises where the original does not fail as asked."""
        self.program, self.rules, self.jobs = program, rules, max(1, jobs)
        self.start = Candidate(program.normalize(program.all_kept()), tuple(sorted((settings or {}).items())))
        self.walk = Walk(self.start)
        self._evaluate_batch, self._partitions = evaluate_batch, partitions
        self.on_change = on_change or (lambda p: None)
        self.check_original = check_original
        self.cache: dict[Candidate, list[Verdict]] = {}
        self.partition_cache: dict[Candidate, list[list[str]]] = {}
        self.value_expressions: dict[tuple[str, int], str | None] = {}  # made values' texts (passes/values.py)
        self.shape_checks: dict[Any, bool] = {}  # which shapes fit the graph (passes/shapes.py)
        self.leaves_cache: dict[tuple[int, ...], list[int]] = {}  # output_leaves' answers
        # What to evaluate beside a needed run (set by minimize/search/scheduler.py when jobs > 1).
        self.speculate: Callable[[int], list[Candidate]] | None = None

    # ---- evaluation --------------------------------------------------------------
    def at(self, nodes: Sequence[int]) -> Candidate:
        """The current candidate with other nodes: what a pass that cuts nodes proposes."""
        return self.current.but(nodes=tuple(nodes))

    def _ensure(self, cands: Sequence[Candidate]) -> None:
        todo = list(dict.fromkeys(c for c in cands if c not in self.cache))
        if not todo:
            return
        if self.speculate is not None and len(todo) < self.jobs:
            extra = [k for k in self.speculate(self.jobs) if k not in self.cache and k not in todo]
            todo += extra[:self.jobs - len(todo)]
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

    def preload(self, cache: dict[Candidate, list[Verdict]]) -> None:
        """Verdicts from an interrupted run's journal: replaying them is free."""
        self.cache.update(cache)

    def runs(self, cand: Candidate, p_true: float = 0.5) -> list[Verdict]:
        """The sequential algorithm asks for a verdict: charge it once. p_true: how
        likely the caller thinks it fails, for ranking speculation."""
        self._ensure([cand])
        if cand not in self.charged:
            self.charged.add(cand)
            self.counters.oracle_calls += 1
            self.counters.invalid += self.cache[cand][0].kind == "invalid"  # of the calls: the same at any --jobs
        self.on_change(self)
        return self.cache[cand]

    def _prior(self, cand: Candidate, p_true: float) -> float:
        """How likely `cand` fails, for ranking speculation only: a candidate without the
        node localization named (its value was the first off; the compiler's error named
        it) rarely fails, where its caller gave no better estimate. A 2-node window's
        module-block deletion that keeps only the node before it is such a candidate."""
        if p_true == 0.5 and self.guessed_node is not None and self.guessed_node not in cand.nodes:
            return 1 - GUESS_RIGHT_P
        return p_true

    def same_bug(self, v: Verdict, cand: Candidate | None = None) -> bool:
        """Whether one run's verdict on `cand` is the bug (before the original is judged: any
        failure); a value bug's only in an output upstream of the original's failing one."""
        if self.signature is None:
            return v.failed
        return self.signature.matches(v, self.rules.match, self.rules.any_failure, self._counts(cand))

    def _counts(self, cand: Candidate | None) -> Callable[[int | None], bool] | None:
        """Which of `cand`'s outputs (flattened, as verdicts count them) may show the bug:
        those whose node is in the symptom's cone (None: any)."""
        if self.symptom_cone is None or cand is None:
            return None

        def counts(output: int | None) -> bool:  # the leaves only where a verdict names an output
            leaves = self.output_leaves(cand.nodes)
            return output is None or output >= len(leaves) or self.upstream_of_symptom(leaves[output])
        return counts

    def upstream_of_symptom(self, node: int) -> bool:
        """Whether a node's value may show the bug: it is in the symptom's cone (or no cone is held)."""
        return self.symptom_cone is None or node in self.symptom_cone

    def output_leaves(self, nodes: tuple[int, ...]) -> list[int]:
        """The node each of a node set's flattened outputs comes from (cached: speculation's
        replays ask again for every candidate they pass)."""
        if nodes not in self.leaves_cache:
            prog = self.program
            self.leaves_cache[nodes] = prog.leaf_nodes([prog.nodes[sink].name for sink in prog.outputs_of(nodes)])
        return self.leaves_cache[nodes]

    def _count_failures(self, runs: list[Verdict], cand: Candidate) -> int:
        return sum(1 for v in runs if self.same_bug(v, cand))

    def failures(self, cand: Candidate) -> int:
        return self._count_failures(self.runs(cand), cand)

    def verdict(self, cand: Candidate) -> Verdict:
        """The representative verdict: the first run that fails the same way, else the first."""
        self.runs(cand)
        return self.known_verdict(cand)  # type: ignore[return-value]

    def is_interesting(self, cand: Candidate, p_true: float = 0.5) -> bool:
        ok = self._count_failures(self.runs(cand, p_true), cand) >= self.min_failures
        if ok:
            self.last_verdict = self.verdict(cand)
        return ok

    def first_settings(self, options: Sequence[Settings], want_failure: bool = True) -> int | None:
        """Index of the first settings under which the current candidate fails (or, with
        want_failure=False, passes)."""
        return next((i for i, o in enumerate(options)
                     if self.is_interesting(self.current.but(settings=o)) == want_failure), None)

    def try_first(self, cands: Sequence[Candidate]) -> int | None:
        """Index of the first interesting candidate, in order."""
        return next((i for i, c in enumerate(cands) if self.is_interesting(c)), None)

    def run_search(self, factory: SearchFactory) -> Any:
        """A sequential search over node sets, each the current candidate with those nodes;
        its Expect hints rank what is speculated beside it."""
        return drive(factory, lambda nodes, p_true: self.is_interesting(self.at(nodes), p_true=p_true))

    def known_verdict(self, cand: Candidate) -> Verdict | None:
        """The representative verdict of a candidate already evaluated, uncharged (a
        search replayed under hypothetical answers may ask for one it has not got)."""
        runs = self.cache.get(cand)
        return None if runs is None else next((v for v in runs if self.same_bug(v, cand)), runs[0])

    def failing_sink(self, cand: Candidate) -> int | None:
        """The node whose value a mismatch or NaN verdict on `cand` finds off (the verdict
        counts flattened tensors; a node may return several), the worst of those in the
        symptom's cone, or None if it names none."""
        verdict = self.known_verdict(cand)
        if verdict is None or verdict.output is None:
            return None
        leaves = self.output_leaves(cand.nodes)
        off = [(size, output) for output, size, _ in failing_outputs(verdict)
               if output is not None and output < len(leaves) and self.upstream_of_symptom(leaves[output])]
        return leaves[max(off, key=lambda o: o[0] or 0)[1]] if off else None  # the worst, as summarize ranks them

    def has_partitions(self) -> bool:
        return self._partitions is not None

    def partitions(self, cand: Candidate) -> list[list[str]]:
        """The backend's compiled partitions (engines) of a candidate, as node names."""
        if cand not in self.partition_cache:
            if self._partitions is None:
                raise PathEnds
            self.partition_cache[cand] = self._partitions(cand)
        return self.partition_cache[cand]

    # ---- acceptance -----------------------------------------------------------------
    def consider(self, cand: Candidate) -> bool:
        """The one place a reduction step is taken (docs/design.md, "Acceptance"): a pass
        proposes `cand`; it is adopted, counted and shown only if it is smaller than what it
        replaces (Candidate.size_key) and fails the same way (the pass asked already: from
        the cache). Passes never assign the current candidate."""
        if not cand.size_key() < self.current.size_key():
            return False
        if not self.is_interesting(cand):
            return False
        self.current = cand
        self.counters.accepted += 1
        self.on_change(self)
        return True

    def establish_original(self) -> Verdict | None:
        """The original's verdict, which sets the signature candidates must match and
        how many of --repeat runs must fail."""
        original = self.current
        v = self.verdict(original)
        self.first_verdict = self.last_verdict = v
        self.signature = Signature.of(v)
        sink = self.failing_sink(original) if v.kind in VALUE_ORACLES and not self.rules.any_failure else None
        self.symptom_cone = None if sink is None else frozenset(self.program.cone(sink))
        self.original_failures = self.failures(original)
        # An original that fails every run is held to that. One that fails only some runs
        # is a flaky bug: half its count (rounded up), since that count is one sample and a
        # candidate with the bug, failing at the same rate, must pass most of the time (at a
        # 50% rate and --repeat 4: 81% of the time, against 61% for the whole count). Not
        # for an original that always fails: another, flaky bug of the same signature would
        # then pass as easily as the one asked for.
        n, repeat = self.original_failures, len(self.cache[original])
        self.min_failures = self.rules.min_failures or (n if n == repeat else max(1, (n + 1) // 2))
        self.check_original(v)
        return v


def _walk_field(name: str) -> property:
    return property(lambda self: getattr(self.walk, name), lambda self, value: setattr(self.walk, name, value))


for _field in fields(Walk):  # problem.current, problem.notes, ...: the walk's, as attributes
    setattr(ReductionProblem, _field.name, _walk_field(_field.name))
