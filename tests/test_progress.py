"""The live progress line: its clock runs between verdicts (an engine build takes minutes)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from minimize import progress
from minimize.program.candidate import Candidate
from minimize.progress import ProgressView


def test_the_clock_runs_while_no_verdict_comes_in(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    view = ProgressView(Console(file=io.StringIO(), force_terminal=True))
    state = SimpleNamespace(current=Candidate(tuple(range(40))), current_pass="bisect_window",
                            counters=SimpleNamespace(oracle_calls=3, accepted=1))
    view.update(state)
    first = view.__rich__().plain
    now[0] += 125  # no update: one oracle call is still out
    later = view.__rich__().plain
    assert first.endswith("| 0:00") and later.endswith("| 2:05")
    assert "call nodes 40 -> 40 | oracle calls 3 | accepted 1" in later
