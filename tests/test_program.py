"""The program model (cut-to-input slicing) and the reducer, with a pure oracle.

Pure oracles run in-process (no workers), so these properties are checked on many
random programs quickly: slices compute eager's own values, and the reducer finds
exactly the planted core, deterministically, for any number of jobs.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minimize.program.candidate import Candidate
from minimize.program.inputs import prepare
from minimize.search.problem import ReductionProblem, Rules
from minimize.program.model import Program
from oracles.checks import flatten_outputs
from oracles.verdict import Verdict
from tests.conftest import Host
from tests.helpers import cpu_program, reduce_here, reduce_with


@pytest.fixture(scope="module")
def program() -> Program:
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    ep = prepare(torch.export.export(Host().eval(), (x,)), "cpu")
    return Program(ep, [x])


def test_assertion_ops_are_not_reducible(program: Program):
    assert all("assert" not in str(n.target) for n in program.nodes)
    assert len(program.nodes) >= 15


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_slices_compute_eager_values(program: Program, data):
    kept = data.draw(st.sets(st.integers(0, len(program.nodes) - 1), min_size=1))
    kept = program.normalize(kept)
    if not kept:
        return
    piece = program.materialize(kept)
    with torch.no_grad():
        outs = piece.gm(*program.inputs_for(piece))
    for name, out in zip(piece.output_names, outs):
        assert torch.equal(out, program.values[name]), name
    assert not set(piece.input_names) & {program.nodes[i].name for i in kept}


class SeveralValues(torch.nn.Module):
    """Ops of several values (chunk, max.dim), read by getitems a slice may cut."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = torch.relu(x).chunk(2, 1)
        top, where = (a * b).max(-1)
        return top + 1, where


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_the_count_of_a_slices_call_nodes_is_its_graphs(data):
    """The live line counts the current candidate's call nodes without building its slice;
    `done:` counts the slice's graph, which returns an op of several values whole, by a
    getitem each: they said 11 and 13 of one result."""
    program = cpu_program(SeveralValues(), torch.randn(3, 4))
    kept = program.normalize(data.draw(st.sets(st.integers(0, len(program.nodes) - 1), min_size=1)))
    if kept:
        assert program.call_nodes_of(kept) == program.materialize(kept).call_nodes, kept
    chunk = next(i for i, n in enumerate(program.nodes) if "chunk" in str(n.target))
    assert program.call_nodes_of((chunk,)) == 3  # chunk, and a getitem of each of its 2 values


def test_a_cut_view_is_fed_contiguous():
    """unbind's parts are strided views of x; fed to the slice that reads them, each is a
    contiguous copy of the same values (what repro.py feeds, and all Torch-TensorRT takes)."""
    class Unbound(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k = x.permute(1, 0, 2).unbind(0)
            return torch.tanh(q * k)

    x = torch.randn(4, 2, 3)
    prog = cpu_program(Unbound(), x)
    tanh = next(i for i, n in enumerate(prog.nodes) if "tanh" in str(n.target))
    piece = prog.materialize((tanh - 1, tanh))  # mul and tanh: q and k are cut
    fed = dict(zip(piece.input_names, prog.inputs_for(piece)))
    assert len(fed) == 2 and not any(prog.values[name].is_contiguous() for name in fed)
    assert all(v.is_contiguous() and torch.equal(v, prog.values[name]) for name, v in fed.items())


def off_output(program: Program, kept: tuple[int, ...], culprit: int) -> int:
    """Flattened index of the first output of `kept` that depends on `culprit`."""
    keep, index = set(kept), 0
    for sink in program.outputs_of(kept):
        seen, stack = {sink}, [sink]
        while stack:
            for dep in program.nodes[stack.pop()].all_input_nodes:
                i = program.index.get(dep.name)
                if i in keep and i not in seen:
                    seen.add(i)
                    stack.append(i)
        if culprit in seen:
            return index
        value = program.values[program.nodes[sink].name]
        index += len(value) if isinstance(value, (tuple, list)) else 1
    raise AssertionError("a kept node reaches no output")


def reduce_with_pure_oracle(program: Program, core: set[int], jobs: int, kind: str = "crash",
                            localize: bool = False, first_off: int | None = None,
                            hidden: bool | str = False, check_original=lambda v: None,
                            finishers: bool = False, partitions=None) -> ReductionProblem:
    """A planted bug: fails when every core node is kept. As a mismatch, it names the
    output the last core node feeds, as compare_outputs does. Its localization run
    (every value an output) names `first_off` (default: the last core node, as a
    compiler that keeps the bug would) and what follows it as off; hidden: nothing is off
    there (the extra outputs changed what the compiler fused; "crash": that compile fails). finishers: generated values
    and smaller shapes are tried at the end, as the CLI does (the bug survives them)."""
    def verdict(cand: Candidate) -> Verdict:
        if not core <= set(cand.nodes):
            return Verdict("pass")
        if kind == "crash":
            return Verdict("crash", "E", "planted")
        if cand.mark_all and hidden == "crash":  # the compile of every value as an output broke
            return Verdict("crash", "RuntimeError", "Failed to load method forward, error: 0x:1")
        if cand.mark_all and hidden:
            return Verdict("pass", extra={"deviating": []})
        if cand.mark_all:
            start = max(core) if first_off is None else first_off
            off = [[i, Verdict("mismatch", max_abs=1.0).to_dict()] for i in cand.nodes if i >= start]
            return Verdict("mismatch", max_abs=1.0, extra={"deviating": off})
        return Verdict("mismatch", output=off_output(program, cand.nodes, max(core)), max_abs=1.0)

    return reduce_with(program, verdict, jobs=jobs, check_original=check_original, localize=localize,
                       generate_values=finishers, partitions=partitions)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_reducer_finds_exactly_the_core_for_any_jobs(program: Program, data):
    core = set(program.normalize(data.draw(st.sets(st.integers(0, len(program.nodes) - 1), min_size=1, max_size=4))))
    if not core:
        return
    kind = data.draw(st.sampled_from(["crash", "mismatch"]))
    # Localization is a guess: right, or naming any node at all, the result is the same.
    localize = data.draw(st.booleans())
    first_off = data.draw(st.one_of(st.none(), st.integers(0, len(program.nodes) - 1)))
    one = reduce_with_pure_oracle(program, core, jobs=1, kind=kind, localize=localize, first_off=first_off)
    assert set(one.current.nodes) == core
    many = reduce_with_pure_oracle(program, core, jobs=data.draw(st.integers(2, 6)), kind=kind,
                                   localize=localize, first_off=first_off)
    assert many.current == one.current
    assert many.counters.oracle_calls == one.counters.oracle_calls  # speculation is not charged
    assert many.counters.evaluations >= one.counters.evaluations
    assert len(set(many.evaluated)) == len(many.evaluated) == many.counters.evaluations  # each run once


def test_single_node_core_takes_few_calls(program: Program):
    problem = reduce_with_pure_oracle(program, {len(program.nodes) // 2}, jobs=1)
    assert len(problem.current.nodes) == 1
    assert problem.counters.oracle_calls <= 2 * len(program.nodes).bit_length() + 8


class Chain(torch.nn.Module):
    """64 call nodes in a row, and a max.dim whose (values, indices) tuple feeds two nodes."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for _ in range(31):
            x = torch.sin(x) * 1.01
        values, indices = torch.max(x, dim=1)
        return values + 1, indices * 2


@pytest.fixture(scope="module")
def chain() -> Program:
    x = torch.randn(4, 8)
    return cpu_program(Chain(), x)


def test_a_right_localization_replaces_the_binary_search_with_two_probes(chain: Program):
    assert len(chain.nodes) >= 64
    core = {30, 31}
    plain = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch")
    guided = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch", localize=True)
    assert set(guided.current.nodes) == set(plain.current.nodes) == core
    # one localization run and 2 prefix probes where a binary search takes log2(n) >= 6
    assert guided.counters.oracle_calls <= plain.counters.oracle_calls - 3
    assert str(chain.nodes[max(core)].name) in guided.notes["first_off_value"]
    assert guided.notes["localized_nodes"] == len(chain.nodes)
    # a wider core: localization runs again on the smaller program; the report says the first
    wide = reduce_with_pure_oracle(chain, set(range(20, 40)), jobs=1, kind="mismatch", localize=True)
    assert wide.notes["localized_nodes"] == len(chain.nodes), wide.notes


def test_a_large_program_is_localized_on_growing_prefixes(chain: Program, monkeypatch):
    """Prefixes of 4, then 16 nodes, then the whole (as 256, 1,024, ... on a program of
    1,024 nodes or more): a bug in the first 4 nodes costs one 4-node localization run, a
    bug at the end 2 small runs more than one whole run, and the result is the same."""
    from minimize.search import localize
    monkeypatch.setattr(localize, "PREFIXES_FROM", 32)
    monkeypatch.setattr(localize, "FIRST_PREFIX", 4)
    n = len(chain.nodes)
    assert localize.prefix_lengths(n) == [4, 16, n] and localize.prefix_lengths(31) == [31]
    marked = lambda p: [len(c.nodes) for c in p.evaluated if c.mark_all]  # noqa: E731
    early = reduce_with_pure_oracle(chain, {2, 3}, jobs=1, kind="mismatch", localize=True)
    assert set(early.current.nodes) == {2, 3}
    assert marked(early) == [4] and early.notes["localized_nodes"] == 4
    assert early.notes["localized_prefix_of"] == n and chain.nodes[3].name in early.notes["first_off_value"]
    late = reduce_with_pure_oracle(chain, {30, 31}, jobs=1, kind="mismatch", localize=True)
    assert set(late.current.nodes) == {30, 31} and marked(late) == [4, 16, n]
    assert "localized_prefix_of" not in late.notes


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_value_an_output_maps_each_leaf_to_its_node(chain: Program, data):
    """Localization reads the node of each flattened output: a tuple-valued node (max.dim
    without its getitems) gives two leaves, and every leaf is that node's eager value."""
    tuple_node = next(i for i, n in enumerate(chain.nodes) if "max" in str(n.target))
    kept = chain.normalize(data.draw(st.sets(st.integers(0, len(chain.nodes) - 1), min_size=1)) | {tuple_node})
    piece = chain.materialize(kept, mark_all=True)
    with torch.no_grad():
        leaves = flatten_outputs(piece.gm(*chain.inputs_for(piece)))
    nodes = chain.leaf_nodes(piece.output_names)
    assert len(leaves) == len(nodes)
    assert set(nodes) == set(kept) - {i for i in kept if not isinstance(chain.values[chain.nodes[i].name], torch.Tensor)
                                      and i not in chain.outputs_of(kept)}
    for leaf, i in zip(leaves, nodes):
        value = chain.values[chain.nodes[i].name]
        assert any(torch.equal(leaf, v) for v in (value if isinstance(value, tuple) else (value,)))


def test_a_localization_that_hides_the_bug_costs_one_call_and_says_so(chain: Program):
    core = {30, 31}
    plain = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch")
    hidden = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch", localize=True, hidden=True)
    assert hidden.current == plain.current
    assert hidden.counters.oracle_calls == plain.counters.oracle_calls + 1
    assert "bisected instead" in hidden.notes["localization"] and "first_off_value" not in hidden.notes
    assert hidden.notes["localization"].startswith("no value off in the")
    # that compile failing is no "no value off" (a quantized hunt's XNNPACK load failure)
    broken = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch", localize=True, hidden="crash")
    assert broken.current == plain.current
    assert broken.notes["localization"].startswith(f"the {len(chain.nodes)}-node program compiled with every value "
                                                   "an output failed (CRASH: RuntimeError: Failed to load method"), \
        broken.notes["localization"]


def test_a_guess_whose_cone_passes_falls_back_to_the_prefix_search(chain: Program):
    """Localization naming node 10, before the planted core {30, 31}: every suffix of 10's
    cone passes, the whole cone too, and the prefix search then finds the same core as
    a right guess, for 3 calls lost (suffixes [10], [9, 10], the whole cone) and the
    prefix search from there."""
    core = {30, 31}
    right = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch", localize=True)
    wrong = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch", localize=True, first_off=10)
    assert set(wrong.current.nodes) == set(right.current.nodes) == core
    probed = [c.nodes for c in wrong.evaluated if not c.mark_all]
    # after the original: node 10 alone, 9 and 10, then the whole cone, all passing
    assert probed[1:4] == [(10,), (9, 10), tuple(range(11))]
    assert wrong.counters.oracle_calls <= right.counters.oracle_calls + 14


def test_speculation_spans_passes(chain: Program):
    """With 4 workers, the round that tries the localized node's suffixes also tries
    the deletion delta debugging asks next of the expected window: two rounds in all
    (the original with the localization run, then everything else), where the
    sequential reduction makes 5 calls and per-pass speculation needed 3 rounds."""
    core = {30, 31}
    one = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch", localize=True)
    four = reduce_with_pure_oracle(chain, core, jobs=4, kind="mismatch", localize=True)
    assert set(one.current.nodes) == set(four.current.nodes) == core
    # original, localization, suffixes [31] and [30, 31] of 31's cone (no prefix confirmed first), then [30]
    assert one.counters.oracle_calls == four.counters.oracle_calls == 5
    assert one.counters.batches == 5
    assert four.counters.batches == 2
    assert four.counters.evaluations <= 2 * 4



@pytest.mark.parametrize("engines", [1, 2])
def test_the_localization_run_goes_beside_the_original_where_the_backend_reports_engines(chain: Program,
                                                                                          engines: int):
    """Torch-TensorRT reports its engines; before the original's verdict nobody has asked
    for them, and speculation stopped there: the localization run waited for a round of its
    own (9.8 of 38.9 s on the H200's video policy at --jobs 4). Hypothesized to be one
    engine, it goes beside the original; where there are two, the engines are tried first
    and the result is the same."""
    core = {30, 31}
    names = [n.name for n in chain.nodes]
    parts = lambda cand: [names[:len(names) // engines], names[len(names) // engines:]][:engines]  # noqa: E731
    one = reduce_with_pure_oracle(chain, core, jobs=1, kind="mismatch", localize=True, partitions=parts)
    four = reduce_with_pure_oracle(chain, core, jobs=4, kind="mismatch", localize=True, partitions=parts)
    assert set(one.current.nodes) == set(four.current.nodes) == core
    assert one.counters.oracle_calls == four.counters.oracle_calls
    assert four.evaluated[0] == four.start and four.evaluated[1].mark_all  # the first round: both
    assert four.counters.batches == (2 if engines == 1 else 3)


def test_speculation_ranks_candidates_without_the_localized_node_as_passing(chain: Program):
    """slow_oracle's shape: a 2-node window, then one deletion that keeps only the node
    before the localized one (its value was right: it rarely fails), then the finishers
    on the window. Taken as a coin flip, that deletion's "fails" branch took a worker from
    the finishers' path and cost a round: 3 rounds, where it was 4."""
    core = {30, 31}
    four = reduce_with_pure_oracle(chain, core, jobs=4, kind="mismatch", localize=True, finishers=True)
    assert set(four.current.nodes) == core and four.guessed_node == 31
    # original, localization, [31], [30, 31], [30], then values made at smaller sizes in one
    assert four.counters.oracle_calls == 6
    assert four.pass_stats["generate_small_values"].accepted == 1
    assert four.counters.batches == 3


def test_the_original_is_checked_once_however_often_speculation_replays_it(chain: Program):
    """Replays start from the original's verdict; only the real walk checks it (and says
    what --repeat measured)."""
    checked: list = []
    four = reduce_with_pure_oracle(chain, {30, 31}, jobs=4, kind="mismatch", localize=True,
                                   check_original=checked.append)
    assert four.counters.batches == 2 and len(checked) == 1 and checked[0] is four.first_verdict


def test_the_nodes_a_wide_window_needs_take_log_calls_each(program: Program):
    # A crash (nothing to localize from) that needs the window's two ends and one node in
    # its middle: keep_needed finds the middle one by prefix search, where delta debugging
    # spent about twice the window's length.
    n = len(program.nodes)
    core = set(program.normalize({n // 4, n // 2, 3 * n // 4}))
    problem = reduce_with_pure_oracle(program, core, jobs=1)
    assert set(problem.current.nodes) == core
    stats = problem.pass_stats
    assert stats["keep_needed"].accepted == 1 and stats["delete_chunks"].accepted == 0
    assert stats["keep_needed"].calls <= 2 * (n // 2).bit_length() + 4


def test_the_node_a_compilers_error_names_is_found_by_what_it_can_be_matched_on(program: Program):
    """The node a crash's message names (oracles/checks.py failing_node) is matched to ours:
    by the name in torch.fx's generated line where the stack ends there (a node without a
    source stack), by the source stack, or, with no stack at all, by a target only one node
    has. A stack that names none of ours is no guess: a decomposed op's target (rsqrt, from
    layer_norm's decomposition) would name an unrelated node."""
    from minimize.search.localize import named_failing_position
    problem = ReductionProblem(program, lambda cands: [], Rules(locate_from_errors=True))
    cand = problem.current.nodes
    names = [program.nodes[i].name for i in cand]

    def guess(target: str, stack: str) -> str | None:
        hint = {"name": "", "target": target, "stack": stack}
        problem.cache[problem.at(cand)] = [Verdict("crash", "E", "m", extra={"failing_node": hint})]
        pos = named_failing_position(problem, cand)
        return None if pos is None else names[pos]

    generated = 'File "<eval_with_key>.2", line 14, in forward\n    layer_norm = torch.ops.aten.layer_norm.default(add)'
    assert guess("aten.rsqrt.default", generated) == "layer_norm"
    source = program.nodes[cand[names.index("sin")]].meta["stack_trace"]
    assert guess("aten.sin.default", source) == "sin"
    # the same file in another folder: a journaled error, resumed on a re-export elsewhere
    moved = re.sub(r'File "[^"]*/', 'File "/elsewhere/checkout/', source)
    assert moved != source and guess("aten.sin.default", moved) == "sin"
    assert guess("aten.rsqrt.default", "") == "rsqrt"  # no stack: the only rsqrt
    targets = [str(program.nodes[i].target) for i in cand]
    shared = next(t for t in targets if targets.count(t) > 1)
    assert guess(shared, "") is None  # no stack, and two nodes have the target: no guess
    # a source line of several ops (h + sin(h) * 0.5): the one of the error's target
    on_line = [names[k] for k, i in enumerate(cand) if program.nodes[i].meta.get("stack_trace") == source]
    add = next(n for n in on_line if n.startswith("add"))
    assert on_line[0] != add and guess("aten.add.Tensor", source) == add
    assert guess("aten.rsqrt.default", 'File "lib.py", line 3, in f\n    return g(x)') is None
    problem.rules = Rules()  # without --localize: no guess
    assert guess("aten.sin.default", source) is None


class Blocks(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):  # each block's softmax is traced from this one line
            x = torch.softmax(x + 1, -1)
        return x


def test_of_nodes_of_one_source_line_the_guess_is_the_one_the_error_names():
    """A transformer's blocks share their source lines: an error naming the 32nd block's
    softmax (`softmax_31`: an interpreter over our graph names it as we do) started the
    search at the first block's, and the Diagnosis named that one (a hunt, 1,048 nodes)."""
    from minimize.search.localize import named_failing_position
    program = cpu_program(Blocks(), torch.randn(2, 4))
    softmaxes = [i for i, n in enumerate(program.nodes) if "softmax" in str(n.target)]
    assert len(softmaxes) == 3 and len({program.nodes[i].meta["stack_trace"] for i in softmaxes}) == 1
    problem = ReductionProblem(program, lambda cands: [], Rules(locate_from_errors=True))
    cand = problem.current.nodes
    for want in (softmaxes[2], softmaxes[1]):
        hint = {"name": program.nodes[want].name, "target": "aten.softmax.int",
                "stack": program.nodes[want].meta["stack_trace"]}
        problem.cache[problem.at(cand)] = [Verdict("crash", "E", "m", extra={"failing_node": hint})]
        assert cand[named_failing_position(problem, cand)] == want, hint["name"]
    hint["name"] = "softmax_default_7"  # a name of the compiler's own graph (Inductor's): the first, as before
    problem.cache[problem.at(cand)] = [Verdict("crash", "E", "m", extra={"failing_node": hint})]
    assert cand[named_failing_position(problem, cand)] == softmaxes[0]


# A compiler that exports the slice again and converts it node by node, as Torch-TensorRT
# does: its error says "While executing %sin ... Original traceback:" with the node's stack.
REEXPORTING_PLUGIN = '''
import torch


class _Converter(torch.fx.Interpreter):
    def call_function(self, target, args, kwargs):
        if target is torch.ops.aten.sin.default:
            raise ValueError("no converter for this sin")
        return super().call_function(target, args, kwargs)


def reexport_then_convert(gm, example_inputs):
    _Converter(torch.export.export(gm, tuple(example_inputs)).module()).run(*example_inputs)
'''


class TwoSines(torch.nn.Module):
    def forward(self, x):
        a = torch.sin(x) * 2
        return torch.sin(a + 1)


def test_a_worker_keeps_the_source_stacks_a_reexporting_compiler_names_its_node_by(tmp_path):
    """The workers' graph kept no node metadata: with torch 2.11 Torch-TensorRT's error on a
    worker's slice said "Original traceback: None", and of several nodes of one op trtmin
    could not tell which failed (the camera policy's crash: a div in each of three encoders,
    no guess, 10 calls of bisection); torch 2.13 shows the slice's generated line instead.
    With the source stack kept, the error shows the user's source line on both, and names
    the first sin, as the compiler met it."""
    from minimize.search.localize import named_failing_position
    from tests.helpers import worker_in_process
    x = torch.randn(4, 8)
    program = cpu_program(TwoSines(), x)
    sines = [i for i, n in enumerate(program.nodes) if "sin" in str(n.target)]
    assert len(sines) == 2
    run = worker_in_process(tmp_path, program, REEXPORTING_PLUGIN, "reexport_then_convert")
    verdict = Verdict.from_dict(run({"kept": list(program.all_kept()), "settings": {}}))
    assert verdict.kind == "crash" and "test_program.py" in verdict.extra["failing_node"]["stack"]
    problem = ReductionProblem(program, lambda cands: [], Rules(locate_from_errors=True))
    problem.cache[problem.current] = [verdict]
    assert problem.current.nodes[named_failing_position(problem, problem.current.nodes)] == sines[0]


def test_an_input_named_as_a_python_builtin_reaches_the_worker(tmp_path):
    """torch.export names an nn.Sequential's input `input`, which fx renames to `input_1` when
    a graph is rebuilt; the worker's copy refused that (AssertionError) before its first call,
    so no program of an nn.Sequential could be checked or reduced."""
    from tests.helpers import worker_in_process
    x = torch.randn(2, 4)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    exported = torch.export.export(model, (x,))
    assert "input" in [n.name for n in exported.graph.nodes]
    program = Program(prepare(exported, "cpu"), [x])
    run = worker_in_process(tmp_path, program, "def as_eager(gm, example_inputs):\n    return gm\n", "as_eager")
    assert Verdict.from_dict(run({"kept": list(program.all_kept()), "settings": {}})).kind == "pass"


def test_weights_keep_the_models_names_where_a_slice_can_hold_them():
    """A weight is read under the user's name for it (the state dict's `0.weight` as
    `0_weight`, which ExecuTorch's XNNPACK batch-norm fusion depends on), and keeps export's
    where that name is fx.GraphModule's own (`graph`: "cannot assign ... as buffer", and every
    candidate a crash) or a keyword (`lambda`)."""
    class Named(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.seq = torch.nn.Sequential(torch.nn.Linear(4, 4))
            for name in ("graph", "lambda", "scale"):
                self.register_buffer(name, torch.full((4,), 2.0))

        def forward(self, x):
            return self.seq(x) * self.graph + getattr(self, "lambda") - self.scale

    x = torch.randn(2, 4)
    model = Named().eval()
    program = cpu_program(model, x)
    piece = program.materialize(program.all_kept())
    attributes = sorted(piece.attributes.get(n, n) for n in piece.constant_names)
    assert attributes == ["b_graph", "b_lambda", "scale", "seq_0_bias", "seq_0_weight"], attributes
    assert torch.allclose(piece.gm(*program.inputs_for(piece))[0], model(x))


class ReturnsOutOfGraphOrder(torch.nn.Module):
    def forward(self, x, y):
        a = torch.sin(x)
        b = torch.exp(x * 2)
        return b, a, y.relu()  # exp comes after sin in the graph, first in what the model returns


def test_outputs_are_numbered_as_the_model_returns_them(tmp_path):
    from tests.conftest import plugin, save_program
    from tests.helpers import check_here
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    program = cpu_program(ReturnsOutOfGraphOrder(), x, y)
    targets = [str(program.nodes[i].target) for i in program.outputs_of(program.all_kept())]
    assert targets == ["aten.exp.default", "aten.sin.default", "aten.relu.default"]
    assert program.materialize(program.all_kept()).output_names == [program.nodes[i].name for i in
                                                                    program.outputs_of(program.all_kept())]
    # cut values a slice returns come after the model's own, in graph order
    no_exp = program.normalize(i for i, n in enumerate(program.nodes) if "exp" not in str(n.target))
    assert [str(program.nodes[i].target) for i in program.outputs_of(no_exp)] == [
        "aten.sin.default", "aten.relu.default", "aten.mul.Tensor"]
    model, inputs = save_program(ReturnsOutOfGraphOrder(), (x, y), tmp_path)
    r = check_here(str(model), "--inputs", str(inputs), "--backend", plugin("mismatch_mul_exp"))
    assert r.returncode == 1 and "MISMATCH: output 0 differs" in r.stdout, r.stdout + r.stderr[-2000:]


class DeadCausalMask(torch.nn.Module):
    """nn.TransformerEncoder's is_causal path leaves such a mask behind: triu of a full
    -inf, read by nothing but the assertion torch.export puts after its cast."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.triu(torch.full((4, 4), float("-inf")), 1).to(x.dtype)
        return torch.sin(x) + 1


def test_a_value_only_dead_code_reads_is_no_output(tmp_path):
    """The full was kept (it had a user, the dead triu) and returned as "output 1" of a
    model of one output, whose -inf values `check` then noted as the program's own. Dead
    code is left out, said once; a journal of the trtmin that kept it is not resumed: its
    candidates number the nodes otherwise (a resume reduced to the wrong op, a review)."""
    from tests.conftest import plugin, save_program
    from tests.helpers import check_here
    x = torch.randn(4, 4)
    program = cpu_program(DeadCausalMask(), x)
    assert [str(n.target) for n in program.nodes] == ["aten.sin.default", "aten.add.Tensor"]
    assert program.dead_values_cut == 2  # the full and the triu were read: kept before
    model, inputs = save_program(DeadCausalMask(), (x,), tmp_path)
    r = check_here(str(model), "--inputs", str(inputs), "--backend", "onnxruntime")
    assert r.returncode == 0 and "output 1" not in r.stdout + r.stderr, r.stdout + r.stderr[-2000:]
    assert "note: 3 call nodes compute values nothing returns (aten.full.default, aten.to.dtype, " \
           "aten.triu.default): trtmin leaves them out" in r.stderr, r.stderr
    out = tmp_path / "out"
    args = (str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_sin"),
            "--out", str(out), "--no-verify")
    assert reduce_here(*args).returncode == 0
    assert "note: 3 call nodes compute" not in (out / "report.md").read_text()  # said of the run, not the result
    (out / "summary.json").unlink()  # as if stopped before its end
    journal = out / "journal.jsonl"
    first, rest = journal.read_text().split("\n", 1)
    header = json.loads(first)
    assert header["header"]["dead_values_cut"] == 2
    del header["header"]["dead_values_cut"]  # a journal of the trtmin before
    journal.write_text(json.dumps(header) + "\n" + rest)
    r = reduce_here(*args, "--resume")
    assert r.returncode == 2 and "was made by an older trtmin, which kept the values only dead code reads (this one " \
        "leaves out 2 of them" in r.stderr, r.stderr[-2000:]


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_the_result_is_proven_one_minimal_from_the_cache(program: Program, data):
    """After the tiers, every one-node cut of the result is tried: none fails, so no node
    can go, and delete_chunks' last round had asked them all, so the proof costs no call."""
    n = len(program.nodes)
    core = set(data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=3)))
    problem = reduce_with_pure_oracle(program, core, jobs=1)
    minimal = problem.notes["one_minimal"]
    found = problem.current.nodes
    assert minimal["proven"] and minimal["cuts_tried"] == sum(
        1 for i in range(len(found)) if program.normalize(found[:i] + found[i + 1:]) not in ((), found))
    assert problem.pass_stats["prove_one_minimal"].calls == 0


def test_a_window_whose_every_node_is_needed_costs_one_call_a_node(chain: Program):
    """The real Torch-TensorRT RoPE window: all 20 of its nodes needed, where keep_needed
    galloped about 2*log2(n) calls for each (72) and delete_chunks then asked 10 chunks.
    Once a needed node sits next to the kept ones, its neighbour's cut is asked first (1
    call), and delete_chunks asks only the one-node cuts, all cached but the last node's."""
    core = set(range(20, 40))
    problem = reduce_with_pure_oracle(chain, core, jobs=1)
    assert set(problem.current.nodes) == core
    stats = problem.pass_stats
    assert stats["keep_needed"].accepted == 0 and stats["delete_chunks"].accepted == 0
    assert stats["keep_needed"].calls <= len(core) + 2 * len(core).bit_length()
    assert stats["delete_chunks"].calls <= 1


class MaxAndIndex(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        v, i = (x * 2).max(dim=-1)
        return v + 1, i


def test_an_op_of_several_values_left_without_its_getitems_returns_each(tmp_path):
    """max.dim kept, its getitems cut (a candidate of the op alone): the slice returned the
    tuple as one nested output. repro.py's eager half then had 1 output to the compiler's 2
    and said REPRODUCED for that, whatever the compiler computed, and its eager control
    failed in the comparison. The slice returns each value, by getitem, flat."""
    from oracles.backends import BUILTIN
    from oracles.verdict import Verdict
    from tests.helpers import run_repro, write_repro

    x = torch.tensor([[1.0, float("nan"), 2.0], [0.0, 3.0, 1.0]])
    program = cpu_program(MaxAndIndex(), x)
    [kept] = [i for i, n in enumerate(program.nodes) if n.target is torch.ops.aten.max.dim]
    piece = program.materialize((kept,))
    out = piece.gm(*program.inputs_for(piece))
    assert isinstance(out, tuple) and len(out) == 2 and all(isinstance(o, torch.Tensor) for o in out), out
    assert all(torch.allclose(a.double(), b.double(), equal_nan=True)
               for a, b in zip(out, flatten_outputs(program.values[program.nodes[kept].name])))
    write_repro(tmp_path, piece.gm, dict(zip(piece.input_names, program.inputs_for(piece))), {},
                Verdict("mismatch", output=0, max_abs=1.0), BUILTIN["inductor"]("inductor", {}))
    r = run_repro(tmp_path, backend="eager")
    assert (r.returncode, r.stdout.strip()) == (0, "FIXED: the backend matches eager PyTorch"), r.stdout + r.stderr


class MedianValues(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).median(-1).values


def test_an_op_of_several_values_returns_only_those_the_program_reads():
    """median.dim kept, its getitem cut: the slice returned its indices too, which the
    program never reads, so a one-op repro had 3 call nodes ("2 -> 3 call nodes", a
    TensorRT user's hunt) and an unused value compared with eager's."""
    x = torch.randn(2, 8)
    program = cpu_program(MedianValues(), x)
    [kept] = [i for i, n in enumerate(program.nodes) if n.target is torch.ops.aten.median.dim]
    piece = program.materialize((kept,))
    out = piece.gm(*program.inputs_for(piece))
    assert len(out) == 1 and torch.equal(out[0], x.relu().median(-1).values), out
    assert piece.call_nodes == program.call_nodes_of((kept,)) == 2
    # and each output is read back to its node, where localization and the symptom's cone look
    assert program.leaf_nodes(piece.output_names) == [kept]
    both = program.normalize((kept, program.index["relu"]))
    mark_all = program.materialize(both, mark_all=True)
    assert len(mark_all.gm(*program.inputs_for(mark_all))) == len(program.leaf_nodes(mark_all.output_names))


def test_invalid_candidates_are_counted_among_the_calls_at_any_jobs(program: Program):
    """summary.json's invalid_candidates counted every candidate evaluated, speculation's
    too, so it grew with --jobs (the review); it counts the oracle calls that were invalid,
    the same at any N."""
    from tests.helpers import reduce_with

    core = {2, len(program.nodes) - 3}

    def verdict(cand: Candidate) -> Verdict:
        if not core <= set(cand.nodes):  # a cut that misses the core: unjudgeable where it keeps an odd count
            return Verdict("invalid", "RuntimeError", "shapes cannot be multiplied") if len(cand.nodes) % 2 else \
                Verdict("pass")
        return Verdict("crash", "E", "planted")

    one, many = (reduce_with(program, verdict, jobs=jobs) for jobs in (1, 4))
    assert many.current == one.current and many.counters.oracle_calls == one.counters.oracle_calls
    assert one.counters.invalid > 0 and many.counters.invalid == one.counters.invalid, \
        (one.counters.invalid, many.counters.invalid, many.counters.evaluations)
    assert one.counters.invalid == sum(verdict(c).kind == "invalid" for c in set(one.evaluated))  # not the crashes


class _Block(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2 + 1


class FourBlocks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(_Block() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def test_whole_blocks_the_bug_does_not_need_go_in_one_step_each():
    """minimize/search/passes/module_blocks.py: a bug that needs a node of block 1 and one of
    block 3 keeps those two blocks whole, and blocks 0 and 2 go, in one accepted step each."""
    from minimize.search.passes.module_blocks import delete_module_blocks
    x = torch.randn(4, 8)
    program = cpu_program(FourBlocks(), x)
    block = {i: program.module_path(i)[0] for i in range(len(program.nodes)) if program.module_path(i)}
    assert sorted(set(block.values())) == [f"blocks.{k}" for k in range(4)], block
    sin = {block[i]: i for i in block if "sin" in str(program.nodes[i].target)}
    core = {sin["blocks.1"], sin["blocks.3"]}
    problem = ReductionProblem(program, lambda cands: [Verdict("crash", "E", "bug") if core <= set(c.nodes)
                                                       else Verdict("pass") for c in cands])
    problem.establish_original()
    delete_module_blocks(problem)
    assert {block[i] for i in problem.current.nodes} == {"blocks.1", "blocks.3"}, problem.current.nodes
    assert problem.counters.accepted == 2


def test_a_models_own_input_is_fed_with_the_strides_the_user_gave_it(tmp_path):
    """Only cut values are fed row-major: the model's own input keeps the layout the user
    passed (a transposed tensor stays transposed), since a bug may need those strides; and
    repro.py feeds it so. Its 12 values had gone inline, as a row-major literal: a
    channels_last input's bug, reduced, said FIXED alone."""
    import runpy

    from oracles.backends import BUILTIN
    from oracles.verdict import Verdict
    from tests.helpers import write_repro

    class Tanh(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x) * 2

    x = torch.randn(3, 4).t()
    prog = cpu_program(Tanh(), x)
    piece = prog.materialize(prog.all_kept())
    fed = dict(zip(piece.input_names, prog.inputs_for(piece)))
    assert list(fed) == ["x"] and not fed["x"].is_contiguous() and fed["x"].stride() == x.stride()
    script = write_repro(tmp_path, piece.gm, fed, {}, Verdict("mismatch", output=0, max_abs=1.0),
                         BUILTIN["inductor"]("inductor", {}))
    [made] = runpy.run_path(str(tmp_path / "repro.py"))["make_inputs"]()
    assert made.stride() == x.stride() and torch.equal(made, x), made.stride()
    assert "# x (strides (1, 4): the layout it was given)" in script, script
    every_other = torch.randn(4, 8)[:, ::2]  # not dense: a copy would be row-major
    prog = cpu_program(Tanh(), every_other)
    piece = prog.materialize(prog.all_kept())
    write_repro(tmp_path, piece.gm, dict(zip(piece.input_names, prog.inputs_for(piece))), {},
                Verdict("mismatch", output=0, max_abs=1.0), BUILTIN["inductor"]("inductor", {}))
    [made] = runpy.run_path(str(tmp_path / "repro.py"))["make_inputs"]()
    assert made.stride() == (8, 2) and torch.equal(made, every_other), made.stride()


class FirstColumnOfNonzero(torch.nn.Module):
    def forward(self, mask: torch.Tensor) -> torch.Tensor:
        return mask.nonzero()[:, 0] + 1


def test_a_cut_value_is_fed_with_the_strides_a_new_tensor_has():
    """nonzero's (3, 1) value has strides (1, 3), which is_contiguous() accepts: fed as it
    was to a cut that keeps its select, ExecuTorch failed on the dim order they spell
    ("input tensors have different dim orders"), a crash of the cut alone that repro.py,
    which writes the value as a new tensor, then could not show (FIXED alone). Fed as a
    new tensor is made, the cut runs, and the reduction keeps nonzero, the real bug's op."""
    prog = cpu_program(FirstColumnOfNonzero(), torch.tensor([True, False, True, True]))
    [nonzero] = [n.name for n in prog.nodes if n.target is torch.ops.aten.nonzero.default]
    assert prog.values[nonzero].stride() == (1, 3) and prog.values[nonzero].is_contiguous()  # eager's
    piece = prog.materialize(tuple(i for i, n in enumerate(prog.nodes) if n.name != nonzero))
    fed = dict(zip(piece.input_names, prog.inputs_for(piece)))
    assert fed[nonzero].stride() == (1, 1) and torch.equal(fed[nonzero], prog.values[nonzero])
    assert prog.values_as_fed(piece)[nonzero].stride() == (1, 1)  # what repro.py is written with


class ReturnsAValueItAlsoReads(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.sin(x)
        return h, torch.exp(h)


def test_a_model_output_that_a_kept_node_reads_is_still_an_output():
    """A candidate returns the model's own outputs it keeps, not only its sinks: sin is
    read by exp, and is still output 0 (a bug in it shows there)."""
    x = torch.randn(4, 8)
    prog = cpu_program(ReturnsAValueItAlsoReads(), x)
    targets = [str(prog.nodes[i].target) for i in prog.outputs_of(prog.all_kept())]
    assert targets == ["aten.sin.default", "aten.exp.default"]


class MaxOfDim(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values, indices = x.max(dim=1)
        return torch.exp(values) + indices


def test_a_getitem_is_cut_with_the_op_whose_value_it_reads():
    """The canonical form drops a getitem whose op is cut: the two are one candidate (one
    cache entry), and no slice reads an item out of a fed-in tuple."""
    x = torch.randn(4, 8)
    prog = cpu_program(MaxOfDim(), x)
    maximum = next(i for i, n in enumerate(prog.nodes) if "max" in str(n.target))
    items = [i for i, n in enumerate(prog.nodes) if "getitem" in str(n.target)]
    assert items
    rest = prog.normalize(i for i in prog.all_kept() if i != maximum)
    assert not set(items) & set(rest) and rest
    assert prog.normalize(prog.all_kept()) == prog.all_kept()


def test_two_weights_whose_names_read_the_same_keep_exports_names():
    """`a.b` and `a_b` both read `a_b` with dots as underscores: each keeps export's own
    name, as one attribute would hold only one of the two weights (and the slice would
    compute another value than eager's)."""
    class Inner(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.b = torch.nn.Parameter(torch.full((4,), 3.0))

    class Clash(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = Inner()
            self.a_b = torch.nn.Parameter(torch.full((4,), 5.0))

        def forward(self, x):
            return x * self.a.b + self.a_b

    x = torch.randn(2, 4)
    model = Clash().eval()
    program = cpu_program(model, x)
    piece = program.materialize(program.all_kept())
    attributes = [piece.attributes.get(n, n) for n in piece.constant_names]
    assert len(set(attributes)) == 2 and "a_b" not in attributes, attributes
    assert torch.allclose(piece.gm(*program.inputs_for(piece))[0], model(x))


def test_two_workers_speculate_too(chain: Program):
    """--jobs 2 evaluates a speculative run beside each needed one: fewer rounds than
    --jobs 1 for the same calls and the same result."""
    core = {5, 20, 31}
    one, two = (reduce_with_pure_oracle(chain, core, jobs=jobs) for jobs in (1, 2))
    assert one.current == two.current and one.counters.oracle_calls == two.counters.oracle_calls
    assert two.counters.batches < one.counters.batches
    assert two.counters.evaluations <= 2 * two.counters.batches  # no round asks more runs than workers


def test_the_per_pass_rows_add_up_to_the_reduction(chain: Program):
    """The report's per-pass table: its calls add up to the oracle calls the report states,
    its steps to those accepted and its removed nodes to what the reduction cut."""
    problem = reduce_with_pure_oracle(chain, {30, 31}, jobs=1, kind="mismatch", localize=True)
    rows = problem.pass_stats.values()
    assert sum(r.calls for r in rows) == problem.counters.oracle_calls
    assert sum(r.accepted for r in rows) == problem.counters.accepted > 0
    assert sum(r.removed for r in rows) == len(problem.start.nodes) - len(problem.current.nodes) > 0


def test_a_mismatch_names_the_node_of_the_output_it_is_on():
    """A mismatch on output 1 of (exp, sin, relu) is sin's: where a reduction looks for
    the bug's node (failing_sink), not the last output's."""
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    program = cpu_program(ReturnsOutOfGraphOrder(), x, y)
    for output, op in enumerate(("exp", "sin", "relu")):
        problem = ReductionProblem(program, lambda cands: [Verdict("mismatch", output=output, max_abs=1.0)
                                                           for _ in cands])
        problem.runs(problem.current)
        assert op in str(program.nodes[problem.failing_sink(problem.current)].target)


class ReluPermute(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).permute(1, 0)


def test_the_reports_static_sizes_note_names_the_cut_values_a_result_reads():
    """A result fed a cut value of a dynamic dim (relu's) is still compiled with static
    sizes: report.md kept the note only for the program's inputs, and dropped it for the
    usual result, which reads cut values (a review)."""
    import types

    from minimize.run.session import Session
    x = torch.randn(4, 3)
    ep = torch.export.export(ReluPermute(), (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=2, max=16)}})
    program = Program(prepare(ep, "cpu"), [x])
    static_backend = types.SimpleNamespace(keeps_dynamic=False)  # TensorRT's: no optimization profile
    session = types.SimpleNamespace(backend=static_backend, program=program, in_place=[],
                                    opts=types.SimpleNamespace(backend="tensorrt"))
    session._static_note = lambda among=None: Session._static_note(session, among)
    notes = {"static": Session._static_note(session), "dead": "..."}
    permute_alone = program.materialize([i for i, n in enumerate(program.nodes) if "permute" in str(n.target)])
    assert permute_alone.input_names == ["relu"]
    assert Session.notes_on(session, notes, permute_alone) == {"static": (
        "the program was exported with dynamic sizes (relu dim 0); backend tensorrt builds each candidate with the "
        "inputs' own sizes, so a bug that needs them dynamic does not show here")}


class ScaledToInt8(torch.nn.Module):
    """A policy's action head quantized by hand: scaled past int8's range, then cast."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.tanh(x) * 200).to(torch.int8) + 1


def test_a_float_cast_out_of_the_integer_range_is_said_to_be_undefined(tmp_path) -> None:
    """Eager wraps an int8 cast of 180 to -76; real Inductor's vectorized kernel saturates it
    to 127. C++ leaves that cast undefined, so the mismatch may be no bug (a maintainer's
    hunt: titled Inductor's, no caveat): said at the end of the run, atop report.md and in its
    diagnosis. A cast in range (or from an integer) says nothing."""
    from minimize.program.casts import out_of_range_casts
    from tests.conftest import save_program

    x = torch.linspace(-2, 2, 16)
    [cast] = out_of_range_casts(torch.export.export(ScaledToInt8(), (x,)).module(), [x])
    assert (cast.source, cast.target, cast.nan) == (torch.float32, torch.int8, False) and cast.high > 127
    assert out_of_range_casts(torch.export.export(ScaledToInt8(), (x / 100,)).module(), [x / 100]) == []
    model, inputs = save_program(ScaledToInt8(), (x,), tmp_path)
    out = tmp_path / "out"
    r = reduce_here(str(model), "--inputs", str(inputs), "--out", str(out), "--no-verify")  # inductor, mismatch
    assert r.returncode == 0, r.stderr[-2000:]
    said = " ".join(r.stdout.split() + r.stderr.split())
    assert "but: `" in said and "to int8, whose range is [-128, 127]: C++ leaves a cast out of range undefined" in said
    report = (out / "report.md").read_text()
    assert report.index("**Before filing:** `") < report.index("```python") and "- Undefined cast: `" in report
