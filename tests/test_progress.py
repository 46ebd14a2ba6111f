"""The live progress line: its clock runs between verdicts (an engine build takes minutes)."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

from rich.console import Console

from minimize import progress
from minimize.program.candidate import Candidate
from minimize.progress import ProgressView

COUNTS = SimpleNamespace(call_nodes_of=len)  # a program whose slices hold their kept nodes alone


def test_the_clock_runs_while_no_verdict_comes_in(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    view = ProgressView(Console(file=io.StringIO(), force_terminal=True))
    state = SimpleNamespace(current=Candidate(tuple(range(40))), program=COUNTS, current_pass="bisect_window",
                            counters=SimpleNamespace(oracle_calls=3, accepted=1))
    view.update(state)
    first = view.__rich__().plain
    now[0] += 125  # no update: one oracle call is still out
    later = view.__rich__().plain
    assert first.startswith("0:00 | ") and later.startswith("2:05 | ")  # first: what moves is never cut
    assert "call nodes 40 -> 40 | oracle calls 3 | accepted 1 | waiting 125 s for a verdict" in later
    assert "waiting" not in first
    narrow = Console(file=io.StringIO(), width=40, force_terminal=True)
    shown = narrow.render_lines(view, narrow.options)  # as the live display renders it: one line, cut at the end
    assert len(shown) == 1 and "".join(s.text for s in shown[0]).startswith("2:05 | reducing"), shown


def test_a_pass_shows_when_it_starts_not_at_its_first_verdict():
    """A pass's first call may be a localization compile of minutes (8 on the 5,057-node
    policy): the line names that pass and what it does then, not the one before it."""
    view = ProgressView(Console(file=io.StringIO(), force_terminal=True))
    state = SimpleNamespace(current=Candidate(tuple(range(40))), program=COUNTS, current_pass="check",
                            counters=SimpleNamespace(oracle_calls=1, accepted=0))
    view.update(state)
    state.current_pass = "bisect_window: localizing"  # no verdict yet: no update
    assert "reducing [bisect_window: localizing] call nodes 40 -> 40 | oracle calls 1" in view.__rich__().plain
    from minimize.search import DONE
    state.current, state.current_pass = Candidate((3, 4)), DONE  # the search has ended; repro.py runs alone
    view.phase("running repro.py alone")  # not "reducing [shrink_shapes]" any more
    assert view.__rich__().plain.endswith("running repro.py alone | reduced call nodes "
                                          "40 -> 2 | oracle calls 1"), view.__rich__().plain
    view.start_nodes, state.counters.oracle_calls = 10_357, 118  # at 80 columns the result shows whole
    shown = Console(file=io.StringIO(), width=80, force_terminal=True)
    line = "".join(seg.text for seg in shown.render_lines(view, shown.options)[0])
    assert line.rstrip().endswith("reduced call nodes 10357 -> 2 | oracle calls 118"), line


def test_without_a_terminal_the_state_is_a_plain_line_every_heartbeat(monkeypatch):
    """A log file or CI gets no live line: the same state is printed every HEARTBEAT_S, also
    while no verdict comes in; a view that ends sooner prints nothing."""
    import time

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    out = io.StringIO()
    with ProgressView(Console(file=out, width=200)) as view:
        view.update(SimpleNamespace(current=Candidate(tuple(range(40))), program=COUNTS, current_pass="bisect_window",
                                    counters=SimpleNamespace(oracle_calls=3, accepted=1)))
        time.sleep(0.4)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all("reducing [bisect_window] call nodes 40 -> 40 | oracle calls 3" in ln
                                   for ln in lines), lines
    monkeypatch.setattr(progress, "HEARTBEAT_S", 60.0)
    quiet = io.StringIO()
    with ProgressView(Console(file=quiet, width=200)) as view:
        view.phase("checking the original")
        time.sleep(0.1)
    assert quiet.getvalue() == ""


def test_a_long_first_call_without_a_terminal_is_not_silent(host_program, monkeypatch):
    """The original's compile is the longest call (minutes for TensorRT): a run logged to a
    file shows what it is doing meanwhile, and its error is still the last line."""
    from tests.conftest import plugin
    from tests.helpers import run_cli_here

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.5)
    model, inputs = host_program
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--backend", plugin("hang_on_tanh"),
                     "--oracle", "crash", "--timeout", "3")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "no result within --timeout 3 s" in lines[-1], r.stderr
    beats = [ln for ln in lines[:-1] if re.match(r"\d+:\d\d \| checking the original", ln)]
    assert beats, r.stderr  # elapsed first, not a deadline


def test_check_shows_what_it_does_while_its_one_call_is_out(host_program, monkeypatch):
    """`trtmin check` is one call, a TensorRT build of minutes on a big model: it has the
    same live line (a plain line each heartbeat without a terminal) and its answer last."""
    from tests.conftest import plugin
    from tests.helpers import run_cli_here

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.5)
    model, inputs = host_program
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--backend", plugin("hang_on_tanh"),
                     "--oracle", "crash", "--timeout", "3")
    beats = [ln for ln in r.stderr.splitlines() if re.match(rf"\d+:\d\d \| checking: {re.escape(model.name)} on ", ln)]
    assert beats, r.stderr  # elapsed first, not a deadline
    # it hangs where a crash was asked about: it fails otherwise (exit 3)
    assert r.returncode == 3 and "HANG: no result within the 3 s timeout" in r.stdout.strip().splitlines()[-1], r.stdout


def test_a_plugin_slow_to_import_is_shown_importing(host_program, monkeypatch, tmp_path):
    """The plugin's module runs its top-level code in trtmin's own process first (a missing
    function is a one-line error): a slow or stuck import shows as that, not as the model's
    load (it said "loading MODEL" for as long as the import hung)."""
    from tests.helpers import run_cli_here

    slow = tmp_path / "slow_to_import.py"
    slow.write_text("import time\ntime.sleep(2)\n\n\ndef backend(gm, example_inputs):\n    return gm\n")
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.5)
    model, inputs = host_program
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--backend", f"{slow}:backend",
                     "--oracle", "crash")
    beats = [ln for ln in r.stderr.splitlines()
             if re.match(rf"\d+:\d\d \| importing the plugin {re.escape(slow.name)}:backend \(its module's", ln)]
    assert len(beats) >= 2 and r.returncode == 0, r.stderr


class Tty(io.StringIO):
    """A terminal's stream, as far as isatty goes."""

    def isatty(self) -> bool:
        return True


def test_a_pipe_forced_to_colour_and_a_dumb_terminal_get_plain_lines_not_redraws(monkeypatch):
    """FORCE_COLOR in CI made rich call a pipe a terminal: the live line's redraws (carriage
    returns, erase codes) filled the log and no heartbeat was printed; TERM=dumb in a real
    terminal got neither redraws nor a heartbeat: silence for a whole reduction (the
    screen trial). Both get the plain line each HEARTBEAT_S; a real terminal, the live line."""
    import time

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    state = SimpleNamespace(current=Candidate(tuple(range(40))), program=COUNTS, current_pass="bisect_window",
                            counters=SimpleNamespace(oracle_calls=3, accepted=1))
    for stream, term in ((io.StringIO(), "xterm"), (Tty(), "dumb")):
        monkeypatch.setenv("TERM", term)
        console = Console(file=stream, width=200, force_terminal=True)
        with ProgressView(console) as view:
            assert view.live is None, term
            view.phase("checking the original")
            view.update(state)
            time.sleep(0.3)
        said = stream.getvalue()
        assert "\r" not in said and "\x1b[2K" not in said, (term, said)
        assert "reducing [bisect_window] call nodes 40 -> 40" in re.sub(r"\x1b\[[0-9;]*m", "", said), (term, said)
    monkeypatch.setenv("TERM", "xterm")
    assert ProgressView(Console(file=Tty(), width=200, force_terminal=True)).live is not None


def test_repros_run_shows_a_live_line_on_a_terminal_only(monkeypatch):
    """`repros run` on a terminal sat blank until its first repro finished (6 s for one, 10 s
    and 16 s gaps on the suite: the screen trial): a live line with the clock and the count
    done (of how many) now runs under the rows. A pipe gets the rows alone."""
    from types import SimpleNamespace as Row

    from minimize.progress import RunningRepros

    monkeypatch.setenv("TERM", "xterm")
    row = Row(status="FIXED", name="a_repro", seconds=1.0, ok=True)
    tty = Tty()
    printed = []
    with RunningRepros(Console(file=tty, width=100, force_terminal=True), printed.append, 3) as running:
        assert running.live is not None and running.__rich__().plain == "0:00 | running repros: 0 of 3 done"
        running.finished(row)
        assert running.__rich__().plain == "0:00 | running repros: 1 of 3 done" and printed == [row]
    assert "running repros" in tty.getvalue()
    pipe = io.StringIO()
    with RunningRepros(Console(file=pipe, width=100), printed.append, 3) as running:
        assert running.live is None
    assert pipe.getvalue() == ""


def test_without_a_terminal_the_heartbeat_waits_a_whole_beat_after_any_line(monkeypatch):
    """The plain line comes once a HEARTBEAT_S, however often the thread wakes (each 5 s):
    not every wake once the first minute has passed (a log line every 5 s for an hour), and
    not a beat after a note printed a moment ago. Run on a clock the test moves: five
    minutes of wakes, a note at 0:50."""
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    out = io.StringIO()
    view = ProgressView(Console(file=out, width=200))
    assert view.live is None  # a log file: the heartbeat's
    view.update(SimpleNamespace(current=Candidate(tuple(range(40))), program=COUNTS, current_pass="bisect_window",
                                counters=SimpleNamespace(oracle_calls=3, accepted=1)))

    class Wakes:  # the thread's wait: 5 s pass at each, for 300 s; a note is logged at 50 s
        def wait(self, seconds: float) -> bool:
            now[0] += seconds
            if now[0] == 50.0:
                view.log("note: a compiler's warning")
            return now[0] > 300.0

    view._stop = Wakes()
    view._heartbeat()  # in this thread: it returns once the clock passes 300 s
    lines = out.getvalue().splitlines()
    assert [ln.split(" | ")[0] for ln in lines] == ["note: a compiler's warning", "1:50", "2:50", "3:50", "4:50"], lines
    assert all("reducing [bisect_window] call nodes 40 -> 40" in ln for ln in lines[1:]), lines


def test_the_search_replaces_a_phase_and_keeps_the_size_it_started_from():
    """phase() names a step outside the search (checking the original); the search's next
    step replaces it, or the line said "checking the original" for the whole reduction.
    The size it started from is the first step's: "call nodes 40 -> 3", not "3 -> 3"."""
    view = ProgressView(Console(file=io.StringIO(), force_terminal=True))
    view.phase("checking the original")
    state = SimpleNamespace(current=Candidate(tuple(range(40))), program=COUNTS, current_pass="bisect_window",
                            counters=SimpleNamespace(oracle_calls=1, accepted=0))
    view.update(state)
    assert view.__rich__().plain.startswith("0:00 | reducing [bisect_window] call nodes 40 -> 40"), view.__rich__().plain
    state.current, state.counters.accepted = Candidate((0, 1, 2)), 1
    view.update(state)
    assert "call nodes 40 -> 3 | oracle calls 1 | accepted 1" in view.__rich__().plain, view.__rich__().plain


def test_with_jobs_the_originals_verdict_is_said_as_it_lands():
    """--jobs 2 checks the original in a batch beside a speculative candidate, and the search
    goes on when both are in: the line said "checking the original" for a minute after its
    verdict had come (a hunt, 1,808 nodes on Inductor). Now the verdict, as it lands; the
    journal still gets every candidate's runs, and another candidate's say nothing."""
    from minimize.reduce import _say_the_originals_verdict
    from oracles.verdict import Verdict

    original, other = Candidate(nodes=(0, 1, 2)), Candidate(nodes=(0,))
    journaled, phases = [], []
    session = SimpleNamespace(on_verdict=lambda cand, runs: journaled.append(cand))
    problem = SimpleNamespace(current=original, first_verdict=None)
    _say_the_originals_verdict(session, problem, phases.append)
    session.on_verdict(other, [Verdict("pass")])
    assert phases == []
    session.on_verdict(original, [Verdict("crash", "RuntimeError", "boom")])
    assert phases == ["the original: CRASH: RuntimeError: boom; the search goes on when the candidates compiled "
                      "beside it are in"]
    assert journaled == [other, original]


def test_candidates_that_timed_out_are_said_to_have_counted_as_not_the_bug():
    """A candidate past --timeout under another oracle counts as not the bug: on a busy
    machine a long run's larger windows took 290 s of the 300 (a hunt), and a timeout there
    would have kept a larger result, unsaid. Said now, with the fix; under --oracle hang a
    timeout is the bug itself, and nothing is said."""
    from minimize.reduce import _timed_out_note
    from oracles.verdict import Verdict

    hang = Verdict("hang", message="no result within the 300 s timeout; the worker was killed")
    cache = {Candidate(nodes=(0, 1)): [Verdict("mismatch", output=0, max_abs=1.0)], Candidate(nodes=(0,)): [hang],
             Candidate(nodes=(1,)): [Verdict("pass"), hang]}
    problem = SimpleNamespace(cache=cache)
    said = _timed_out_note(problem, SimpleNamespace(oracle="mismatch", timeout=300.0))
    assert said == ("2 candidates ran past --timeout 300 s and counted as not the bug; on a busy machine that may "
                    "have kept a larger result: a longer --timeout tells")
    assert _timed_out_note(problem, SimpleNamespace(oracle="hang", timeout=300.0)) is None
    assert _timed_out_note(SimpleNamespace(cache={Candidate(nodes=(0,)): [Verdict("pass")]}),
                           SimpleNamespace(oracle="crash", timeout=5.0)) is None
