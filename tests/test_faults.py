"""A plugin that segfaults, aborts or hangs is a verdict: the tool survives and reduces it."""

from __future__ import annotations

import json

import pytest

from tests.conftest import plugin
from tests.helpers import run_cli, run_repro


@pytest.mark.parametrize("fn,signal", [("segfault_on_tanh", "SIGSEGV"), ("abort_on_tanh", "SIGABRT")])
def test_dying_plugin_is_reduced(host_program, tmp_path, fn, signal):
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", plugin(fn),
                "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    # The plugin's fx Interpreter makes a semaphore (tqdm's lock) in each worker it kills:
    # the forked workers' resource tracker frees them without warning the user of leaks
    assert "leaked" not in r.stderr, r.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and signal in summary["signature"]
    assert summary["timing"]["worker_restarts"] >= 1
    assert "tanh" in (tmp_path / "repro.py").read_text()
    rr = run_repro(tmp_path)
    assert rr.returncode == 1 and signal in rr.stdout, rr.stdout + rr.stderr
    assert run_repro(tmp_path, backend="eager").returncode == 0


def test_hanging_plugin_is_reduced(host_program, tmp_path):
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "hang", "--backend",
                plugin("hang_on_tanh"), "--timeout", "4", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and summary["signature"] == "hang"
    assert "tanh" in (tmp_path / "repro.py").read_text()
