"""The searches of minimize/search/searches.py: exact answers, their probe counts, and speculation
that only ever proposes probes the sequential search can ask for; and the scheduler's loop of
passes to a fixed point."""

from __future__ import annotations

import math

import pytest

from minimize.search.searches import (binary_first_true, gallop_first_true, guided_first_true, mapped, replay,
                            search_walk, speculative_probes)


def run(search_factory, threshold: int) -> tuple[int, list[int]]:
    probes: list[int] = []

    def answer(x: int) -> bool:
        probes.append(x)
        return x >= threshold

    x, result = replay(search_factory, answer)
    assert x is None
    return result, probes


@pytest.mark.parametrize("search", [binary_first_true, gallop_first_true])
@pytest.mark.parametrize("lo,hi", [(1, 1), (1, 2), (1, 7), (3, 64), (1, 206)])
def test_every_threshold_is_found(search, lo: int, hi: int) -> None:
    for t in range(lo, hi + 1):
        result, probes = run(lambda: search(lo, hi), t)
        assert result == t
        assert hi not in probes or hi == lo  # hi is taken as true, never asked
        assert len(probes) == len(set(probes))


def test_gallop_is_cheap_near_lo_and_bounded_far_from_it() -> None:
    binary_worst = math.ceil(math.log2(206))
    for t in range(1, 207):
        _, probes = run(lambda: gallop_first_true(1, 206), t)
        if t <= 8:  # within the gallop: 1, 2, 4, 8
            assert len(probes) <= 2 * math.ceil(math.log2(t + 1)) + 1
        assert len(probes) <= 4 + binary_worst
    assert len(run(lambda: gallop_first_true(1, 206), 2)[1]) == 2      # w=1 no, w=2 yes
    assert len(run(lambda: binary_first_true(1, 206), 2)[1]) >= 7


@pytest.mark.parametrize("search", [binary_first_true, gallop_first_true,
                                    lambda lo, hi: guided_first_true(lo, hi, 40),
                                    lambda lo, hi: guided_first_true(lo, hi, 97)])
def test_speculation_proposes_the_sequential_path_first(search) -> None:
    for t in (1, 5, 40, 99, 100):
        _, path = run(lambda: search(1, 100), t)
        known: dict[int, bool] = {}
        rounds = 0
        while True:
            nxt, _ = replay(lambda: search(1, 100), known.get)
            if nxt is None:
                break
            batch = speculative_probes(search_walk(lambda: search(1, 100), known.get), 4)
            assert batch[0] == nxt  # the probe the sequential search needs now comes first
            assert len(batch) == len(set(batch)) <= 4
            known.update({x: x >= t for x in batch})
            rounds += 1
        assert set(path) <= set(known)
        assert rounds <= math.ceil(len(path) / 2)  # 4 slots cover at least two levels a round


@pytest.mark.parametrize("guess", [None, 0, 1, 2, 50, 205, 206, 207])
def test_a_guided_search_finds_every_threshold_at_or_above_the_guess(guess) -> None:
    lowest = guess if guess is not None and 1 <= guess <= 206 else 1
    for t in range(lowest, 207):
        result, probes = run(lambda: guided_first_true(1, 206, guess), t)
        assert result == t
        assert 206 not in probes and len(probes) == len(set(probes))


def test_a_right_guess_costs_one_probe_and_a_low_one_little_more() -> None:
    for t in range(1, 206):
        assert run(lambda: guided_first_true(1, 206, t), t)[1] == [t]
    assert run(lambda: guided_first_true(1, 206, 206), 206)[1] == []  # hi is known true
    binary_worst = math.ceil(math.log2(206))
    for guess in (20, 100, 180):
        for t in range(guess, 207):
            n = len(run(lambda: guided_first_true(1, 206, guess), t)[1])
            miss = t - guess
            if miss < 8:  # within the gallop from the guess
                assert n <= 2 * math.ceil(math.log2(miss + 1)) + 1
            assert n <= binary_worst + 5


def test_a_high_guess_is_taken_as_it_is() -> None:
    """Localization saw every value below the guess right: the search does not ask
    again, and a guess too high ends the prefix late (delta debugging trims it)."""
    for t in range(1, 100):
        result, probes = run(lambda: guided_first_true(1, 206, 100), t)
        assert (result, probes) == (100, [100])


def test_speculation_follows_the_expected_answers_first() -> None:
    """Of a guided search, speculation takes the guess first, then what follows the
    expected answer (here the composed second search), before the branch where the
    guess was wrong."""
    def composed():
        h = yield from mapped(guided_first_true(1, 100, 40), lambda h: ("prefix", h))
        w = yield from mapped(gallop_first_true(1, h), lambda w: ("suffix", w))
        return h, w

    batch = speculative_probes(search_walk(composed, lambda p: None), 4)
    assert batch == [("prefix", 40), ("suffix", 1), ("suffix", 2), ("suffix", 4)]
    x, result = replay(composed, lambda p: p[1] >= 40 if p[0] == "prefix" else p[1] >= 2)
    assert (x, result) == (None, (40, 2))


def test_speculation_of_a_finished_search_is_empty() -> None:
    known = {x: x >= 1 for x in range(1, 9)}
    assert speculative_probes(search_walk(lambda: binary_first_true(1, 8), known.get), 4) == []


def test_the_tiers_run_again_after_the_proof_cuts_a_node(monkeypatch) -> None:
    """The scheduler (minimize/search/scheduler.py): where the tiers cut nothing more,
    prove_one_minimal tries every one-node cut; a node it cuts can free others for the
    tiers, so they run again, and the loop ends where neither cuts anything."""
    from types import SimpleNamespace

    from minimize.search import scheduler
    from minimize.search.problem import Counters

    problem = SimpleNamespace(current=SimpleNamespace(nodes=frozenset("abc")), pass_stats={}, counters=Counters(),
                              current_pass="")
    ran: list[str] = []

    def cut(node: str) -> None:
        problem.current = SimpleNamespace(nodes=problem.current.nodes - {node})

    def tier(p) -> None:  # b can go only once a has: the tiers' cuts are coarser than one node
        ran.append("tier")
        if "a" not in p.current.nodes and "b" in p.current.nodes:
            cut("b")

    def proof(p) -> None:
        ran.append("proof")
        if "a" in p.current.nodes:
            cut("a")

    monkeypatch.setattr(scheduler, "TIERS", [("tier", tier)])
    monkeypatch.setattr(scheduler, "PROOF", ("proof", proof))
    monkeypatch.setattr(scheduler, "FINISHERS", [])
    scheduler.reduce_to_fixpoint(problem)
    assert problem.current.nodes == {"c"}
    assert ran == ["tier", "proof", "tier", "tier", "proof"]  # cut nothing, a; b; nothing, nothing: done
    assert (problem.pass_stats["proof"].removed, problem.pass_stats["tier"].removed) == (1, 1)
