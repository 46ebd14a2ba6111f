"""Smaller shapes (minimize/passes/shapes.py): the sizes of generated tensors that the bug
does not need shrink to 2, one size everywhere at once, and shapes the graph fixes are
never sent to the oracle."""

from __future__ import annotations

import pytest
import torch

from minimize.passes.values import expression, generated_of, make, reshaped
from minimize.problem import ReductionProblem
from minimize.program import Program
from minimize.scheduler import run_reduction
from oracles.verdict import Verdict


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


class _Viewed(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x.view(12, 10) * 2)


def _reduce(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], needs: set[int], jobs: int = 1,
            on: bool = True) -> tuple[ReductionProblem, list[dict[str, str]]]:
    """A planted bug that needs the whole graph and every size in `needs` where it was, and
    fails the same way at any other size; also returns the generated texts it was asked about."""
    program = Program(torch.export.export(module, inputs), inputs)
    whole = set(program.all_kept())
    asked: list[dict[str, str]] = []

    def verdict(kept: tuple[int, ...], settings) -> Verdict:
        generated = generated_of(settings)
        asked.append(generated)
        sizes = {d for e in generated.values() for d in make(e).shape}
        if not whole <= set(kept) or not all(d in sizes for d in needs if generated):
            return Verdict("pass")
        return Verdict("crash", "E", "planted")

    problem = ReductionProblem(program, lambda keys: [verdict(k, s) for k, s in keys], jobs=jobs)
    problem.generate_values = on
    run_reduction(problem)
    return problem, asked


def _attention_inputs() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(12, 6, generator=g), torch.randn(10, 6, generator=g), torch.randn(10, 6, generator=g)


def _shapes(problem: ReductionProblem) -> dict[str, tuple[int, ...]]:
    return {n: tuple(make(e).shape) for n, e in generated_of(problem.settings).items()}


def test_sizes_the_bug_does_not_need_shrink_all_at_once() -> None:
    problem, _ = _reduce(_Attention(), _attention_inputs(), needs=set())
    assert _shapes(problem) == {"q": (2, 2), "k": (2, 2), "v": (2, 2)}
    assert problem.pass_stats["shrink_shapes"].calls == 1


def test_a_size_the_bug_needs_stays_and_the_others_shrink_one_at_a_time() -> None:
    problem, _ = _reduce(_Attention(), _attention_inputs(), needs={10})
    assert _shapes(problem) == {"q": (2, 2), "k": (10, 2), "v": (10, 2)}  # the keys' 10 is the bug's
    assert problem.pass_stats["shrink_shapes"].calls == 4  # all at once, then 12, 10 and 6 alone
    assert _reduce(_Attention(), _attention_inputs(), needs={10}, jobs=4)[0].settings == problem.settings


def test_a_size_the_graph_fixes_costs_no_oracle_call() -> None:
    problem, asked = _reduce(_Viewed(), (torch.randn(120),), needs=set())
    assert _shapes(problem) == {"x": (120,)}  # view(12, 10) needs 120 elements
    assert problem.pass_stats["shrink_shapes"].calls == 0
    assert all(make(e).shape == (120,) for g in asked for e in g.values())


def test_no_generated_values_no_smaller_shapes() -> None:
    problem, _ = _reduce(_Attention(), _attention_inputs(), needs=set(), on=False)
    assert generated_of(problem.settings) == {} and problem.pass_stats["shrink_shapes"].calls == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_shapes_are_checked_on_fake_cuda_tensors() -> None:
    """A CUDA program's values live on the GPU: the fake run makes its tensors there too."""
    inputs = tuple(t.cuda() for t in _attention_inputs())
    problem, _ = _reduce(_Attention(), inputs, needs=set())
    assert _shapes(problem) == {"q": (2, 2), "k": (2, 2), "v": (2, 2)}
    problem, asked = _reduce(_Viewed(), (torch.randn(120, device="cuda"),), needs=set())
    assert problem.pass_stats["shrink_shapes"].calls == 0
