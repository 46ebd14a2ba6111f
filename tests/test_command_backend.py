"""--backend 'cmd:...': an external command as the compiler, run on each candidate exported
to {model} (tests/plugins/command_runner.py plays a runtime outside trtmin's Python)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import plugin
from tests.helpers import ROOT, run_cli, run_cli_here, run_repro, running

RUNNER = ROOT / "tests" / "plugins" / "command_runner.py"


def command(mode: str, outputs: bool = False) -> str:
    return f"cmd:{sys.executable} {RUNNER} {mode} {{model}} {{inputs}}" + (" {outputs}" if outputs else "")


def reduce(model: Path, inputs: Path, out: Path, oracle: str, backend: str, *extra: str) -> dict:
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", oracle, "--backend", backend,
                "--out", str(out), *extra)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def ops_in(script: Path) -> list[str]:
    body = script.read_text().split("class Repro")[1].split("def make_inputs")[0]
    return [line.split("torch.ops.aten.")[1].split("(")[0] for line in body.splitlines() if "torch.ops.aten." in line]


def test_a_failing_command_is_reduced_and_its_repro_runs_the_copy_of_its_file(host_program, tmp_path):
    """A command that exits non-zero is reduced to the node it fails on. The runner script
    the command names is the repro's to run, as plugin.py is: it is copied beside repro.py
    (and into the suite with it), and run from there where the original is gone (a
    maintainer's machine). Gone from both, the script cannot run here (SKIPPED), which is
    no news of the bug (it said CHANGED)."""
    model, inputs = host_program
    runner = tmp_path / "my runner.py"
    runner.write_bytes(RUNNER.read_bytes())
    summary = reduce(model, inputs, tmp_path / "out", "crash",
                     f"cmd:{sys.executable} '{runner}' crash_on_sin {{model}} {{inputs}}")
    assert ops_in(tmp_path / "out" / "repro.py") == ["sin.default"]
    assert summary["signature"] == "crash: CommandFailed: exit <n>: RuntimeError: sin is not supported by this runtime"
    assert summary["repro_alone"]["status"] == "REPRODUCED"
    # titles show the runner by its file's name, as a plugin's: no user's folder in an upstream issue
    title = (tmp_path / "out" / "report.md").read_text().splitlines()[0]
    docstring = (tmp_path / "out" / "repro.py").read_text().split('"""')[1]
    assert "'my runner.py' crash_on_sin {model} {inputs}" in title and str(tmp_path) not in title + docstring, title
    r = run_repro(tmp_path / "out")  # the script runs the same command, from its own folder
    assert r.returncode == 1 and "REPRODUCED: CommandFailed: exit 1: RuntimeError: sin is not" in r.stdout, r.stdout
    r = run_repro(tmp_path / "out", backend="eager")
    assert r.returncode == 0 and r.stdout.startswith("FIXED"), r.stdout
    copy = tmp_path / "out" / "repro_cmd_my_runner.py"
    assert copy.read_bytes() == RUNNER.read_bytes() and copy.name in summary["files"]
    assert "`repro_cmd_my_runner.py` (a copy of what the command runs)" in (tmp_path / "out" / "report.md").read_text()
    runner.unlink()
    r = run_repro(tmp_path / "out")
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCED: CommandFailed"), r.stdout + r.stderr[-2000:]
    suite = tmp_path / "suite"
    added = run_cli("repros", "add", str(tmp_path / "out"), "--name", "sin_runtime", "--suite", str(suite),
                    "--title", "the runner fails on sin")
    assert added.returncode == 0, added.stderr
    assert 'title = "the runner fails on sin"' in (suite / "sin_runtime" / "manifest.toml").read_text()
    assert (suite / "sin_runtime" / copy.name).read_bytes() == RUNNER.read_bytes()
    copy.unlink()
    r = run_repro(tmp_path / "out")
    assert r.returncode == 2 and r.stdout.startswith("SKIPPED: cannot run: the backend cannot be loaded: "
                                                     "FileNotFoundError: ") and "my runner.py" in r.stdout, r.stdout


def test_a_commands_outputs_are_compared_with_eager(host_program, tmp_path):
    """{outputs}: the mismatch oracle, its localization run included (every value an output)."""
    model, inputs = host_program
    summary = reduce(model, inputs, tmp_path, "mismatch", command("off_on_sin", outputs=True))
    assert ops_in(tmp_path / "repro.py") == ["sin.default"] and summary["repro_alone"]["status"] == "REPRODUCED"
    assert summary["diagnosis"]["first_off_value"].startswith("`sin`"), summary["diagnosis"]


def test_outputs_not_saved_as_the_outputs_in_order_are_the_commands_error(host_program, tmp_path):
    """A dict, or a file torch.load cannot read, in {outputs} is the command's mistake: said
    as such, not a mismatch of the compiler ("backend returned dict, not a tensor") nor a
    bare "KeyError: <n>" from torch.load; by check as by reduce, exit 2 (check said "does
    not fail ..., but: CRASH" and exited 0)."""
    model, inputs = host_program
    for mode, said in {"dict_on_sin": "but {outputs} holds a dict, not the outputs in order",
                       "garbage_on_sin": "but torch.load cannot read {outputs}"}.items():
        r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                         "--backend", command(mode, outputs=True))
        assert r.returncode == 2 and "does not fail" not in r.stdout, r.stdout + r.stderr
        assert f"the command exits 0 (it ran), {said}" in " ".join(r.stderr.split()), r.stderr
        assert "that is the command's mistake, no compiler's bug" in " ".join(r.stderr.split()), r.stderr


def test_a_command_that_hangs_dies_with_the_worker_killed_for_it(host_program, tmp_path):
    model, inputs = host_program
    os.environ["TRTMIN_TEST_STATE"] = str(tmp_path)
    try:
        # 5 s: the runner's own start-up counts; it imports no torch to hang (tests/plugins/command_runner.py)
        r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "hang", "--timeout", "5",
                    "--backend", command("hang_on_sin"))
    finally:
        del os.environ["TRTMIN_TEST_STATE"]
    assert r.returncode == 1 and "HANG" in r.stdout, r.stdout + r.stderr
    pid = int((tmp_path / "hung.pid").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and running(pid):
        time.sleep(0.2)
    assert not running(pid), f"the command {pid} outlived its worker"
    # exported into the run's own scratch folder, which goes with the run even where a
    # worker is killed before it can clean up (in the middle of an export, of an ONNX build)
    scratch = Path((tmp_path / "hung.model").read_text()).parent.parent
    assert scratch.name == "scratch" and scratch.parent.name.startswith("trtmin-state-"), scratch
    assert not scratch.parent.exists()


def _through_a_shell(tmp_path: Path) -> str:
    """A shell script that runs the runner as its child (not exec'd): a command with children."""
    script = tmp_path / "run it.sh"
    script.write_text(f'#!/bin/sh\n"{sys.executable}" "{RUNNER}" "$@"\nexit $?\n')
    script.chmod(0o755)
    return f"cmd:'{script}' hang_on_sin {{model}} {{inputs}}"


def _gone(state: Path) -> None:
    """The hung command is dead (not left running under init) and its exported files removed."""
    pid = int((state / "hung.pid").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and running(pid):
        time.sleep(0.2)
    assert not running(pid), f"the command's child {pid} outlived the process that ran the command"
    assert not Path((state / "hung.model").read_text()).parent.exists(), "the exported files were left behind"


def test_a_hung_commands_children_die_with_the_worker(host_program, tmp_path):
    model, inputs = host_program
    os.environ["TRTMIN_TEST_STATE"] = str(tmp_path)
    try:
        r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "hang", "--timeout", "5",
                    "--backend", _through_a_shell(tmp_path))
    finally:
        del os.environ["TRTMIN_TEST_STATE"]
    assert r.returncode == 1 and "HANG" in r.stdout, r.stdout + r.stderr
    _gone(tmp_path)


def test_a_hang_repros_command_dies_with_its_child(host_program, tmp_path):
    """repro.py runs a hang in a child it kills at the timeout: the command goes with it."""
    model, inputs = host_program
    os.environ["TRTMIN_TEST_STATE"] = str(tmp_path)
    try:
        # a timeout the command's start-up (no torch to import to hang) stays well within
        reduce(model, inputs, tmp_path / "out", "hang", _through_a_shell(tmp_path), "--timeout", "5",
               "--jobs", "2", "--no-verify")  # two hangs waited out at once: the result is the same for any --jobs
        assert ops_in(tmp_path / "out" / "repro.py") == ["sin.default"]
        (tmp_path / "hung.pid").unlink()
        r = run_repro(tmp_path / "out")
    finally:
        del os.environ["TRTMIN_TEST_STATE"]
    assert r.returncode == 1 and "REPRODUCED" in r.stdout, r.stdout + r.stderr
    _gone(tmp_path)


def test_ctrl_c_in_a_terminal_ends_a_hung_command_too(host_program, tmp_path):
    """A terminal's Ctrl-C signals the whole foreground group: trtmin, its workers and the
    launcher of the command (oracles/supervise.py), whose KeyboardInterrupt left the hung
    command running under init, holding its memory (a GPU's, on a GPU machine)."""
    model, inputs = host_program
    proc = subprocess.Popen([sys.executable, "-m", "minimize.cli", "check", str(model), "--inputs", str(inputs),
                             "--oracle", "hang", "--timeout", "60", "--backend", command("hang_on_sin")],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TRTMIN_TEST_STATE": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (tmp_path / "hung.pid").exists():
        time.sleep(0.1)
    assert (tmp_path / "hung.pid").exists(), "the command never started"
    os.killpg(proc.pid, signal.SIGINT)  # as the terminal sends it
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    _gone(tmp_path)



def test_bad_commands_are_one_line_errors(host_program, tmp_path):
    model, inputs = host_program
    cases = {
        command("off_on_sin"): "--oracle mismatch compares the program's outputs, and the command has no {outputs}",
        f"cmd:{sys.executable} {RUNNER} crash_on_sin": "the command must take the candidate program as {model}",
        "cmd:python 'run.py {model}": "cannot be split like a shell line",
        "cmd:": "names no command",
        "cmd:pyhton run.py {model}": "pyhton, the command's program, is not found",
        # shell syntax: exec would take VAR=1 for the program and pass > log.txt on as arguments
        "cmd:VAR=1 python run.py {model}": "VAR=1 sets a variable, as a shell would; the command runs without a shell",
        "cmd:python run.py {model} > log.txt": "'>' is shell syntax, which would reach the program as an argument",
        "cmd:python run.py {model} 2>/dev/null": "'2>' is shell syntax",
        "cmd:python run.py {model} | tee log": "'|' is shell syntax",
        # a mistyped placeholder reaches the program as written: the runner reads a file named {input}
        "cmd:python run.py {modle} {inputs}": "{modle} is no placeholder of trtmin's; did you mean {model}?",
        "cmd:python run.py {model} {input}": "{input} is no placeholder of trtmin's; did you mean {inputs}?",
    }
    for backend, said in cases.items():
        r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", backend,
                         "--out", str(tmp_path / "out"))
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, (backend, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "out" / "journal.jsonl").exists()


def test_shell_operators_are_refused_outside_quotes_alone():
    """A quoted '>' is an argument of the program's (the diff review: `--cmp '>'` was
    refused); &>, 1> and |tee with no space are redirections all the same."""
    from oracles.command_line import parse_command
    from oracles.errors import TrtminError
    for fine in ("cmd:python run.py --cmp '>' {model}", 'cmd:python run.py --filter "<=0.5" --sep ";" {model}',
                 "cmd:sh -c 'python run.py \"$1\" > /tmp/log' sh {model}", "cmd:python run.py a\\>b {model}",
                 # braces of the user's own (the review): a shell's ${out}, a format, a word near a placeholder
                 "cmd:sh -c 'python run.py \"$1\" --save ${output}' sh {model}", "cmd:python run.py {model} {node}_{index}",
                 "cmd:python run.py {model} --tag {modelname}"):
        parse_command(fine)
    for bad, operator in (("&>log", "&>"), ("1>log", "1>"), ("|tee x", "|"), ("2>&1", "2>&1"), ("&& echo", "&&")):
        with pytest.raises(TrtminError, match=f"'{re.escape(operator)}' is shell syntax"):
            parse_command(f"cmd:python run.py {{model}} {bad}")


@pytest.mark.parametrize("kind", ["command", "plugin"])
def test_a_command_or_plugin_that_fails_on_any_program_is_no_bug_to_reduce(host_program, tmp_path, kind):
    """A runner or plugin that fails on its own (its arguments unpacked wrongly, a device it
    cannot open) reduced to a confident one-node "bug". It fails the same way on a one-op
    program (x + 1), run once in a worker, so check and reduce refuse it; one whose failure
    needs the model's sin does not."""
    model, inputs = host_program
    backend, whose, trigger = ((command("always_fails"), "the command", command("crash_on_sin")) if kind == "command"
                               else (plugin("fails_on_any_program"), "plugin planted.py:fails_on_any_program",
                                     plugin("crash_on_sin")))
    for cmd in ("check", "reduce"):  # in this process: what is tested is the refusal's words and code
        r = run_cli_here(cmd, str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", backend,
                    *(["--out", str(tmp_path / "out")] if cmd == "reduce" else []))
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and f"{whose} fails the same way on one-op programs (x + 1, x * 2): " in said, \
            r.stderr
        assert "cannot open /dev/npu0" in said and "no compiler's bug" in said and "Traceback" not in said, r.stderr
    assert not (tmp_path / "out" / "repro.py").exists()
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", trigger)
    assert r.returncode == 1 and "FAILS (crash)" in r.stdout and "sin" in r.stdout, r.stdout + r.stderr
    if kind == "plugin":  # a bug of add's own fails on x + 1 too, not on x * 2: a bug, not the plugin's mistake
        r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                         plugin("crash_on_add"))
        assert r.returncode == 1 and "no converter for aten.add.Tensor" in r.stdout, r.stdout + r.stderr


def test_a_plugin_that_hangs_on_any_program_is_no_bug_to_reduce(host_program, tmp_path):
    """A plugin that waits for ever whatever the program reduced to a one-node "hang on
    cpu: linear.default", REPRODUCED: the one-op controls are a hang's too."""
    model, inputs = host_program
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "hang", "--timeout", "3",
                     "--backend", plugin("hangs_on_any_program"), "--out", str(tmp_path / "out"))
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "plugin planted.py:hangs_on_any_program fails the same way on one-op programs (x + 1, " \
        "x * 2): " in said and "no compiler's bug" in said, r.stderr
    assert not (tmp_path / "out" / "repro.py").exists()


def test_a_command_that_writes_no_outputs_is_no_bug_to_reduce(host_program, tmp_path):
    """Exit 0 without {outputs} failed every call: under --oracle crash the reduction took
    the runner's mistake for the bug."""
    model, inputs = host_program
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                     command("no_outputs", outputs=True), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "the command exits 0 (it ran), but without writing {outputs}" in r.stderr, r.stderr
    assert not (tmp_path / "out" / "repro.py").exists()
    # check says the same, where it said "FAILS (crash)": in CI, a broken harness passed for a bug
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                     command("no_outputs", outputs=True))
    assert r.returncode == 2 and "the command exits 0 (it ran), but without writing {outputs}" in r.stderr, r.stderr
    assert "FAILS" not in r.stdout


def test_the_command_runs_from_the_folder_of_its_files_as_in_repro_py(host_program):
    """Workers ran the command from trtmin's folder, repro.py from its own: a runner that
    reads relative paths passed in one and failed in the other."""
    model, inputs = host_program
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                     command("elsewhere"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_command_repros_first_seen_is_torch_only():
    """The compiler is outside this Python: its versions are not this Python's executorch's."""
    from repros.suite import packages_of
    assert packages_of(command("crash_on_sin")) == ("torch",)



def test_each_file_the_command_names_gets_a_copy_of_its_own(tmp_path, monkeypatch):
    """Two runners named run.py, and one named 2_run.py: the second run.py's fallback name
    was the other one's, and that one was never copied."""
    from oracles.backends.command import CommandBackend
    for sub, name in (("a", "run.py"), ("c", "2_run.py"), ("b", "run.py")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / name).write_text(f"# {sub}\n")
    monkeypatch.chdir(tmp_path)
    copies = CommandBackend(f"cmd:{sys.executable} a/run.py c/2_run.py b/run.py {{model}}").copied_files()
    assert sorted(p.parent.name for p in copies.values()) == ["a", "b", "c"], copies


def test_a_runner_script_that_is_the_commands_program_is_copied_too(host_program, tmp_path):
    """`cmd:./run.sh {model} ...`: the script is the command's program, not an argument; it
    was never copied, and the repro was SKIPPED once it was gone (a system program such as
    /usr/bin/env, no script, is not copied). Its error holds quotes and backslashes: the
    verdict line is in repro.py's docstring, where three quotes ended it and '\\x' without
    hex digits was a SyntaxError (a script that exits 1 with no verdict)."""
    model, inputs = host_program
    runner = tmp_path / "run.sh"
    runner.write_text(f'#!/bin/sh\nexec {sys.executable} {RUNNER} crash_on_sin_odd_text "$@"\n')
    runner.chmod(0o755)
    summary = reduce(model, inputs, tmp_path / "out", "crash", f"cmd:{runner} {{model}} {{inputs}}", "--no-verify")
    assert r'"""sin""" at C:\xla\new\N' in (tmp_path / "out" / "report.md").read_text()
    copy = tmp_path / "out" / "repro_cmd_run.sh"
    assert copy.name in summary["files"] and os.access(copy, os.X_OK)
    runner.unlink()
    r = run_repro(tmp_path / "out")
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCED: CommandFailed: exit 1: RuntimeError: sin is not"), \
        r.stdout + r.stderr[-2000:]
    from oracles.backends.command import CommandBackend
    assert CommandBackend("cmd:/usr/bin/env python3 {model}").copied_files() == {}


def test_a_backend_spec_is_parsed_once_into_what_it_is():
    """oracles/backend_names.parse_backend: a command line holding 'x.py:y' is a command,
    not a plugin; a plugin file shows by its name; a module plugin has no file."""
    from oracles.backend_names import parse_backend
    cmd = parse_backend("cmd:python /home/me/run.py:main {model}")
    assert cmd.kind == "command" and cmd.plugin_file is None and cmd.shown == cmd.text
    plugin = parse_backend("/home/me/my_backend.py:compile_it")
    assert (plugin.kind, plugin.target, plugin.function) == ("plugin", "/home/me/my_backend.py", "compile_it")
    assert plugin.plugin_file == Path("/home/me/my_backend.py") and plugin.shown == "my_backend.py:compile_it"
    module = parse_backend("mypkg.backends:compile_it")
    assert module.plugin_file is None and module.shown == "mypkg.backends:compile_it"
    assert parse_backend("executorch:xnnpack").packages(("any",)) == ("torch", "executorch")
    assert module.packages(("any",)) == ("torch", "mypkg")  # a module plugin's compiler: its package
    assert plugin.packages(("any",)) == ("any",)  # a plugin file that is not here: anything it may import


def test_a_stop_signal_the_caller_ignores_stays_ignored_by_the_launcher():
    """nohup or a background job ignores SIGINT and SIGHUP: the command's launcher must not
    stop on them then (an oracle call would end as if killed); it does where they are not."""
    from oracles.supervise import supervised

    for ignored in (True, False):
        proc = subprocess.Popen(supervised("") + ["sleep", "2"],
                                preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == (0 if ignored else 137)


def _group_runs(pgid: int) -> bool:
    """Whether a process of group `pgid` runs (zombies do not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state not in ("Z", "X"):
            return True
    return False


def _under_a_launcher(pid_file: Path, launched: str, then: str) -> list[str]:
    """A Python process that starts a launcher (`launched`: the Popen's argument, as source,
    `supervised(...)` in reach), writes the launcher's pid to `pid_file` whole (by a rename),
    then runs `then`."""
    return [sys.executable, "-c", (
        f"import os, subprocess, sys, time; sys.path.insert(0, {str(ROOT)!r}); from oracles.supervise import supervised; "
        f"p = subprocess.Popen({launched}); open({str(pid_file)!r} + '.tmp', 'w').write(str(p.pid)); "
        f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); {then}")]


def _launcher_and_its_command(pid_file: Path, deadline: float) -> tuple[int, int | None]:
    """The launcher's pid, once written, and its fork's, the command (which leads its group)."""
    while time.monotonic() < deadline and not pid_file.exists():
        time.sleep(0.05)
    launcher, command_pid = int(pid_file.read_text()), None
    while time.monotonic() < deadline and command_pid is None:
        found = subprocess.run(["pgrep", "-P", str(launcher)], capture_output=True, text=True).stdout.split()
        command_pid = int(found[0]) if found else None
    return launcher, command_pid


def test_a_launcher_whose_parent_is_killed_ends_its_command_and_removes_its_folder(tmp_path):
    """kill -9 of the process that started the launcher (a worker ended for --timeout,
    trtmin itself): the command goes, and so does the launcher's folder of exported files,
    which nothing else removes."""
    folder, pid_file = tmp_path / "exported", tmp_path / "launcher.pid"
    folder.mkdir()
    (folder / "model.pt2").write_text("x")
    parent = subprocess.Popen(_under_a_launcher(pid_file, f"supervised({str(folder)!r}) + ['sleep', '300']",
                                                "time.sleep(300)"))
    launcher, command_pid = _launcher_and_its_command(pid_file, time.monotonic() + 30)
    assert command_pid is not None, "the launcher started no command"
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (running(launcher) or _group_runs(command_pid) or folder.exists()):
        time.sleep(0.05)
    assert not running(launcher) and not _group_runs(command_pid) and not folder.exists()


@pytest.mark.parametrize("inner", ["sleep 300", "trap '' TERM; sleep 300"], ids=["ends", "ignores_sigterm"])
def test_a_launcher_inside_a_launchers_group_ends_its_own_command_too(tmp_path, inner):
    """`repros run` stopping a repro (--timeout, its own SIGTERM) ends the repro's process
    group; a cmd: repro.py runs its command under a launcher of its own, in another group,
    which the outer launcher's SIGKILL left running under init with the hung command. The
    outer one sends SIGTERM first, so the inner one ends its group; a command that ignores
    SIGTERM outlives its launcher's wait, and the outer one, its subreaper, kills it."""
    from oracles.supervise import supervised

    pid_file = tmp_path / "inner.pid"
    inner_launcher = _under_a_launcher(pid_file, f"supervised('') + ['sh', '-c', {inner!r}]", "p.wait()")
    outer = subprocess.Popen(supervised("") + inner_launcher, start_new_session=True)
    launcher, command_group = _launcher_and_its_command(pid_file, time.monotonic() + 30)
    assert command_group is not None, "the inner launcher started no command"
    time.sleep(0.3)  # the shell has set its trap
    outer.send_signal(signal.SIGTERM)  # as oracles/script_run.py's _kill_group sends it
    assert outer.wait(timeout=30) == 137
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (running(launcher) or _group_runs(command_group)):
        time.sleep(0.1)
    assert not running(launcher) and not _group_runs(command_group), "the inner command outlived the outer launcher"


def test_a_one_op_control_that_hangs_says_nothing_and_is_ended(host_program):
    """The controls run the command once more each; one that does not end within its time
    (--timeout here, at most ONE_OP_TIMEOUT_S) tells nothing about the failure, and its
    worker is ended with the command (no sleep left behind): the crash on sin is a bug."""
    model, inputs = host_program
    start = time.monotonic()
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--timeout", "5",
                "--backend", command("crash_on_sin_hang_otherwise"))
    assert r.returncode == 1 and "sin is not supported" in r.stdout, r.stdout + r.stderr
    assert time.monotonic() - start < 60
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", "sleep 37.5|crash_on_sin_hang_otherwise"], capture_output=True,
                          text=True).stdout.split()
    assert not left, left


def test_a_commands_outputs_are_this_calls_and_may_be_one_tensor(tmp_path):
    """{outputs} read after the command: a lone tensor saved there is the one output, and a
    run that writes none is the command's mistake, not the answer an earlier call left."""
    import torch

    from oracles.backends.command import CommandFailed, run_command

    class _Doubled(torch.nn.Module):
        def forward(self, x):
            return x * 2

    x = torch.randn(3)
    saves = [sys.executable, "-c", "import sys, torch; torch.save(torch.full((3,), 7.0), sys.argv[1])", "{outputs}"]
    got = run_command(saves, _Doubled(), [x], tmp_path)
    assert len(got) == 1 and torch.equal(got[0], torch.full((3,), 7.0)), got
    writes_none = [sys.executable, "-c", "import sys", "{outputs}"]
    with pytest.raises(CommandFailed, match=r"^exit 0 without writing \{outputs\}"):
        run_command(writes_none, _Doubled(), [x], tmp_path)  # in the folder the call before wrote to


def test_the_shared_command_names_each_path_by_its_last_name():
    """An issue's title and report.md show the command without this machine's folders: a
    path by its last name, an option's value too, a folder's with or without its slash."""
    from oracles.backends.command import CommandBackend
    backend = CommandBackend("cmd:python /home/me/run.py --out=/home/me/o/ --cache=/home/me/c {model} /")
    assert backend.describe_shared() == "cmd:python run.py --out=o --cache=c {model} /"
    assert "/home/me/o/" in backend.describe()  # trtmin's own screen shows it whole


def test_a_command_without_outputs_is_refused_for_either_value_oracle():
    from oracles.backends.command import CommandBackend
    bare, writes = CommandBackend("cmd:python run.py {model}"), CommandBackend("cmd:python run.py {model} {outputs}")
    for oracle in ("mismatch", "nan"):
        said = bare.oracle_problem(oracle)
        assert said and said.startswith(f"--oracle {oracle} compares the program's outputs"), said
        assert writes.oracle_problem(oracle) is None
    assert bare.oracle_problem("crash") is None and bare.oracle_problem("hang") is None


def test_a_failed_commands_words_are_its_exit_or_signal_and_last_line():
    from oracles.backends.command import command_failure
    said = command_failure(3, "loading\n", "warming up\nerror: no kernel for sin\n\n")
    assert said.splitlines()[0] == "exit 3: error: no kernel for sin"  # stderr's last line, over stdout's
    assert command_failure(1, "only stdout\n", "").splitlines()[0] == "exit 1: only stdout"
    assert command_failure(-11, "", "").splitlines()[0] == "killed by SIGSEGV: (it printed nothing)"
    # a runner's start-up noise, then the cause: the whole last lines, within what a verdict keeps
    noisy = "".join(f"W1207 16:{i:02d} torchao: failed to load /venv/lib/ops_{i}.so: undefined symbol\n"
                    for i in range(28)) + "[method.cpp:1480] KernelCall failed in operator aten::convolution.out\nboom\n"
    said = command_failure(1, "", noisy)
    assert len(said) <= 2000 and said.splitlines()[0] == "exit 1: boom", said
    assert said.splitlines()[-2] == "[method.cpp:1480] KernelCall failed in operator aten::convolution.out"
    assert all(line in noisy.splitlines() for line in said.splitlines()[1:]), said  # no line cut
    said = command_failure(1, "", noisy + "x" * 731 + "\n")  # a long last line: in the head, and whole at the end
    assert len(said) <= 2000 and said.endswith("\n" + "x" * 731) and said.startswith("exit 1: xxx"), len(said)
