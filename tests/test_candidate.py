"""The candidate as a value (minimize/program/candidate.py): its key, the text form runs are
cached and journaled under, and the order a reduction step must make it smaller in."""

from __future__ import annotations

import torch

from minimize.program.candidate import Candidate, made_of, sizes_of, with_made, with_mark_all, with_sizes
from minimize.search.problem import ReductionProblem
from minimize.program.model import Program
from oracles.verdict import Verdict
from tests.conftest import Host

ZEROS = "torch.zeros((4, 8), dtype=torch.float32)"
SMALL = "torch.zeros((2, 2), dtype=torch.float32)"


def test_the_key_is_the_journal_text_of_earlier_runs_and_reads_back():
    """A journal written before Candidate existed holds these keys: they must mean the same."""
    old = ((1, 2), (("optimization_level", "1"), ("trtmin.generated", '{"x": "%s"}' % ZEROS),
                    ("trtmin.sizes", '{"8": 2}')))
    cand = Candidate.of(old)
    assert cand.settings == (("optimization_level", "1"),) and dict(cand.made) == {"x": ZEROS}
    assert cand.sizes == ((8, 2),) and not cand.mark_all and cand.key == old
    assert cand.job() == {"kept": [1, 2], "settings": {"optimization_level": "1"}, "generated": {"x": ZEROS},
                          "sizes": {8: 2}}
    settings = with_mark_all(with_sizes(with_made((), {"x": ZEROS}), {}))
    assert made_of(settings) == {"x": ZEROS} and sizes_of(settings) == {} and Candidate.of(((), settings)).mark_all
    assert Candidate.of(((), settings)).sizes == ()  # shrunk, only made tensors: not "not shrunk"
    assert with_made(with_made((), {"x": ZEROS}), {}) == ()


def test_size_order_nodes_then_settings_then_values_then_sizes():
    base = Candidate((1, 2, 3), (("a", "1"),))
    smaller = [base.but(nodes=(1, 2)), base.but(settings=()), base.but(made={"x": ZEROS}),
               base.but(sizes={8: 2})]
    assert all(s.size_key() < base.size_key() for s in smaller)
    assert base.but(made={"x": SMALL}).size_key() < base.but(made={"x": ZEROS}).size_key()
    assert not base.but(settings=(("a", "1"), ("b", "2"))).size_key() < base.size_key()
    assert not base.size_key() < base.size_key()


def test_consider_adopts_only_a_smaller_failing_candidate():
    x = torch.randn(4, 8)
    program = Program(torch.export.export(Host().eval(), (x,)).run_decompositions({}), [x])
    problem = ReductionProblem(program, lambda keys: [Verdict("crash", "E", "bug") for _ in keys],
                               settings={"a": "1"})
    problem.establish_original()
    whole, settings = problem.current, problem.settings
    assert not problem.consider(whole, (("a", "1"), ("b", "2")))  # it fails, but it is larger
    assert not problem.consider(whole)  # the same candidate is no step
    assert problem.consider(whole[1:]) and problem.current == whole[1:]
    assert problem.consider(problem.current, ()) and problem.settings == ()
    assert problem.counters.accepted == 2 and settings == (("a", "1"),)
