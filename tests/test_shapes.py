"""Smaller shapes (minimize/search/passes/shapes.py): the sizes of generated tensors that the bug
does not need shrink to 2, one size everywhere at once, and shapes the graph fixes are
never sent to the oracle."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.fx as fx

from minimize.program.candidate import Candidate, make
from minimize.search.passes.values import expression, reshaped
from minimize.search.problem import ReductionProblem
from minimize.program.model import Program, size_arguments
from oracles.verdict import Verdict
from tests.conftest import plugin, save_program
from tests.helpers import reduce_with, run_cli, run_repro


@pytest.mark.parametrize("value", [
    torch.randn(6, 7) * 3 + 1,                                        # randn
    torch.full((6, 7), 2.5),                                          # full
    torch.rand(6, 7, generator=torch.Generator().manual_seed(0)) < 0.3,  # rand < p
    torch.randint(6, 8, (6, 7)),                                      # randint, bounds like the shape
    torch.randn(6, 7, dtype=torch.complex64),                         # complex
    torch.randn(42),                                                  # one dimension
])
def test_every_expression_form_changes_its_shape_only(value: torch.Tensor) -> None:
    expr = expression(value, seed=3)
    assert expr is not None
    old, new = tuple(value.shape), (2,) * value.dim()
    made = make(reshaped(expr, old, new))
    assert made.shape == new and made.dtype == value.dtype
    assert reshaped(expr, old, new).replace(repr(new), repr(old), 1) == expr  # nothing else changed


class _Attention(torch.nn.Module):
    """q @ k^T, softmax, @ v: the sizes 12 (queries), 10 (keys) and 6 (head) are shared
    across the inputs, as in a real attention."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(0, 1), dim=-1) @ v


class _Normed(torch.nn.Module):
    """layer_norm holds its last size in the graph, as normalized_shape."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (32,)).exp()


class _Viewed(torch.nn.Module):
    """arange's end is a number of the graph this pass leaves alone: 120 stays."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x * torch.arange(120, device=x.device))


def _reduce(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], needs: set[int], jobs: int = 1,
            on: bool = True) -> tuple[ReductionProblem, list[dict[str, str]]]:
    """A planted bug that needs the whole graph and every size in `needs` where it was, and
    fails the same way at any other size; also returns the generated texts it was asked about."""
    program = Program(torch.export.export(module, inputs), inputs)
    whole = set(program.all_kept())
    asked: list[dict[str, str]] = []

    def verdict(cand: Candidate) -> Verdict:
        generated = dict(cand.made)
        asked.append(generated)
        in_graph = {x for n in program.materialize(cand.nodes, sizes=dict(cand.sizes or ())).gm.graph.nodes
                    for _, value in size_arguments(n) for x in value}
        sizes = {d for e in generated.values() for d in make(e).shape} | in_graph
        if not whole <= set(cand.nodes) or not all(d in sizes for d in needs if generated):
            return Verdict("pass")
        return Verdict("crash", "E", "planted")

    return reduce_with(program, verdict, jobs=jobs, generate_values=on), asked


def _attention_inputs() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(12, 6, generator=g), torch.randn(10, 6, generator=g), torch.randn(10, 6, generator=g)


def _shapes(problem: ReductionProblem) -> dict[str, tuple[int, ...]]:
    return {n: tuple(make(e).shape) for n, e in dict(problem.current.made).items()}


def _sizes(problem: ReductionProblem) -> dict[int, int]:
    return dict(problem.current.sizes or ())


def _size_calls(problem: ReductionProblem) -> int:
    """The calls spent on smaller shapes: generate_small_values' one try (every size shrunk,
    with the values made) and shrink_shapes' (whose own first try is that run)."""
    return problem.pass_stats["generate_small_values"].calls + problem.pass_stats["shrink_shapes"].calls


def test_sizes_the_bug_does_not_need_shrink_all_at_once() -> None:
    problem, _ = _reduce(_Attention(), _attention_inputs(), needs=set())
    assert _shapes(problem) == {"q": (2, 2), "k": (2, 2), "v": (2, 2)}
    # made values and smaller shapes in one call, where they were two dependent ones
    stats = problem.pass_stats
    assert (stats["generate_small_values"].calls, stats["generate_values"].calls, stats["shrink_shapes"].calls) == (1, 0, 0)


def test_a_size_the_bug_needs_stays_and_the_others_shrink_one_at_a_time() -> None:
    problem, _ = _reduce(_Attention(), _attention_inputs(), needs={10})
    assert _shapes(problem) == {"q": (2, 2), "k": (10, 2), "v": (10, 2)}  # the keys' 10 is the bug's
    assert _size_calls(problem) == 4  # all at once, then 12, 10 and 6 alone
    # all at once was generate_small_values' try: the values made at full size, then shrink_shapes
    # asks it again (answered, not charged) before the three alone
    stats = problem.pass_stats
    assert (stats["generate_small_values"].calls, stats["generate_values"].calls, stats["shrink_shapes"].calls) == (1, 1, 3)
    assert _reduce(_Attention(), _attention_inputs(), needs={10}, jobs=4)[0].current == problem.current


class _Conv(torch.nn.Module):
    """A 96x96 frame under a 5x5 kernel: 96 to 2 alone leaves the kernel larger than the
    frame, and fits only with 5 to 2 as well."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x))


def test_sizes_that_fit_only_together_shrink_together() -> None:
    """A new user's frame stayed (2, 2, 96, 96): each size was tried alone on fake tensors
    first, and 96 alone does not fit under the 5x5 kernel, so it never joined the try of all
    at once, where it fits."""
    problem, _ = _reduce(_Conv().eval(), (torch.randn(1, 3, 96, 96),), needs=set())
    assert _shapes(problem)["x"] == (1, 2, 2, 2), _shapes(problem)
    assert _size_calls(problem) == 1
    # where the bug needs a size (the kernel's 5), the turns one at a time go to those that fit
    # alone (5, the 4 channels out, the 3 in), none to the 96 that cannot
    problem, _ = _reduce(_Conv().eval(), (torch.randn(1, 3, 96, 96),), needs={5})
    assert _shapes(problem)["x"] == (1, 2, 96, 96) and _size_calls(problem) == 4, (_shapes(problem), _size_calls(problem))


class _ConvNormed(torch.nn.Module):
    """16 channels: the batch norm's means, variances, weight and bias (16 values each) and
    the conv's bias are written as literals, never made."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.norm = torch.nn.Conv2d(3, 16, 3), torch.nn.BatchNorm2d(16)
        self.norm.running_mean.uniform_(-1, 1)  # values worth keeping: the literal's first ones stay

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.norm(self.conv(x)))


def test_a_size_held_by_small_literal_tensors_shrinks_them_to_their_first_values() -> None:
    """A 16-channel conv and batch norm stayed at 16 channels (its 16-value tensors held the
    size; 17 shrank to 2): they now shrink as literals of their first values."""
    module = _ConvNormed().eval()
    problem, _ = _reduce(module, (torch.randn(1, 3, 10, 10),), needs=set())
    shapes = _shapes(problem)
    assert all(16 not in shape for shape in shapes.values()), shapes
    mean = next(e for n, e in dict(problem.current.made).items() if "running_mean" in n)
    assert make(mean).tolist() == module.norm.running_mean[:2].tolist() and "randn" not in mean, mean
    # a size the bug needs stays in the literals too
    problem, _ = _reduce(module, (torch.randn(1, 3, 10, 10),), needs={16})
    assert any(16 in shape for shape in _shapes(problem).values()), _shapes(problem)


def test_only_finite_small_tensors_shrink_as_literals() -> None:
    """A literal's inf or NaN (a mask's -inf) has no name in a made value's expression, and
    may be the bug's: such a tensor holds its sizes, as any tensor the script does not make."""
    from minimize.search.passes.shapes import sliceable

    assert sliceable(torch.ones(4)) and sliceable(torch.arange(3)) and sliceable(torch.ones(2, 8, dtype=torch.bfloat16))
    assert not sliceable(torch.tensor([0.0, float("-inf")])) and not sliceable(torch.tensor([float("nan"), 1.0]))
    assert not sliceable(torch.ones(17)) and not sliceable(torch.tensor(1.0)) and not sliceable(torch.ones(2) + 0j)


class _ConvBeside(torch.nn.Module):
    """_Conv's frame, beside a tensor of four sizes of its own, each of which fits alone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 5)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x)).sum() + torch.cos(y).sum()


def test_a_size_that_fits_only_with_others_takes_no_turn_of_its_own() -> None:
    """The turns one at a time are few (ONE_AT_A_TIME): the frame's 96, which fits only with
    the kernel's 5 shrunk too, must not take one of them from the sizes that fit alone."""
    inputs = (torch.randn(1, 3, 96, 96), torch.randn(11, 9, 7, 6))
    problem, _ = _reduce(_ConvBeside().eval(), inputs, needs={5})
    assert _shapes(problem)["y"] == (2, 2, 2, 2), _shapes(problem)  # 11, 9, 7 and 6: the four turns
    assert _shapes(problem)["x"] == (1, 3, 96, 96), _shapes(problem)


def test_a_size_in_the_graphs_size_arguments_shrinks_with_the_tensors() -> None:
    problem, _ = _reduce(_Normed(), (torch.randn(6, 32),), needs=set())
    assert _shapes(problem) == {"x": (2, 2)} and _sizes(problem) == {32: 2}
    assert _size_calls(problem) == 1
    piece = problem.program.materialize(problem.current.nodes, sizes=_sizes(problem))
    norm = next(n for n in piece.gm.graph.nodes if "layer_norm" in str(n.target))
    assert list(norm.args[1]) == [2]
    assert [list(v) for _, v in size_arguments(problem.program.nodes[problem.current.nodes[0]])] == [[32]]  # untouched


def test_positions_are_not_sizes() -> None:
    """permute's dims and sum's dim are int lists too, but positions: never rewritten."""
    class Permuted(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.permute(3, 0, 2, 1).sum([3]).reshape(5, 3, 6)

    program = Program(torch.export.export(Permuted(), (torch.randn(3, 4, 5, 6),)), (torch.randn(3, 4, 5, 6),))
    held = {str(n.target): [list(v) for _, v in size_arguments(n)] for n in program.nodes}
    assert held == {"aten.permute.default": [], "aten.sum.dim_IntList": [], "aten.reshape.default": [[5, 3, 6]]}, held


class _Heads(torch.nn.Module):
    """Attention's split into heads: (2, 12, 48) viewed as (2, 12, 6, 8), 48 = 6 * 8."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x.view(2, 12, 6, 8).transpose(1, 2), dim=-1)


def test_a_size_that_is_a_product_of_others_shrinks_with_them() -> None:
    problem, _ = _reduce(_Heads(), (torch.randn(2, 12, 48),), needs=set())
    assert _shapes(problem) == {"x": (2, 2, 4)}  # 48 = 6 * 8 -> 2 * 2
    assert _sizes(problem) == {6: 2, 8: 2, 12: 2}
    assert _size_calls(problem) == 1
    needs_8, _ = _reduce(_Heads(), (torch.randn(2, 12, 48),), needs={8})  # a head size the bug needs
    assert _shapes(needs_8) == {"x": (2, 2, 16)} and _sizes(needs_8) == {6: 2, 12: 2}


class _SquareHeads(torch.nn.Module):
    """64 = 8 * 8: a size that is a square of another."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x.view(2, 12, 8, 8).transpose(1, 2), dim=-1)


def test_a_size_that_is_the_square_of_another_shrinks_with_it() -> None:
    problem, _ = _reduce(_SquareHeads(), (torch.randn(2, 12, 64),), needs=set())
    assert _shapes(problem) == {"x": (2, 2, 4)} and _sizes(problem) == {8: 2, 12: 2}  # 64 = 8 * 8 -> 2 * 2


class _TwoViews(torch.nn.Module):
    """48 = 6 * 8 and 30 = 6 * 5: a shrunk 6 takes both products with it."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.view(2, 6, 8).sum() + y.view(2, 6, 5).sum()


def test_two_products_of_one_size_follow_it_together() -> None:
    problem, _ = _reduce(_TwoViews(), (torch.randn(2, 48), torch.randn(2, 30)), needs=set())
    assert _shapes(problem) == {"x": (2, 4), "y": (2, 4)}
    assert _size_calls(problem) == 1


def test_a_size_the_graph_fixes_costs_no_oracle_call() -> None:
    problem, asked = _reduce(_Viewed(), (torch.randn(120),), needs=set())
    assert _shapes(problem) == {"x": (120,)}  # x * arange(120) needs 120 elements
    assert _size_calls(problem) == 0
    assert all(make(e).shape == (120,) for g in asked for e in g.values())


class _Masked(torch.nn.Module):
    """x[x > 0]: an output size that depends on the data, which fake tensors cannot know."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x[x > 0]).sum() + torch.relu(x)


def test_a_data_dependent_size_does_not_stop_the_fake_run() -> None:
    problem, _ = _reduce(_Masked(), (torch.randn(6, 8),), needs=set())
    assert _shapes(problem) == {"x": (2, 2)} and _size_calls(problem) == 1


class _ViewedAndOther(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.exp(x * torch.arange(120, device=x.device)).sum() + torch.tanh(w)


def test_a_size_the_graph_fixes_does_not_keep_the_others() -> None:
    """x's 120 cannot shrink (arange(120)): all of w's sizes still do, at once, where 120
    failed "all at once" for them and took a turn of the four."""
    problem, _ = _reduce(_ViewedAndOther(), (torch.randn(120), torch.randn(6, 7)), needs=set())
    assert _shapes(problem) == {"x": (120,), "w": (2, 2)}
    assert _size_calls(problem) == 1


class _Lookup(torch.nn.Module):
    """An embedding: ids below 50 index a table of 50 rows."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(50, 16))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, self.table).tanh()


def _eager_reduce(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                  fails: Callable[[fx.GraphModule, list[torch.Tensor]], bool]) -> ReductionProblem:
    """The pass with an oracle that runs the candidate in eager PyTorch, as a worker does
    first (an invalid candidate where it raises), and fails it where `fails` says."""
    program = Program(torch.export.export(module, inputs), inputs)

    def verdict(cand: Candidate) -> Verdict:
        made = {n: make(e) for n, e in cand.made}
        piece = program.materialize(cand.nodes, replaced=made, sizes=dict(cand.sizes or ()))
        args = program.inputs_for(piece, made)
        try:
            piece.gm(*args)
        except Exception as e:  # noqa: BLE001
            return Verdict("invalid", type(e).__name__, str(e))
        return Verdict("crash", "E", "planted") if fails(piece.gm, args) else Verdict("pass")

    return reduce_with(program, verdict, generate_values=True)


def _whole_lookup(gm: fx.GraphModule, args: list[torch.Tensor]) -> bool:
    return sum(n.op == "call_function" for n in gm.graph.nodes) == 2


@pytest.mark.parametrize("low,dtype", [(0, torch.int64), (3, torch.int64), (3, torch.int32)])
def test_made_indices_stay_inside_the_table_they_index(low: int, dtype: torch.dtype) -> None:
    """Ids left below 50 in a table shrunk to 2 rows would be refused (an invalid candidate):
    they go below 2 with it, from 0 where they started at 2 or more; int32 ids (which
    embedding takes too) as int64 ones."""
    torch.manual_seed(0)
    ids = torch.randint(low, 50, (4, 6), dtype=dtype)
    ids[0, 0] = low
    problem = _eager_reduce(_Lookup(), (ids,), _whole_lookup)
    made = dict(problem.current.made)
    assert _shapes(problem) == {"p_table": (2, 2), "ids": (2, 2)}, made
    assert made["ids"].startswith("torch.randint(0, 2, (2, 2), generator=") and int(make(made["ids"]).max()) < 2
    assert _size_calls(problem) == 1 and problem.counters.invalid == 0


class _Counts(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x).sum() + n.float().mean()


def test_integers_no_indexing_op_reads_keep_their_range() -> None:
    """n (counts up to 86) is data, not an index: the 128 rows of x shrink, n's values stay."""
    torch.manual_seed(0)
    n = torch.randint(0, 87, (4, 6))
    n[0, 0], n[0, 1] = 0, 86
    problem = _eager_reduce(_Counts(), (torch.randn(128, 8), n),
                            lambda gm, args: len(args) == 2 and int(args[1].max()) >= 10)
    assert sorted(_shapes(problem).values()) == [(2, 2), (2, 2)]  # n, and x's tanh (the cut's input)
    assert dict(problem.current.made)["n"].startswith("torch.randint(0, 87, (2, 2)")
    assert _size_calls(problem) == 1


class _Unbound(torch.nn.Module):
    """q, k, v = x.unbind(0): x's first size, 3, cannot shrink to 2 (there is no third part)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = x.permute(1, 0, 2).unbind(0)
        return torch.tanh(q * k + v)


def test_a_refused_fake_run_writes_nothing_to_the_log(caplog: pytest.LogCaptureFixture,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    """torch logs a traceback for each op a fake run refuses, and torch.fx prints the
    generated line that failed to stderr; a user's terminal gets neither."""
    with caplog.at_level(logging.DEBUG):
        _reduce(_Viewed(), (torch.randn(120),), needs=set())
        unbound, _ = _reduce(_Unbound(), (torch.randn(6, 3, 4),), needs=set())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.records[:1]
    assert _shapes(unbound) == {"x": (2, 3, 2)}
    assert "FX-traced" not in capfd.readouterr().err


def test_no_generated_values_no_smaller_shapes() -> None:
    problem, _ = _reduce(_Attention(), _attention_inputs(), needs=set(), on=False)
    assert dict(problem.current.made) == {} and _size_calls(problem) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_shapes_are_checked_on_fake_cuda_tensors() -> None:
    """A CUDA program's values live on the GPU: the fake run makes its tensors there too."""
    inputs = tuple(t.cuda() for t in _attention_inputs())
    problem, _ = _reduce(_Attention(), inputs, needs=set())
    assert _shapes(problem) == {"q": (2, 2), "k": (2, 2), "v": (2, 2)}
    problem, asked = _reduce(_Viewed(), (torch.randn(120, device="cuda"),), needs=set())
    assert _size_calls(problem) == 0


class _NormHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.norm(torch.relu(x) + 1.0)) * 2


def test_a_reduction_shrinks_the_graphs_sizes_and_its_script_still_reproduces(tmp_path: Path) -> None:
    """Through the workers, the script and the run alone: layer_norm over 32 features, its
    weight and bias (32 values each, made by the script) and the (4, 32) input all shrink."""
    torch.manual_seed(0)
    model = _NormHead().eval()
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)  # not all ones: made as randn, not torch.full
    pt2, inputs = save_program(model, (torch.randn(4, 32),), tmp_path)
    r = run_cli("reduce", str(pt2), "--inputs", str(inputs), "--oracle", "crash",
                "--backend", plugin("crash_on_wide_layer_norm"), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["shrunk_sizes"] == {"32": 2} and summary["shrunk_shapes"]["norm_weight"] == [[32], [2]]
    script = (tmp_path / "out" / "repro.py").read_text()
    assert "torch.ops.aten.layer_norm.default(" in script and ", [2], " in script and "[32]" not in script
    assert "shrank where the bug does not need them: 32 → 2." in (tmp_path / "out" / "report.md").read_text()
    assert summary["repro_alone"]["status"] == "REPRODUCED"
    alone = run_repro(tmp_path / "out")
    assert alone.returncode == 1 and "planted: layer_norm is not supported" in alone.stdout, alone.stdout
    assert run_repro(tmp_path / "out", backend="eager").returncode == 0
