"""A Ctrl-C that a library swallowed (some catch everything while they import) still stops trtmin."""

from __future__ import annotations

import signal

import pytest
import typer

from minimize import cli

from minimize.run import interrupts
from oracles.errors import TrtminError


def test_a_swallowed_ctrl_c_is_raised_again_and_an_error_after_it_is_an_interruption(monkeypatch):
    monkeypatch.setattr(interrupts, "_seen", False)
    monkeypatch.setattr(interrupts, "_repeats", 0)
    interrupts.check()  # nothing came: nothing raised
    try:
        interrupts.on_signal(signal.SIGINT, None)
    except BaseException:  # noqa: BLE001 - what the library did
        pass
    with pytest.raises(KeyboardInterrupt):
        interrupts.check()  # before the next batch of oracle calls
    with pytest.raises(typer.Exit) as stopped:
        cli._fail(TrtminError("could not be loaded (RecursionError)"))  # what the Ctrl-C turned into
    assert stopped.value.exit_code == 130


def test_a_second_stop_lets_the_first_ones_clean_up_run_and_a_third_stops(monkeypatch):
    monkeypatch.setattr(interrupts, "_seen", False)
    monkeypatch.setattr(interrupts, "_repeats", 0)
    with pytest.raises(KeyboardInterrupt):
        interrupts.on_signal(signal.SIGINT, None)
    interrupts.on_signal(signal.SIGINT, None)  # timeout(1)'s second, or a quick second Ctrl-C: let pass
    with pytest.raises(KeyboardInterrupt):
        interrupts.on_signal(signal.SIGINT, None)
    monkeypatch.setattr(interrupts, "_repeats", 0)
    monkeypatch.setattr(interrupts, "_first_at", interrupts.time.monotonic() - 5)  # a library swallowed the first
    with pytest.raises(KeyboardInterrupt):  # the user's second, seconds later, stops it
        interrupts.on_signal(signal.SIGINT, None)


def test_a_background_job_keeps_ignoring_sigint(monkeypatch):
    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        interrupts.install()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        interrupts.install()
        assert signal.getsignal(signal.SIGINT) is interrupts.on_signal
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_no_command_caught_says_interrupted(monkeypatch, capsys):
    """typer turns a KeyboardInterrupt that a command does not catch (`check` mid-compile)
    into exit 130 in silence: run() says it was interrupted, once."""
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "check_numbers", stopped)  # the first thing `check` does after its arguments
    monkeypatch.setattr(cli, "_interruption_said", False)
    monkeypatch.setattr(interrupts, "_signal", signal.SIGINT)
    code = cli.run(["check", "model.pt2", "--oracle", "crash", "--backend", "inductor"])
    assert code == 130
    assert capsys.readouterr().err.count("interrupted") == 1
