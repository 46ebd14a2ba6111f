"""The candidate as a value (minimize/program/candidate.py): its journal record, and the
order a reduction step must make it smaller in."""

from __future__ import annotations

import json

import torch

from minimize.program.candidate import Candidate
from minimize.search.problem import ReductionProblem
from minimize.program.model import Program
from oracles.verdict import Verdict
from tests.conftest import Host

ZEROS = "torch.zeros((4, 8), dtype=torch.float32)"
SMALL = "torch.zeros((2, 2), dtype=torch.float32)"


def test_a_journal_record_reads_back_also_one_written_before_the_type():
    """Journals written before Candidate existed carried made values and sizes as settings
    named trtmin.*: they resume to the same candidate as the record written now."""
    old = {"kept": [[1, 2]], "settings": [["optimization_level", "1"], ["trtmin.generated", '{"x": "%s"}' % ZEROS],
                                          ["trtmin.sizes", '{"8": 2}']]}
    cand = Candidate.from_record(old)
    assert cand == Candidate((1, 2), (("optimization_level", "1"),), (("x", ZEROS),), ((8, 2),))
    assert Candidate.from_record(json.loads(json.dumps(cand.record()))) == cand
    assert cand.job() == {"kept": [1, 2], "settings": {"optimization_level": "1"}, "generated": {"x": ZEROS},
                          "sizes": {8: 2}}
    marked = cand.but(made={}, sizes={}, mark_all=True)  # shrunk, only made tensors: not "not shrunk"
    assert Candidate.from_record(marked.record()) == marked and marked.sizes == () and marked.made == ()
    assert Candidate.from_record({"kept": [[0, 2], [5, 5]]}).nodes == (0, 1, 2, 5)


def test_size_order_nodes_then_settings_then_values_then_sizes():
    base = Candidate((1, 2, 3), (("a", "1"),))
    smaller = [base.but(nodes=(1, 2)), base.but(settings=()), base.but(made={"x": ZEROS}),
               base.but(sizes={8: 2})]
    assert all(s.size_key() < base.size_key() for s in smaller)
    assert base.but(made={"x": SMALL}).size_key() < base.but(made={"x": ZEROS}).size_key()
    assert not base.but(settings=(("a", "1"), ("b", "2"))).size_key() < base.size_key()
    assert not base.size_key() < base.size_key()


def _host_program() -> Program:
    """The tests' 18-node host, decomposed, for a problem run in this process."""
    x = torch.randn(4, 8)
    return Program(torch.export.export(Host().eval(), (x,)).run_decompositions({}), [x])


def test_consider_adopts_only_a_smaller_failing_candidate():
    program = _host_program()
    problem = ReductionProblem(program, lambda cands: [Verdict("crash", "E", "bug") for _ in cands],
                               settings={"a": "1"})
    problem.establish_original()
    whole = problem.current
    assert not problem.consider(whole.but(settings=(("a", "1"), ("b", "2"))))  # it fails, but it is larger
    assert not problem.consider(whole)  # the same candidate is no step
    assert problem.consider(whole.but(nodes=whole.nodes[1:])) and problem.current.nodes == whole.nodes[1:]
    assert problem.consider(problem.current.but(settings=())) and problem.current.settings == ()
    assert problem.counters.accepted == 2 and whole.settings == (("a", "1"),)


def test_under_repeat_a_candidates_verdict_is_a_run_that_failed_not_the_first():
    """--repeat 2 on a flaky compiler: runs [pass, crash]. The candidate's verdict (what the
    screen, the report and localization's failing output read) is the crash."""
    program = _host_program()
    flaky = [Verdict("pass"), Verdict("crash", "E", "bug")]
    problem = ReductionProblem(program, lambda cands: [list(flaky) for _ in cands])
    problem.establish_original()
    assert problem.verdict(problem.current).kind == "crash"
    assert problem.is_interesting(problem.at(problem.current.nodes[1:])) and problem.last_verdict.kind == "crash"


def test_a_journal_record_keeps_consecutive_nodes_as_one_run_and_the_static_compile():
    """The journal writes kept nodes as runs (a long prefix is one pair), and a candidate
    compiled with static sizes resumes as one: read back without its flag, the resumed run
    would compile it with the dynamic dims and take another verdict for the same name."""
    cand = Candidate((0, 1, 2, 3, 7, 8), static=True)
    assert cand.record()["kept"] == [[0, 3], [7, 8]]
    back = Candidate.from_record(json.loads(json.dumps(cand.record())))
    assert back == cand and back.static and back.job()["static"] is True
    assert not Candidate.from_record(Candidate((0,)).record()).static


def test_a_flaky_original_holds_candidates_to_half_its_failures_rounded_up():
    """--repeat 4: an original failing 3 runs of 4 holds each candidate to 2 (not 1: a
    candidate failing once in four is not the same rate); failing every run, to all 4."""
    program = _host_program()
    crash = Verdict("crash", "E", "bug")
    for failing, held in ((3, 2), (1, 1), (4, 4)):
        runs = [crash] * failing + [Verdict("pass")] * (4 - failing)
        problem = ReductionProblem(program, lambda cands: [list(runs) for _ in cands])
        problem.establish_original()
        assert (problem.original_failures, problem.min_failures) == (failing, held)
