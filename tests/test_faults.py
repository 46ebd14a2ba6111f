"""A plugin that segfaults, aborts or hangs is a verdict: the tool survives and reduces it."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import plugin
from tests.helpers import run_cli, run_repro, running


@pytest.mark.parametrize("fn,signal", [("segfault_on_tanh", "SIGSEGV"), ("abort_on_tanh", "SIGABRT"),
                                       ("exit_on_tanh", "exited with code")])
def test_dying_plugin_is_reduced(host_program, tmp_path, fn, signal):
    """A compiler that kills its process, by a signal or by exiting with a code: reduced,
    and repro.py judges it from a child process (else the script itself would end with the
    compiler's code, which may read as any verdict)."""
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", plugin(fn),
                "--out", str(tmp_path), "--no-verify")  # the test runs repro.py alone itself
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


def test_a_segfault_at_another_site_is_another_bug(host_program, tmp_path):
    """The plugin segfaults on tanh in one function and on sin in another: two bugs. The
    host's is tanh's (its check comes first); a candidate without tanh dies of SIGSEGV too,
    on sin, and taking it would reduce to the other bug (before, the reduction ended at
    sin). The fault handler's stack names the site, and the reduction keeps it."""
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("segfault_at_two_sites"), "--out", str(tmp_path), "--no-verify", "--emit", "tensorrt",
                "--match", "_lower_tanh")  # a --match may name the site: the scripts cannot see it
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["signature"].endswith("SIGSEGV in string_at (called from _lower_tanh)"), summary["signature"]
    script = (tmp_path / "repro.py").read_text()
    assert summary["final_nodes"] == 1 and "aten.tanh" in script and "aten.sin" not in script
    # the scripts' child sees the signal alone, not the Python site: they judge by the signal
    assert "DEATH_PATTERN = ERROR_PATTERN" in script and "ERROR_PATTERN = 'SIGSEGV'" in script
    assert "ERROR_PATTERN = 'SIGSEGV'" in (tmp_path / "repro_tensorrt.py").read_text()


@pytest.fixture(scope="module")
def hang_repro(host_program, tmp_path_factory) -> Path:
    model, inputs = host_program
    out = tmp_path_factory.mktemp("hang")
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "hang", "--backend",
                plugin("hang_on_tanh"), "--timeout", "4", "--out", str(out),
                "--jobs", "2")  # two hangs waited out at once: the result is the same for any --jobs
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_hanging_plugin_is_reduced(hang_repro):
    """Reduced to tanh, and the report says where the compiler was stuck when its worker was
    killed: the fault handler's stack on the pool's SIGUSR1 (the Python frames, innermost
    first: time.sleep is C, so the plugin's own function)."""
    summary = json.loads((hang_repro / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and summary["signature"] == "hang"
    what_fails = (hang_repro / "report.md").read_text().split("**What fails:** ")[1].splitlines()[0]
    assert what_fails.startswith("HANG: no result within the 4 s timeout; the worker, stuck in hang_on_tanh (called "
                                 "from "), what_fails
    assert summary["repro_alone"]["status"] == "REPRODUCED", summary["repro_alone"]  # verified alone, in a child
    assert "tanh" in (hang_repro / "repro.py").read_text()


def test_hang_clock_leaves_out_the_childs_start_up(hang_repro, tmp_path):
    """The timeout is for the call: a child slow to start (11 s loading its inputs, over the
    timeout, raised to 10 s so that the fixed backend's compile fits it on a loaded machine)
    whose backend no longer hangs is FIXED, not a hang."""
    folder = copy_of(hang_repro, tmp_path)
    rr = run_repro(folder)
    assert rr.returncode == 1 and rr.stdout.strip() == "REPRODUCED: no result within 4 s (hang)", rr.stdout
    script, backend = folder / "repro.py", folder / "plugin.py"
    assert "\nCHILD_TIMEOUT_S = 4.0\n" in script.read_text()
    script.write_text(script.read_text().replace("\nCHILD_TIMEOUT_S = 4.0\n", "\nCHILD_TIMEOUT_S = 10.0\n").replace(
        "def make_inputs():\n", "def make_inputs():\n    import time; time.sleep(11)\n"))
    backend.write_text(backend.read_text().replace("        while True:\n            time.sleep(1)\n",
                                                   "        pass  # fixed\n"))
    rr = run_repro(folder)
    assert rr.returncode == 0 and rr.stdout.strip() == "FIXED: compiled and ran without error", rr.stdout + rr.stderr


@pytest.fixture(scope="module")
def segfault_repro(host_program, tmp_path_factory) -> Path:
    """A reduce output whose repro.py runs the bug in a child process (it kills the process)."""
    model, inputs = host_program
    out = tmp_path_factory.mktemp("segfault")
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("segfault_on_tanh"), "--out", str(out), "--no-generate-values",  # with its inputs file
                "--no-verify")  # its tests run repro.py alone themselves
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def copy_of(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / "repro"))


def test_child_repro_without_its_inputs_cannot_run(segfault_repro, tmp_path):
    """A file gone from the folder is no news about the bug: exit 2 naming it, not a silent
    exit 1 (the child's traceback exited 1, which the parent passed on as REPRODUCED)."""
    folder = copy_of(segfault_repro, tmp_path)
    (folder / "repro_inputs.pt").unlink()
    rr = run_repro(folder)
    assert rr.returncode == 2, rr.stdout + rr.stderr
    assert rr.stdout.startswith("SKIPPED: cannot run") and "repro_inputs.pt" in rr.stdout, rr.stdout


def test_child_that_dies_before_the_call_is_not_the_bug(segfault_repro, tmp_path):
    """The same signal before the backend is called (here: while the inputs load) is the
    script's failure, not the reduced bug's."""
    folder = copy_of(segfault_repro, tmp_path)
    script = folder / "repro.py"
    script.write_text(script.read_text().replace("def make_inputs():\n",
                                                 "def make_inputs():\n    import ctypes; ctypes.string_at(0)\n"))
    rr = run_repro(folder)
    assert rr.returncode == 2 and "SIGSEGV before it called the backend" in rr.stdout, rr.stdout + rr.stderr


def test_a_hung_compilers_own_processes_die_with_its_worker(host_program, tmp_path, monkeypatch):
    """A worker killed for a hang left what the compiler had started (a linker, a build
    helper) running under init: a trial counted 12 orphans after one reduction. Each worker
    leads a process group of its own, and the group is killed."""
    monkeypatch.setenv("TRTMIN_TEST_STATE", str(tmp_path))
    model, inputs = host_program
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "hang", "--backend",
                plugin("hang_on_tanh_with_a_child"), "--timeout", "4")
    assert r.returncode == 1 and "HANG" in r.stdout, r.stdout + r.stderr[-2000:]
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and running(child):
        time.sleep(0.1)
    assert not running(child), f"the compiler's process {child} outlived its worker"

