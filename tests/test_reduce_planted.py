"""End to end: planted bugs in plugin backends reduce to their known minimal cores, and
the emitted repro.py reproduces them alone, in a new process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import plugin, save_program
from tests.helpers import ROOT, run_cli, run_cli_here, run_cli_unread, run_report_snippet, run_repro


def reduce_cli(model: Path, inputs: Path, out: Path, oracle: str, backend: str, *extra: str):
    return reduce_cli_run(model, inputs, out, oracle, backend, *extra)[0]


def reduce_cli_run(model: Path, inputs: Path, out: Path, oracle: str, backend: str, *extra: str):
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", oracle, "--backend", backend,
                "--out", str(out), *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((out / "summary.json").read_text()), r


def ops_in(repro: Path) -> list[str]:
    text = repro.read_text().split("class Repro")[1].split("def make_inputs")[0]
    return sorted(line.split("torch.ops.aten.")[1].split("(")[0] for line in text.splitlines() if "torch.ops.aten." in line)


@pytest.mark.parametrize("oracle,fn,core", [
    ("crash", "crash_on_sin", ["sin.default"]),
    ("mismatch", "mismatch_mul_exp", ["exp.default", "mul.Tensor"]),
    ("nan", "nan_on_rsqrt", ["rsqrt.default"]),
    ("crash", "crash_on_linear", ["linear.default"]),
])
def test_planted_bug_reduces_to_its_core(host_program, tmp_path, oracle, fn, core):
    model, inputs = host_program
    summary = reduce_cli(model, inputs, tmp_path, oracle, plugin(fn))
    assert summary["final_nodes"] == len(core)
    assert summary["original_nodes"] >= 15
    assert ops_in(tmp_path / "repro.py") == core
    assert summary["oracle"] == oracle and summary["signature"].startswith(oracle)
    assert set(summary["passes"]) >= {"check_original", "bisect_window", "delete_chunks"}
    # the per-pass rows, the original's check among them, add up to the calls the report states
    assert sum(s["calls"] for s in summary["passes"].values()) == summary["oracle_calls"], summary["passes"]
    assert (tmp_path / "report.md").read_text().startswith("# ")
    # trtmin ran the script alone at the end, and says so
    assert summary["repro_alone"]["status"] == "REPRODUCED" and summary["repro_alone"]["exit"] == 1
    report = " ".join((tmp_path / "report.md").read_text().split())
    assert "Run alone after the reduction, `python repro.py`" in report
    assert str(ROOT) not in report  # run_cli puts trtmin's checkout on PYTHONPATH: repro.py needs none of it
    assert "printed `REPRODUCED" in report
    # one node left is 1-minimal with nothing to cut; more are by the one-node cuts tried
    assert ("- 1-minimal: a single op is left." if len(core) == 1 else
            "- 1-minimal: no single call node can be cut with the bug still there (each of the") in report, report
    # The script runs alone: it imports torch and the copied plugin, not trtmin.
    assert "minimize" not in (tmp_path / "repro.py").read_text() and (tmp_path / "plugin.py").exists()
    if fn == "crash_on_linear":  # weights stay weights: buffers of Repro, not inputs
        assert "self.register_buffer('l1_weight'" in (tmp_path / "repro.py").read_text()
    # report.md opens with the same graph as eager code, which runs alone and computes what Repro does
    top = (tmp_path / "report.md").read_text().split("**What fails:**")[1]
    assert top.split("```python\n")[0].count("\n") < 4 and top.split("```python\n")[1].startswith("import torch\n")
    s = run_report_snippet(tmp_path)
    assert s.returncode == 0 and "SNIPPET OK" in s.stdout, s.stdout + s.stderr[-2000:]
    if fn == "crash_on_sin":  # alone without trtmin on the path (trtmin's own run above had it), the
        r = run_repro(tmp_path)  # compiler's own error, not torch.compile's wrapper around it
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stdout.startswith("REPRODUCED: RuntimeError: planted converter failure: no converter for aten::sin")
        stack = r.stderr[r.stderr.rindex("Traceback (most recent call last):"):]  # where it failed, for a maintainer
        assert "plugin.py" in stack and "in crash_on_sin" in stack, r.stderr
        assert stack.rstrip().endswith("no converter for aten::sin (node 17)"), r.stderr
        r = run_repro(tmp_path, backend="portable")  # not a switch: said, where it ran the backend as if it were
        assert (r.returncode, r.stdout.strip()) == (2, "SKIPPED: TRTMIN_BACKEND takes eager alone (eager PyTorch for "
                                                       "the backend)"), r.stdout + r.stderr
        # where torch cannot be imported, it cannot run: exit 2, not a traceback's 1 (read as REPRODUCED)
        bare = subprocess.run([sys.executable, "-S", "repro.py"], cwd=tmp_path, capture_output=True, text=True)
        assert bare.returncode == 2 and bare.stdout.startswith("SKIPPED: torch cannot be imported"), bare.stdout
    r = run_repro(tmp_path, backend="eager")
    assert r.returncode == 0 and r.stdout.startswith("FIXED"), r.stdout + r.stderr


def test_check_prints_one_verdict(host_program, tmp_path):
    """In this process (cli.run): the same words and exit codes as `trtmin check`, whose
    process of its own the end-to-end tests run."""
    model, inputs = host_program
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash",
                     "--backend", plugin("crash_on_sin"))
    assert r.returncode == 1 and r.stdout.count("\n") == 1 and "aten::sin" in r.stdout
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "nan",
                     "--backend", plugin("crash_on_sin"))
    # it fails otherwise: exit 3, not 0, so that `check || alert` in CI is not passed by a compiler that crashes
    assert r.returncode == 3 and "does not fail the nan oracle" in r.stdout
    assert r.stdout.rstrip().endswith("; --oracle crash asks about that"), r.stdout  # the oracle for what it did
    # It crashes, but not with what --match asks: said so (it read as if it did not crash)
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--match", "nope",
                     "--backend", plugin("crash_on_sin"))
    assert r.returncode == 3 and "as --match 'nope' asks: CRASH: RuntimeError" in r.stdout, r.stdout
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--match", "nope",
                     "--backend", plugin("crash_on_sin"), "--out", str(tmp_path / "out"))  # and reduce, not "does not fail"
    assert r.returncode == 2 and "the original program fails otherwise than --match 'nope' asks on " in r.stderr, \
        r.stderr
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "nan", "--repeat", "2",
                     "--backend", plugin("crash_on_sin"))  # --repeat keeps the detail a single run gives
    assert r.returncode == 3 and "in any of 2 runs, but 2 fail otherwise: CRASH" in r.stdout, r.stdout


@pytest.fixture(scope="module")
def mismatch_run(host_program, tmp_path_factory) -> Path:
    """The host's planted mul -> exp mismatch reduced once (--jobs 1, --no-verify), for the
    tests that read it: run with nobody reading its screen (`2>&1 | head -1`), which must
    not cut the run short."""
    model, inputs = host_program
    out = tmp_path_factory.mktemp("mismatch") / "out"
    assert run_cli_unread("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                          plugin("mismatch_mul_exp"), "-o", str(out), "--no-verify") == 0  # -o: --out
    return out


def test_same_result_for_any_jobs(host_program, mismatch_run, tmp_path):
    model, inputs = host_program
    one = json.loads((mismatch_run / "summary.json").read_text())  # --jobs 1, its screen unread
    three, run3 = reduce_cli_run(model, inputs, tmp_path / "j3", "mismatch", plugin("mismatch_mul_exp"), "-j", "3",
                                 "--no-verify")
    # More workers than CPU cores is said once, not silently slow (on 2 cores it was 2-3x slower).
    assert ("more workers than this machine's" in run3.stderr) == (3 > (os.cpu_count() or 1)), run3.stderr[-2000:]
    assert "leaked" not in run3.stderr  # workers end at once, yet release what they hold (oracles/worker.py)
    strip = lambda s: {k: v for k, v in s.items() if k not in ("timing", "seconds", "journal_header_sha256")}  # the run's own
    assert strip(one) == strip(three)
    assert (mismatch_run / "repro.py").read_bytes() == (tmp_path / "j3" / "repro.py").read_bytes()
    # Idle workers take the runs the reduction asks next, across passes: the original with
    # the localization run, the localized node's two shortest suffixes, the last deletion;
    # then the generated values at smaller shapes, in one (minimize/search/passes/shapes.py
    # generate_small_values), which need the final graph.
    assert (one["oracle_calls"], one["timing"]["batches"]) == (6, 6)
    assert one["passes"]["generate_small_values"]["calls"] == 1
    assert one["passes"]["generate_values"]["calls"] == one["passes"]["shrink_shapes"]["calls"] == 0
    # At --jobs 3: the original with the localization run; the node alone, alone with generated
    # values, and with the node before it; then the deletion of the localized node, which the
    # speculation ranks as passing (problem.py _prior), beside the pair's generated values and
    # their smaller shapes, which it ranks as failing: three rounds, not four.
    assert (three["timing"]["batches"], three["timing"]["evaluations"]) == (3, 8), three["timing"]


def test_localization_is_only_a_guess(host_program, mismatch_run, tmp_path):
    """The all-outputs run names the planted mismatch's first off value and saves prefix
    probes; turned off, the search is a plain binary search to the same repro."""
    model, inputs = host_program
    guided = json.loads((mismatch_run / "summary.json").read_text())  # localization on, the default
    plain = reduce_cli(model, inputs, tmp_path / "off", "mismatch", plugin("mismatch_mul_exp"), "--no-localize",
                       "--no-verify")
    assert "exp" in guided["diagnosis"]["first_off_value"] and "first_off_value" not in plain["diagnosis"]
    assert "first_off_value_cut" not in guided["diagnosis"]  # the exp named is the one left
    assert guided["passes"]["bisect_window"]["calls"] < plain["passes"]["bisect_window"]["calls"]
    graph = lambda d: (d / "repro.py").read_text().split("class Repro")[1].split("def main")[0]  # noqa: E731
    assert graph(mismatch_run) == graph(tmp_path / "off")  # the header differs: it counts the oracle calls


def test_a_first_value_off_that_the_reduction_cut_is_said_to_be_cut(host_program, tmp_path):
    """Where the backend gets every value wrong once the graph holds tanh, the localization
    run's first value off is the first float value, and the result is tanh alone: report.md
    said both, one contradicting the other."""
    model, inputs = host_program
    summary = reduce_cli(model, inputs, tmp_path, "mismatch", plugin("every_output_off_with_tanh"), "--no-verify")
    assert "tanh" not in summary["diagnosis"]["first_off_value"] and summary["diagnosis"]["first_off_value_cut"]
    assert "tanh" in (tmp_path / "repro.py").read_text().split("class Repro")[1].split("def make_inputs")[0]
    assert "The reduction cut it: the bug shows without it." in (tmp_path / "report.md").read_text()


class DeepHost(torch.nn.Module):
    """34 call nodes: 16 Linear + ReLU, with one sin after the twelfth."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = torch.relu(layer(x))
            if i == 11:
                x = x + torch.sin(x)
        return x


def test_a_crash_search_starts_at_the_node_the_compilers_error_names(tmp_path):
    """A compiler that is an fx Interpreter names the node it failed on; the prefix search
    probes the prefix ending there instead of bisecting, for no extra call, and reaches
    the same repro. --no-localize turns it off."""
    torch.manual_seed(0)
    model, inputs = save_program(DeepHost().eval(), (torch.randn(2, 8),), tmp_path)
    named = reduce_cli(model, inputs, tmp_path / "on", "crash", plugin("converter_fails_on_sin"), "--no-verify")
    plain = reduce_cli(model, inputs, tmp_path / "off", "crash", plugin("converter_fails_on_sin"), "--no-localize",
                       "--no-verify")
    assert named["original_nodes"] == plain["original_nodes"] == 34
    assert ops_in(tmp_path / "on" / "repro.py") == ops_in(tmp_path / "off" / "repro.py") == ["sin.default"]
    assert named["diagnosis"]["named_node"].startswith("`sin`") and "named_node" not in plain["diagnosis"]
    assert "names the node it failed on: `sin`" in (tmp_path / "on" / "report.md").read_text()
    assert named["passes"]["bisect_window"]["calls"] + 3 <= plain["passes"]["bisect_window"]["calls"]
    assert named["oracle_calls"] < plain["oracle_calls"]


def test_plugin_file_gone_cannot_run(host_program, tmp_path):
    """plugin.py is the backend: without it the script cannot run (exit 2, naming it), which is
    no new failure of the compiler (it was exit 3, CHANGED: FileNotFoundError); the report says
    that it must sit beside repro.py."""
    model, inputs = host_program
    reduce_cli(model, inputs, tmp_path, "crash", plugin("crash_on_sin"), "--no-generate-values", "--no-verify")
    reproduce = (tmp_path / "report.md").read_text().split("## Reproduce")[1].split("```")[0]
    assert "`plugin.py`" in reproduce and "`repro_inputs.pt`" in reproduce, reproduce
    (tmp_path / "plugin.py").unlink()
    r = run_repro(tmp_path)
    assert r.returncode == 2 and r.stdout.startswith("SKIPPED: cannot run"), r.stdout + r.stderr
    assert "plugin.py, the plugin backend, must sit beside repro.py" in r.stdout, r.stdout
    assert "Traceback" not in r.stderr, r.stderr  # the stack is the compiler's, for a crash: none for a SKIPPED
    assert run_repro(tmp_path, backend="eager").returncode == 0  # the control needs no backend


def test_a_plugin_edited_during_the_run_is_not_copied_beside_repro_py(host_program, tmp_path):
    """The resilience trial: a plugin file edited mid-run was copied beside repro.py as it
    was at the end, not as the verdicts ran it; the script said FIXED, blamed on a flaky
    compiler. The run now stops before writing (exit 2, one line), the journal kept (with
    the file put back, --resume writes it; the message asks for --force, as a worker started
    after an edit may have journaled what the new file did)."""
    model, inputs = host_program
    original = (ROOT / "tests" / "plugins" / "planted.py").read_text()
    plugin_file = tmp_path / "mine.py"
    plugin_file.write_text(original + '''

def mismatch_and_edit(gm, example_inputs):  # the user saves an edit while trtmin runs
    import pathlib
    me = pathlib.Path(__file__)
    edit = "\\n# " + "edited\\n"  # not this line's own text
    if edit not in me.read_text():
        me.write_text(me.read_text() + edit)
    return mismatch_mul_exp(gm, example_inputs)
''')
    began = plugin_file.read_text()
    out = tmp_path / "out"
    args = (str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", f"{plugin_file}:mismatch_and_edit",
            "--out", str(out), "--no-verify")
    r = run_cli("reduce", *args)
    said = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert said.startswith(f"error: the plugin file {plugin_file} (or a module of its folder that it imports) changed "
                           "since the run began"), said
    assert not (out / "repro.py").exists() and not (out / "plugin.py").exists()
    plugin_file.write_text(began)
    r = run_cli("reduce", *args, "--resume")
    assert r.returncode == 0 and (out / "plugin.py").read_text() == began, r.stderr[-3000:]


def test_an_out_folder_removed_during_the_run_gets_no_results_of_no_run(host_program, tmp_path):
    """The resilience trial removed --out mid-run: the run made it again and wrote its
    results there without a journal, a folder trtmin then refused for good ("no trtmin run
    wrote them", --force too), and a second run on the path went ahead beside the first,
    the first writing its results into the second's folder. Here the folder is removed and
    made again with another run's journal: the run stops before writing, saying why, and
    leaves that folder alone; the same command then runs."""
    model, inputs = host_program
    plugin_file = tmp_path / "mine.py"
    out = tmp_path / "out"
    plugin_file.write_text((ROOT / "tests" / "plugins" / "planted.py").read_text() + f'''

def mismatch_and_remove_out(gm, example_inputs):  # the user removes the folder while trtmin runs
    import pathlib, shutil
    done = pathlib.Path({str(tmp_path / "removed")!r})
    if not done.exists():
        done.touch()
        shutil.rmtree({str(out)!r}, ignore_errors=True)
        pathlib.Path({str(out)!r}).mkdir()
        pathlib.Path({str(out / "journal.jsonl")!r}).write_text("another run's\\n")
    return mismatch_mul_exp(gm, example_inputs)
''')
    args = (str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
            f"{plugin_file}:mismatch_and_remove_out", "--out", str(out), "--no-verify")
    r = run_cli("reduce", *args)
    said = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and said == (f"error: --out {out} lost this run's journal.jsonl during the run (the folder "
                                          "was removed or emptied): nothing is written, as its files would belong to "
                                          "no run, or to another; run the command again"), r.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["journal.jsonl"] and (out / "journal.jsonl").read_text() == \
        "another run's\n"
    shutil.rmtree(out)
    r = run_cli("reduce", *args)
    assert r.returncode == 0 and (out / "repro.py").exists(), r.stderr[-3000:]


def test_plugin_module_not_importable_cannot_run(host_program, tmp_path):
    """A plugin named as a module that is not importable where the script runs (here: no
    PYTHONPATH) is exit 2 naming the module, not exit 3, CHANGED: ModuleNotFoundError."""
    model, inputs = host_program
    reduce_cli(model, inputs, tmp_path, "crash", "tests.plugins.planted:crash_on_sin", "--no-verify")
    r = run_repro(tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.strip() == "SKIPPED: cannot run: the backend cannot be loaded: ModuleNotFoundError: " \
                               "No module named 'tests'", r.stdout


def test_real_inductors_lowering_error_names_the_node_too(host_program, tmp_path):
    """Inductor's LoweringException says "target: aten.sin.default ... Found from: <stack>"
    after AOT's decompositions: the search starts at the sin all the same (what starting
    there saves against --no-localize: the test above, with a cheaper compiler)."""
    model, inputs = host_program
    named = reduce_cli(model, inputs, tmp_path / "on", "crash", plugin("inductor_sin_lowering_fails"), "--no-verify")
    assert ops_in(tmp_path / "on" / "repro.py") == ["sin.default"]
    assert named["diagnosis"]["named_node"].startswith("`sin`") and "LoweringException" in named["signature"]
    assert named["passes"]["bisect_window"]["calls"] <= 2, named["passes"]  # it probes the prefix ending at sin


def test_the_run_alone_allows_for_start_up_and_quotes_what_the_script_printed(tmp_path, monkeypatch):
    """minimize/emit/verify.py: a script's start (an interpreter, torch, the compile) is not
    counted against --timeout, or a slow start reads as a hang; the report quotes the line
    the script printed, not the runner's reason; --repeat's advice scales with it, 10 runs
    at least. TRTMIN_CHILD in the shell (a run started from inside a script's child) would
    make repro.py act as its own child: the run alone never passes it on."""
    from minimize.emit.verify import report_line, run_alone
    script = tmp_path / "repro.py"
    script.write_text('import time\ntime.sleep(1.5)\nprint("REPRODUCED: it fails")\nraise SystemExit(1)\n')
    assert run_alone(script, 0.5)["status"] == "REPRODUCED"
    script.write_text('print("SKIPPED: no GPU here")\nraise SystemExit(2)\n')
    alone = run_alone(script, 30.0)
    assert (alone["status"], alone["line"]) == ("SKIPPED", "SKIPPED: no GPU here")
    assert "`trtmin check --repeat 16`" in report_line({"status": "FIXED", "exit": 0, "line": "FIXED: x"}, repeat=4)
    assert "`trtmin check --repeat 10`" in report_line({"status": "FIXED", "exit": 0, "line": "FIXED: x"}, repeat=2)
    assert "else repro.py does not run what the workers ran, which is trtmin's bug" in report_line(  # not the user's
        {"status": "FIXED", "exit": 0, "line": "FIXED: x"})
    script.write_text("import os, sys\nprint('SKIPPED: a child' if os.environ.get('TRTMIN_CHILD') else "
                      "'REPRODUCED: it fails')\nsys.exit(2 if os.environ.get('TRTMIN_CHILD') else 1)\n")
    monkeypatch.setenv("TRTMIN_CHILD", "1")
    alone = run_alone(script, 30.0)
    assert (alone["status"], alone["line"]) == ("REPRODUCED", "REPRODUCED: it fails"), alone


def test_a_repro_that_does_not_reproduce_alone_is_said_loudly(host_program, tmp_path):
    """The reduction's verdicts come from warm workers; run alone, this bug's repro passes
    (the bug needs process state, as a flaky compiler's may): trtmin says so, in the CLI's
    output, summary.json and report.md, and exits 1. --no-verify skips the run."""
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("crash_on_sin_in_trtmins_workers_only"), "--out", str(tmp_path / "on"))
    assert r.returncode == 1, r.stderr[-3000:]  # the files written, and a script or CI told: exit 1, not 0
    summary = json.loads((tmp_path / "on" / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and summary["repro_alone"]["status"] == "FIXED"
    said = " ".join((r.stdout + r.stderr).split())
    assert "WARNING: run alone after the reduction, `python repro.py` ended" in said
    assert "ended FIXED (exit 0)" in said
    assert "--repeat" in (tmp_path / "on" / "report.md").read_text().split("WARNING")[1]
    quiet = reduce_cli(model, inputs, tmp_path / "off", "crash", plugin("crash_on_sin_in_trtmins_workers_only"),
                       "--no-verify")
    assert "repro_alone" not in quiet and "WARNING" not in (tmp_path / "off" / "report.md").read_text()


def test_the_run_alone_does_not_pass_on_the_scripts_own_switches(host_program, tmp_path, monkeypatch):
    """TRTMIN_BACKEND=eager in the user's shell would have run the script's control, and
    the run alone said FIXED of a bug that reproduces. A plugin's own setting is passed on,
    even under a TRTMIN_ name: without it, this bug's repro passes."""
    model, inputs = host_program
    monkeypatch.setenv("TRTMIN_BACKEND", "eager")
    monkeypatch.setenv("TRTMIN_PLANTED_CRASH", "sin")
    summary = reduce_cli(model, inputs, tmp_path, "crash", plugin("crash_on_sin_when_configured"))
    assert summary["final_nodes"] == 1
    assert summary["repro_alone"]["status"] == "REPRODUCED", summary["repro_alone"]


def test_the_run_alone_names_each_folder_of_pythonpath_once(tmp_path, monkeypatch):
    """The report says which PYTHONPATH the script ran alone with. A shell that prepends
    the same folder twice (PYTHONPATH=$PWD:$PYTHONPATH, run again) wrote it three times;
    Python searches each folder once, so the report names it once, in the same order (an
    empty entry, the working folder, too)."""
    import os

    from minimize.emit.verify import report_line, run_alone

    script = tmp_path / "repro.py"
    script.write_text('print("REPRODUCED: it fails")\nraise SystemExit(1)\n')
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    # trtmin's own checkout is left out: the script never imports it, and naming it in an
    # issue sends a maintainer looking for what to set up
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([a, a, str(ROOT), b, "", a, ""]))
    alone = run_alone(script, 30.0)
    once = os.pathsep.join([a, b, ""])
    assert (alone["status"], alone["pythonpath"]) == ("REPRODUCED", once), alone
    assert f"(with PYTHONPATH={once}) printed `REPRODUCED: it fails`" in report_line(alone)


def test_a_mismatch_repro_whose_backend_now_returns_nan_says_changed(mismatch_run, tmp_path):
    """trtmin calls a NaN where eager is finite a `nan`, not the mismatch it reduced: the
    script says CHANGED (exit 3), not FIXED (its difference read NaN as 0) nor REPRODUCED."""
    tmp_path = Path(shutil.copytree(mismatch_run, tmp_path / "out"))  # its plugin.py is rewritten below
    assert run_repro(tmp_path).returncode == 1
    (tmp_path / "plugin.py").write_text(
        "import torch\n\n\ndef mismatch_mul_exp(gm, example_inputs):\n"
        "    return lambda *a: tuple(torch.full_like(o, float('nan')) for o in gm(*a))\n")
    r = run_repro(tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.startswith("CHANGED: fails differently now: output 0 has ") and "where eager is finite" in r.stdout


def test_a_backend_output_of_another_shape_or_type_is_reported_and_its_repro_says_so(host_program, tmp_path):
    """A mismatch with no max abs (the backend's output has another shape, or is no tensor):
    writing report.md raised at the end, losing report and summary; and repro.py, fed a
    numpy array, died of AttributeError with exit 1, REPRODUCED's code."""
    model, inputs = host_program
    reduce_cli(model, inputs, tmp_path, "mismatch", plugin("wrong_shape_on_exp"), "--no-verify")
    assert "differs from eager (shape (1, " in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["final_nodes"] >= 1
    r = run_repro(tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCED: output 0 differs from eager by max abs inf"), r.stdout
    (tmp_path / "plugin.py").write_text(
        "def wrong_shape_on_exp(gm, example_inputs):\n"
        "    return lambda *a: tuple(o.numpy() for o in gm(*a))\n")
    r = run_repro(tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCED: output 0 differs"), r.stdout + r.stderr[-1500:]
    # another count of outputs than eager's (a backend called directly, as ExecuTorch's is;
    # torch.compile's own wrapper keeps the count): zip compared the ones both had: FIXED.
    # For a nan bug it is another failure (CHANGED): tests/test_script_lint.py renders that form
    script = (tmp_path / "repro.py").read_text()
    compiled = "return torch.compile(module, backend=backend.wrong_shape_on_exp)"
    assert compiled in script, script
    (tmp_path / "repro.py").write_text(script.replace(compiled, "return lambda *a: list(module(*a)) * 2"))
    r = run_repro(tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCED: the backend returns 2 outputs, eager 1"), \
        r.stdout + r.stderr[-1500:]  # a mismatch, as trtmin's own check calls it


def test_the_report_says_eager_computed_the_inputs_only_where_it_did():
    """Cut values are fed in as inputs eager PyTorch computed, unless the script makes them
    all (made values) or has none."""
    from minimize.emit.report import _fed_words

    names = ["x", "input", "mask"]
    assert "fed in as eager PyTorch computed it" in _fed_words(names, {})
    assert "fed in as eager PyTorch computed it" in _fed_words(names, {"x": "torch.randn(2)", "input": "torch.randn(2)"})
    assert _fed_words(names, {"x": "", "input": "", "mask": ""}) == ""
    assert _fed_words([], {}) == ""


class ClockFeatures(torch.nn.Module):
    """Seconds of int64 nanosecond stamps as a float feature: Inductor's vectorized int64
    `arange * 1e9` (pytorch/pytorch#175966, the shipped example's bug) shows only as a
    float error in the output the user sees."""

    def forward(self, x: torch.Tensor, start_ns: torch.Tensor) -> torch.Tensor:
        stamps = start_ns + torch.arange(x.shape[1], dtype=torch.int64) * 1_000_000_000
        return x * torch.sin(((stamps // 1_000_000_000) % 60).float())


def test_a_root_cause_that_shows_otherwise_names_the_users_symptom(tmp_path):
    """The reduction keeps the int64 cause, whose own output is off by 1.7e10 in int64, where
    the user saw a float32 error below 1: the screen and report.md name the original too."""
    model, inputs = save_program(ClockFeatures().eval(), (torch.randn(2, 24),
                                                          torch.tensor([[1_764_460_800 * 1_000_000_000]] * 2)),
                                 tmp_path)
    summary, r = reduce_cli_run(model, inputs, tmp_path / "out", "mismatch", "inductor", "--no-verify")
    assert "dtype int64" in summary["final_verdict"] and "dtype float32" in summary["original_verdict"], summary
    assert f"\nwas: {summary['original_verdict']}\n" in r.stderr, r.stderr[-2000:]
    assert "- Symptom: the original program failed as MISMATCH: " in (tmp_path / "out" / "report.md").read_text()


class ReluThenExp(torch.nn.Module):
    """24 call nodes: enough for localization (every value an output) to run."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(10):
            x = x * 1.001 + 0.001
        return torch.exp(torch.relu(x) * 0.5).sum(dim=1)


def test_a_far_smaller_mismatch_left_is_said_with_the_atol_that_avoids_it(tmp_path):
    """The signature lets a mismatch fall 3 decades; a bug 100s of times smaller than the
    user's, met first on the way, is what the reduction keeps here. The screen and report.md
    say so, with the --atol that holds the reduction to the original's size, which then
    keeps the larger bug."""
    torch.manual_seed(0)
    model, inputs = save_program(ReluThenExp().eval(), (torch.randn(4, 16),), tmp_path)
    summary, r = reduce_cli_run(model, inputs, tmp_path / "out", "mismatch", plugin("small_relu_large_exp"),
                                "--no-verify")
    assert ops_in(tmp_path / "out" / "repro.py") == ["relu.default"], r.stderr[-2000:]
    but = next(line for line in r.stderr.splitlines() if line.startswith("but: the program left is off by 0.01"))
    assert "x less than the original's" in but and "--atol" in but, but
    assert "- Size: the program left is off by 0.01" in (tmp_path / "out" / "report.md").read_text()
    from minimize.reduce import _mismatch_shrank  # no size to compare where a NaN or an inf is lost
    from oracles.verdict import Verdict
    for before, after in ((float("inf"), float("inf")), (float("nan"), 0.001), (5.0, float("nan"))):
        assert _mismatch_shrank(Verdict("mismatch", output=0, max_abs=before),
                                Verdict("mismatch", output=0, max_abs=after)) is None, (before, after)
    atol = but.split("--atol ")[1].split()[0]
    summary, r = reduce_cli_run(model, inputs, tmp_path / "again", "mismatch", plugin("small_relu_large_exp"),
                                "--no-verify", "--atol", atol)
    assert "exp.default" in ops_in(tmp_path / "again" / "repro.py") and "but: the program left" not in r.stderr


class SinAlone(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x)


def test_a_program_with_nothing_to_cut_is_reported_without_the_cutting_words(tmp_path):
    """A maintainer read "cut it down to 1 call node in 1 oracle calls; every removed node's
    value ... is fed in ..., so the failure is not upstream drift" and an empty pass table,
    for a program of one op: nothing had been cut."""
    model, inputs = save_program(SinAlone(), (torch.randn(4),), tmp_path)
    reduce_cli(model, inputs, tmp_path / "out", "crash", plugin("crash_on_sin"), "--no-verify")
    report = " ".join((tmp_path / "out" / "report.md").read_text().split())
    assert f"is `{model.name}` as it is (1 call node; 1 oracle call): there was nothing to cut." in report, report
    assert "No pass ran: the original was checked, and there was nothing to cut." in report, report
    assert "fed in" not in report and "| pass |" not in report and "oracle calls" not in report.split("##")[1]
    # at a size worth making smaller, the one op stays and its input is made: no node was cut, but
    # something was, and the report says where to read what (not "nothing to cut", not "cut it down")
    (tmp_path / "large").mkdir()
    model, inputs = save_program(SinAlone(), (torch.randn(64, 48),), tmp_path / "large")
    reduce_cli(model, inputs, tmp_path / "large" / "out", "crash", plugin("crash_on_sin"), "--no-verify")
    report = " ".join((tmp_path / "large" / "out" / "report.md").read_text().split())
    assert (f"is `{model.name}` with no node cut (1 call node; 2 oracle calls): what trtmin changed, the Diagnosis "
            "below says." in report), report
    assert "nothing to cut" not in report and "cut it down" not in report and "| generate_small_values | 1 | 1 | 0 |" in report
    assert "`x` (64, 48) → (2, 2)" in report, report
    assert "cut no node of model.pt2 (1 call node) in 2 oracle calls" in " ".join(
        (tmp_path / "large" / "out" / "repro.py").read_text().split()), report


def test_the_titles_ops_are_whole_names_and_a_count_of_the_rest():
    """A title over 120 characters was cut in the middle of the op list: "..., sigmoid.default,:
    CRASH" dropped unsqueeze.default without a word, and `repros add` takes the title."""
    from minimize.reduce import ops_in_title
    ops = ["cat.default", "flatten.using_ints", "linear.default", "mish.default", "mul.Tensor", "relu.default",
           "reshape.default", "sigmoid.default", "unsqueeze.default"]
    title = ops_in_title(ops)
    assert title == ", ".join(ops[:7]) + " and 2 more" and len(title) <= 120, title
    assert ops_in_title(ops[:3]) == "cat.default, flatten.using_ints, linear.default"
    assert ops_in_title(["x" * 200]) == "x" * 200  # one op: whole, however long


class TwoHeads(torch.nn.Module):
    """A float feature head (its exp of a mul 1.5x off, by under 10) before an int64 slot
    index head (10 off): two independent bugs, the larger in the second output."""

    def forward(self, x: torch.Tensor, step: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for _ in range(8):
            x = torch.tanh(x * 0.9 + 0.1)
        feature = torch.exp(x * 0.5)
        slot = (step * 3 + 1) % 8
        return feature, slot + 2


def test_a_mismatch_reduction_keeps_to_the_output_the_user_saw_fail(tmp_path):
    """The original's worst output is the slot index (off by 10); the feature's bug, first in
    node order and off by less, is another output's and another bug: the reduction ends on
    the integer add, where it ended on the exp (with every value an output, the first off)."""
    model, inputs = save_program(TwoHeads().eval(), (torch.randn(4, 8), torch.arange(4, dtype=torch.int64)), tmp_path)
    summary, r = reduce_cli_run(model, inputs, tmp_path / "out", "mismatch", plugin("int_add_and_mul_exp"),
                                "--no-verify")
    assert "output 1" in summary["original_verdict"] and "dtype int64" in summary["original_verdict"], summary
    assert ops_in(tmp_path / "out" / "repro.py") == ["add.Tensor"], r.stderr[-2000:]
    assert "dtype int64" in summary["final_verdict"], summary


class ValueAndAction(torch.nn.Module):
    """A value head (rsqrt, NaN on the backend) before an action head (exp of a mul, 1.5x)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for _ in range(4):
            x = torch.tanh(x * 0.9 + 0.1)
        return torch.rsqrt(x.abs() + 1), torch.exp(x * 0.5)


def test_a_nan_in_one_output_does_not_hide_another_outputs_mismatch(tmp_path):
    """--oracle mismatch where output 0 turns NaN and output 1 is off: the mismatch is the
    question (it was "does not fail the mismatch oracle ..., but: NAN"), and the reduction
    ends on the action head's exp of a mul; --oracle nan still asks about the NaN."""
    model, inputs = save_program(ValueAndAction().eval(), (torch.randn(4, 8),), tmp_path)
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                "--backend", plugin("nan_rsqrt_and_mul_exp"))
    assert r.returncode == 1 and "FAILS (mismatch)" in r.stdout and "output 1" in r.stdout, r.stdout + r.stderr[-2000:]
    summary, r = reduce_cli_run(model, inputs, tmp_path / "out", "mismatch", plugin("nan_rsqrt_and_mul_exp"),
                                "--no-verify")
    assert ops_in(tmp_path / "out" / "repro.py") == ["exp.default", "mul.Tensor"], r.stderr[-2000:]
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "nan",
                "--backend", plugin("nan_rsqrt_and_mul_exp"))
    assert r.returncode == 1 and "FAILS (nan)" in r.stdout and "output 0" in r.stdout, r.stdout + r.stderr[-2000:]
