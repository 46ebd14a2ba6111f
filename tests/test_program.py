"""The program model (cut-to-input slicing) and the reducer, with a pure oracle.

Pure oracles run in-process (no workers), so these properties are checked on many
random programs quickly: slices compute eager's own values, and the reducer finds
exactly the planted core, deterministically, for any number of jobs.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minimize.inputs import prepare
from minimize.problem import ReductionProblem
from minimize.program import Program
from minimize.scheduler import reduce_to_fixpoint
from oracles.verdict import Signature, Verdict
from tests.conftest import Host


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


def reduce_with_pure_oracle(program: Program, core: set[int], jobs: int) -> ReductionProblem:
    def evaluate(cands):
        return [Verdict("crash", "E", "planted") if core <= set(kept) else Verdict("pass") for kept, _ in cands]

    problem = ReductionProblem(program, evaluate, jobs=jobs)
    problem.signature = Signature.of(problem.check_original())
    reduce_to_fixpoint(problem)
    return problem


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_reducer_finds_exactly_the_core_for_any_jobs(program: Program, data):
    core = set(program.normalize(data.draw(st.sets(st.integers(0, len(program.nodes) - 1), min_size=1, max_size=4))))
    if not core:
        return
    one = reduce_with_pure_oracle(program, core, jobs=1)
    assert set(one.current) == core
    many = reduce_with_pure_oracle(program, core, jobs=data.draw(st.integers(2, 6)))
    assert many.current == one.current
    assert many.counters.oracle_calls == one.counters.oracle_calls  # speculation is not charged
    assert many.counters.evaluations >= one.counters.evaluations


def test_single_node_core_takes_few_calls(program: Program):
    problem = reduce_with_pure_oracle(program, {len(program.nodes) // 2}, jobs=1)
    assert len(problem.current) == 1
    assert problem.counters.oracle_calls <= 2 * len(program.nodes).bit_length() + 8
