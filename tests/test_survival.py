"""Survive everything: outside kills, memory limits, interrupts (resume), flaky compilers,
and the same repro whatever happened on the way."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import plugin
from tests.helpers import ROOT, run_cli, run_cli_here, run_repro, running


def reduce_args(model: Path, inputs: Path, out: Path, oracle: str, fn: str, *extra: str) -> list[str]:
    return ["reduce", str(model), "--inputs", str(inputs), "--oracle", oracle, "--backend", plugin(fn),
            "--out", str(out), *extra]


def summary(out: Path) -> dict:
    s = json.loads((out / "summary.json").read_text())
    return {k: v for k, v in s.items() if k not in ("timing", "seconds", "journal_header_sha256")}  # names the run


@pytest.fixture(scope="module")
def clean_mismatch_run(host_program, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean")
    model, inputs = host_program
    r = run_cli(*reduce_args(model, inputs, out, "mismatch", "mismatch_mul_exp", "--no-verify"))
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_worker_killed_mid_call_is_retried(host_program, clean_mismatch_run, tmp_path, monkeypatch):
    monkeypatch.setenv("TRTMIN_TEST_STATE", str(tmp_path))
    model, inputs = host_program
    out = tmp_path / "out"
    r = run_cli(*reduce_args(model, inputs, out, "mismatch", "sigkill_once_then_mismatch", "--no-verify"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "killed").exists()  # the kill did happen
    program = lambda p: p.read_text().split("class Repro")[1].split("def compile_backend")[0]
    assert program(out / "repro.py") == program(clean_mismatch_run / "repro.py")
    assert summary(out)["final_nodes"] == summary(clean_mismatch_run)["final_nodes"]


@pytest.fixture(scope="module")
def host_oom_run(host_program, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("host_oom")
    model, inputs = host_program
    r = run_cli(*reduce_args(model, inputs, out, "oom", "host_oom_on_tanh", "--memory-limit", "6000"))
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_host_oom_under_memory_limit_is_a_verdict(host_oom_run):
    s = summary(host_oom_run)
    assert s["final_nodes"] == 1 and s["signature"] == "oom"


def test_check_confirms_a_host_oom_under_memory_limit(host_program):
    """check takes --memory-limit as reduce does: without it there is no host OOM to see."""
    model, inputs = host_program
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "oom", "--backend",
                     plugin("host_oom_on_tanh"), "--memory-limit", "6000")
    assert r.returncode == 1 and r.stdout.startswith("FAILS (oom)") and "allocate" in r.stdout, r.stdout + r.stderr


def test_host_oom_repro_runs_under_the_same_memory_limit(host_oom_run):
    """repro.py sets the reduction's --memory-limit before it calls the backend: alone it
    reproduces (the CPU allocator's "can't allocate memory" is an OOM there too), and the
    eager control under the same limit is FIXED."""
    script = (host_oom_run / "repro.py").read_text()
    assert "MEMORY_LIMIT_MB = 6000" in script and "6000 MiB of address space (RLIMIT_AS)" in script
    assert "under a 6000 MiB address-space limit (`--memory-limit`" in (host_oom_run / "report.md").read_text()
    assert summary(host_oom_run)["repro_alone"]["status"] == "REPRODUCED"
    r = run_repro(host_oom_run)
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCED: ") and "allocate" in r.stdout, r.stdout + r.stderr
    r = run_repro(host_oom_run, backend="eager")
    assert r.returncode == 0 and r.stdout.startswith("FIXED: "), r.stdout + r.stderr


def _run_script_without_resource(folder: Path) -> subprocess.CompletedProcess[str]:
    """repro.py as on a platform with no `resource` module (Windows)."""
    run = ("import runpy, sys; sys.modules['resource'] = None; sys.argv = ['repro.py']; "
           "runpy.run_path('repro.py', run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRTMIN_BACKEND")}
    return subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=600, env=env,
                          cwd=folder)


def test_host_oom_repro_that_cannot_set_the_limit_is_skipped(host_oom_run, tmp_path):
    """Unlimited, the bug would pass as FIXED: where the limit cannot be set (no `resource`
    module) or is below what the script maps before the call, it cannot judge: SKIPPED."""
    r = _run_script_without_resource(host_oom_run)
    assert r.returncode == 2 and r.stdout.startswith("SKIPPED: ") and "no resource module" in r.stdout, \
        r.stdout + r.stderr
    low = tmp_path / "low"
    shutil.copytree(host_oom_run, low)
    script = low / "repro.py"
    script.write_text(script.read_text().replace("MEMORY_LIMIT_MB = 6000", "MEMORY_LIMIT_MB = 64"))
    r = run_repro(low)
    assert r.returncode == 2 and "set MEMORY_LIMIT_MB to at least" in r.stdout, r.stdout + r.stderr


def test_flaky_compiler_is_measured_and_reduced(host_program, tmp_path, monkeypatch):
    monkeypatch.setenv("TRTMIN_TEST_STATE", str(tmp_path))
    model, inputs = host_program
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash",
                     "--backend", plugin("flaky_crash_on_tanh"), "--repeat", "4")
    assert r.returncode == 1 and "in 2 of 4 runs" in r.stdout, r.stdout + r.stderr[-1000:]
    out = tmp_path / "out"
    r = run_cli(*reduce_args(model, inputs, out, "crash", "flaky_crash_on_tanh", "--repeat", "4", "--no-verify"))
    assert r.returncode == 0, r.stderr[-2000:]
    s = summary(out)
    assert s["flakiness"] == {"repeat": 4, "original_failures": 2, "final_failures": 2, "min_failures": 1}
    assert s["final_nodes"] == 1 and "tanh" in (out / "repro.py").read_text()
    # report.md says so: repro.py judges one run, which passed half the time
    assert "**Flaky:** the original program failed 2 of 4 runs, the reduced program 2 of 4. `repro.py` judges " \
           "one run: run it several times" in (out / "report.md").read_text()
    # each candidate's 4 runs are journaled: a resumed run replays the same counts
    records = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()[1:]]
    runs = [r["runs"] for r in records if "runs" in r]
    assert runs and all(len(each) == 4 for each in runs), records[:2]
    from minimize.emit.report import _flaky_section  # failing every run, then less: flaky too
    assert "**Flaky:**" in _flaky_section({"flakiness": {"repeat": 4, "original_failures": 4, "final_failures": 2}})
    # an original that fails every run holds every candidate to that (another, flaky bug of
    # the same signature must not pass as easily)
    r = run_cli_here(*reduce_args(model, inputs, tmp_path / "always", "crash", "crash_on_sin", "--repeat", "2",
                                  "--no-verify"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert summary(tmp_path / "always")["flakiness"]["min_failures"] == 2
    assert "**Flaky:**" not in (tmp_path / "always" / "report.md").read_text()  # it failed every run
    # more than the original's failures: 28 calls rejected every candidate, then "1-minimal"
    r = run_cli_here(*reduce_args(model, inputs, tmp_path / "strict", "crash", "flaky_crash_on_tanh", "--repeat", "4",
                                  "--min-failures", "4", "--no-verify"))
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        "error: the original fails 2 of 4 runs, fewer than --min-failures 4: no candidate would be kept; pass "
        "--min-failures 2 or less"), r.stderr[-2000:]
    assert not (tmp_path / "strict" / "repro.py").exists()


def _start(args: list[str]) -> subprocess.Popen:
    """The CLI as a terminal starts it: under nohup (SIGHUP ignored, which trtmin keeps
    ignored, and children inherit) the SIGHUP case would test nohup, not trtmin."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "minimize.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))


def _wait_for_journal(out: Path, lines: int, proc: subprocess.Popen, limit: float = 300) -> None:
    journal = out / "journal.jsonl"
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= lines:
            return
        time.sleep(0.2)
    raise AssertionError(f"the journal did not reach {lines} lines")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_interrupted_run_resumes_to_the_same_repro(host_program, clean_mismatch_run, tmp_path, how):
    model, inputs = host_program
    args = reduce_args(model, inputs, tmp_path, "mismatch", "mismatch_mul_exp", "--no-verify")  # as clean_mismatch_run
    force = ()
    if how == signal.SIGTERM:  # with --force over a run made otherwise: its results stay, and are said to be its
        from oracles.out_folder import header_digest
        for name in ("repro.py", "report.md"):
            shutil.copy(clean_mismatch_run / name, tmp_path / name)
        earlier = json.loads((clean_mismatch_run / "journal.jsonl").read_text().splitlines()[0])
        earlier["header"]["options"]["timeout"] = 60.0
        (tmp_path / "journal.jsonl").write_text(json.dumps(earlier) + "\n")
        (tmp_path / "summary.json").write_text(json.dumps({**json.loads((clean_mismatch_run / "summary.json").read_text()),
                                                           "journal_header_sha256": header_digest(json.dumps(earlier))}))
        for name in ("repro.py", "report.md", "summary.json"):  # made a minute ago, as an earlier run's are
            os.utime(tmp_path / name, (time.time() - 60, time.time() - 60))
        force = ("--force",)
    proc = _start([*args, *force])
    _wait_for_journal(tmp_path, 4, proc)  # the header and 3 of the 6 verdicts: mid-reduction
    proc.send_signal(how)
    _, err = proc.communicate(timeout=120)
    if how != signal.SIGKILL:  # a closed terminal (SIGHUP) too: it had ended with no word, its state left in /tmp
        assert proc.returncode == 128 + how and "--resume" in err  # 143, 129: the signal's code, as a shell's
    if force:  # the earlier run's files this one has not written yet (a late signal finds repro.py rewritten)
        kept = sorted(n for n in ("repro.py", "report.md", "summary.json") if (tmp_path / n).stat().st_mtime < time.time() - 30)
        verb = "are" if len(kept) > 1 else "is"
        assert kept and f"({', '.join(kept)} there {verb} an earlier run's until this one ends)" in err, (kept, err)
    # Nothing is half-written: a repro.py, if the signal came that late, is a whole one.
    if (tmp_path / "repro.py").exists():
        compile((tmp_path / "repro.py").read_text(), "repro.py", "exec")
    assert run_cli_here(*args).returncode == 2  # the folder holds a run: refused without --resume
    r = run_cli(*args, "--resume")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "repro.py").read_bytes() == (clean_mismatch_run / "repro.py").read_bytes()
    assert summary(tmp_path) == summary(clean_mismatch_run)
    resumed = json.loads((tmp_path / "summary.json").read_text())
    replayed = resumed["timing"]["replayed_verdicts"]
    assert replayed >= 3 - (how == signal.SIGKILL), replayed  # said, beside this run's evaluations (a kill may tear one)
    # the whole run's time: the first session's (up to its last verdict) in summary.json, and on
    # screen with this command's, which is no less than the done: line's
    assert resumed["timing"]["sessions"] == 2 and resumed["timing"]["earlier_sessions_seconds"] > 0, resumed["timing"]
    done = int(re.search(r"\ndone: .* in \d+ oracle calls, (\d+) s", r.stderr).group(1))
    in_all = int(re.search(r"\nthe run's 2 sessions with verdicts: (\d+) s in all, each earlier one to "
                           r"its last verdict; ", r.stderr).group(1))
    assert in_all >= done, r.stderr[-2000:]
    assert f"last verdict; {replayed} verdict{'s' if replayed != 1 else ''} replayed from the journal" in r.stderr  # "1 verdict"


def test_a_verdict_is_journaled_as_it_lands_not_when_its_batch_ends(host_program, tmp_path):
    """With --jobs 2 the original's run and localization's (every value an output, here a
    minute's compile) are one batch: the original's verdict was journaled only when the
    slow one ended, so a stop meanwhile said "before the first verdict: nothing to resume"
    and the resume compiled the original again (a determinism trial)."""
    model, inputs = host_program
    args = reduce_args(model, inputs, tmp_path, "mismatch", "mismatch_mul_exp_slow_when_localizing", "--no-verify",
                       "--jobs", "2")
    proc = _start(args)
    _wait_for_journal(tmp_path, 2, proc, limit=45)  # the original's verdict, while the other sleeps its minute
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "progress is saved; continue with the same command and --resume" in err, \
        err[-2000:]
    records = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()[1:]]
    assert records and records[0]["runs"][0]["kind"] == "mismatch", records  # the original's, kept


def test_a_run_stopped_before_its_first_verdict_leaves_the_folder_to_the_same_command(host_program, tmp_path):
    """Stopped while the original's first compile is out (here a hang that would take the
    whole --timeout): it says there is nothing to resume, not that progress is saved, and
    the same command, without --resume or --force, may run in the folder again."""
    from minimize.emit.out_dir import check_out_dir
    model, inputs = host_program
    out = tmp_path / "out"
    proc = _start(reduce_args(model, inputs, out, "hang", "hang_on_tanh", "--timeout", "120"))
    _wait_for_journal(out, 1, proc)  # the header: the run holds the folder, no verdict yet
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "before the first verdict: nothing to resume" in err, err[-2000:]
    assert "progress is saved" not in err
    check_out_dir(out, resume=False, force=False)  # not "holds an interrupted run"


def test_a_force_stopped_before_its_first_verdict_gives_the_earlier_run_back(host_program, clean_mismatch_run,
                                                                                tmp_path):
    """--force over a finished run, stopped while the original's first compile is out: it
    replaced nothing yet, so the earlier run's journal is back (its outputs stay its own for
    `repros add`), not a header-only one that made the folder "hold an interrupted run"."""
    model, inputs = host_program
    out = tmp_path / "out"
    shutil.copytree(clean_mismatch_run, out)
    earlier = (out / "journal.jsonl").read_bytes()
    proc = _start(reduce_args(model, inputs, out, "hang", "hang_on_tanh", "--timeout", "120", "--force"))
    deadline = time.monotonic() + 300
    while (out / "journal.jsonl").read_bytes() == earlier:  # this run's header, no verdict yet
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "before the first verdict: nothing to resume" in err, err[-2000:]
    assert (out / "journal.jsonl").read_bytes() == earlier
    matched = run_cli("repros", "match", str(out))
    assert "an earlier run's" not in matched.stdout + matched.stderr, matched.stdout + matched.stderr


def test_a_run_stopped_while_its_emitted_script_runs_says_its_results_are_written(host_program, tmp_path):
    """Stopped while the --emit script ran alone: summary.json was whole and named the run, so
    "progress is saved; continue with --resume" and then "holds a finished run" disagreed."""
    model, inputs = host_program
    proc = _start(reduce_args(model, inputs, tmp_path, "mismatch", "mismatch_mul_exp", "--emit", "inductor"))
    deadline = time.monotonic() + 600
    while not (tmp_path / "repro_inductor.py").exists():  # written, then run alone: a compile of seconds
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    said = "interrupted after the results were written (repro.py, report.md, summary.json); the same command " \
           "with --resume writes them again, running the --emit scripts alone too"
    assert proc.returncode == 130 and said in " ".join(err.split()), err[-2000:]
    assert "progress is saved" not in err


def _descendants(pid: int) -> list[int]:
    try:
        kids = [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return [d for k in kids for d in (k, *_descendants(k))]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_repro_py_killed_from_outside_while_checked_is_run_again(host_program, tmp_path):
    """A kill -9 from outside (the OOM killer, a user) of repro.py's check run ended as ERROR,
    "trtmin's bug: please report it"; as a worker's job, it is run once more."""
    model, inputs = host_program
    proc = _start(reduce_args(model, inputs, tmp_path, "mismatch", "mismatch_mul_exp"))
    script, deadline, killed = str(tmp_path / "repro.py"), time.monotonic() + 600, None
    while killed is None:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        for pid in _descendants(proc.pid):
            try:
                words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if words[-2:-1] == [script.encode()] or words[-1:] == [script.encode()]:
                os.kill(pid, signal.SIGKILL)  # at once: it runs for seconds (torch's import, a compile)
                killed = pid
                break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=600)
    alone = json.loads((tmp_path / "summary.json").read_text())["repro_alone"]
    assert proc.returncode == 0 and (alone["status"], alone["exit"]) == ("REPRODUCED", 1), (alone, err[-2000:])


def test_a_killed_runs_state_is_removed_by_the_next_run(tmp_path, monkeypatch):
    """kill -9 leaves the state folder (the eager value of every node, megabytes) in the
    temporary folder; the next run removes it, and only it: not a live run's."""
    import tempfile

    from minimize.run.workers import STATE_PREFIX, remove_stale_state
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{STATE_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{STATE_PREFIX}{os.getpid()}-def"
    older = tmp_path / f"{STATE_PREFIX}xyz"  # named before the pid was in the name: cannot tell, kept
    for d in (stale, live, older):
        d.mkdir()
        (d / "values.pt").write_bytes(b"0" * 1000)
    assert remove_stale_state() == [stale]
    assert not stale.exists() and live.exists() and older.exists()
    # and its workers' log folder (an adversarial trial counted 70 left in /tmp)
    from oracles.worker import WORKERS_PREFIX
    logs, live_logs = tmp_path / f"{WORKERS_PREFIX}{dead.pid}-ghi", tmp_path / f"{WORKERS_PREFIX}{os.getpid()}-jkl"
    for d in (logs, live_logs):
        d.mkdir()
    assert remove_stale_state() == [logs] and live_logs.exists()
    # a run killed a moment ago is a zombie until its parent reaps it: dead, not running
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and running(zombie.pid):  # until it is a zombie, not yet reaped
        time.sleep(0.05)
    killed = tmp_path / f"{STATE_PREFIX}{zombie.pid}-zzz"
    killed.mkdir()
    assert remove_stale_state() == [killed]
    zombie.wait()


def test_a_full_disk_stops_the_run_and_is_no_verdict(host_program, tmp_path, monkeypatch):
    """A compile that meets a full disk (ENOSPC) was journaled as "fails otherwise": every
    later candidate too, and the run ended unreduced, calling the program 1-minimal; --resume
    replayed it all. Now the run stops in one line, naming the disk, before the journal keeps
    it, and --resume once space is freed reduces to the bug's core."""
    monkeypatch.setenv("TRTMIN_TEST_STATE", str(tmp_path))
    model, inputs = host_program
    out = tmp_path / "out"
    r = run_cli_here(*reduce_args(model, inputs, out, "crash", "crash_on_sin_then_disk_full", "--no-verify"))
    assert r.returncode == 2 and "error: a disk is full (" in r.stderr and "goes on with --resume" in r.stderr, r.stderr
    assert "No space left on device" not in (out / "journal.jsonl").read_text()
    (tmp_path / "freed").touch()
    r = run_cli_here(*reduce_args(model, inputs, out, "crash", "crash_on_sin_then_disk_full", "--no-verify",
                                  "--resume"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert summary(out)["final_nodes"] == 1 and "aten.sin.default" in (out / "repro.py").read_text()


def test_an_interrupted_force_run_is_told_from_the_finished_run_it_replaces(host_program, clean_mismatch_run,
                                                                             tmp_path):
    """--force over a finished run, stopped before its first verdict, leaves the earlier
    run's results beside its own journal. With the same options both headers were the same
    line, so the folder read as finished ("pass --force") and `repros add` saved the earlier
    run as though it were this one. Each journal now names its run: the folder holds an
    interrupted run, `repros add` refuses it, and --resume starts it afresh over them."""
    out = tmp_path / "out"
    shutil.copytree(clean_mismatch_run, out)
    header = json.loads((out / "journal.jsonl").read_text().splitlines()[0])
    header["header"]["run_id"] = "0" * 32  # what the --force run wrote first, before it was stopped
    (out / "journal.jsonl").write_text(json.dumps(header, sort_keys=True) + "\n")
    model, inputs = host_program
    args = reduce_args(model, inputs, out, "mismatch", "mismatch_mul_exp", "--no-verify")
    again = run_cli_here(*args)
    assert again.returncode == 2 and "holds an interrupted run; pass --resume" in again.stderr, again.stderr
    add = run_cli_here("repros", "add", str(out), "--name", "x", "--suite", str(tmp_path / "suite"))
    assert add.returncode == 2 and "are an earlier run's than journal.jsonl" in add.stderr, add.stderr
    r = run_cli(*args, "--resume")
    assert r.returncode == 0 and "starting the run afresh" in r.stderr, r.stderr[-2000:]
    assert summary(out) == summary(clean_mismatch_run)
    assert run_cli_here("repros", "add", str(out), "--name", "x", "--suite", str(tmp_path / "suite")).returncode == 0
    run_ids = {json.loads((d / "journal.jsonl").read_text().splitlines()[0])["header"]["run_id"]
               for d in (out, clean_mismatch_run)}
    assert len(run_ids) == 2 and "0" * 32 not in run_ids  # the same options: two runs, each named
