"""Code beyond the program that a run needs goes where the run goes: a custom op's library
(torch.library), imported where --import names it, for trtmin, its workers and repro.py;
and the modules a plugin file imports from its own folder, copied beside repro.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import torch
from torch import nn

from tests.conftest import plugin, save_program
from tests.helpers import ROOT, report_snippet_text, run_check, run_cli, run_reduce, run_report_snippet, run_repro
from tests.plugins import custom_op_lib  # registers trtmin_test::twice here, to export a program with it
from tests.test_bad_inputs import assert_one_line_error

LIB = custom_op_lib.__name__


class UsesTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.l(x))
        return torch.ops.trtmin_test.twice(h).sin() + 1


def test_a_custom_op_needs_its_library_imported(tmp_path):
    model, inputs = save_program(UsesTwice().eval(), (torch.randn(4, 8),), tmp_path)
    args = ("--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_custom_op"))
    assert_one_line_error(run_check(str(model), *args), "trtmin_test::twice", "--import MODULE")
    assert_one_line_error(run_check(str(model), *args, "--import", "no_such_lib"), "--import no_such_lib")
    out = tmp_path / "out"
    r = run_reduce(str(model), *args, "--import", LIB, "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    script = (out / "repro.py").read_text()
    assert "trtmin_test.twice" in script and LIB in script
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRTMIN_BACKEND")}
    alone = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=out, env=env, timeout=300)
    assert alone.returncode == 2 and f"SKIPPED: {LIB}, which registers" in alone.stdout, alone.stdout + alone.stderr
    found = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=out, timeout=300,
                           env={**env, "PYTHONPATH": str(ROOT)})
    assert found.returncode == 1 and "REPRODUCED" in found.stdout, found.stdout + found.stderr


def test_an_import_module_of_the_users_folder_is_copied_beside_repro_py(tmp_path):
    """`--import my_ops`, found in the folder trtmin ran in: the workers reduced, and repro.py,
    run from its own folder, said "SKIPPED: my_ops ... cannot be imported" for ever (a saved
    repro too). A one-file module of the user's own goes beside it (repro_import_my_ops.py),
    and the script loads it under its name; an installed package is not copied."""
    model, inputs = save_program(UsesTwice().eval(), (torch.randn(4, 8),), tmp_path)
    work = tmp_path / "project"
    work.mkdir()
    shutil.copy(custom_op_lib.__file__, work / "my_kernels.py")  # its helper beside it registers the op (a hunt:
    (work / "my_ops.py").write_text("import my_kernels  # noqa: F401\n")  # repro.py could not import it: SKIPPED)
    out = tmp_path / "out"
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRTMIN_BACKEND")}, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "minimize.cli", "reduce", str(model), "--inputs", str(inputs), "--oracle",
                        "crash", "--backend", plugin("crash_on_custom_op"), "--import", "my_ops", "--import", "torch",
                        "--out", str(out), "--no-verify"], capture_output=True, text=True, cwd=work, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "repro_import_my_ops.py").read_bytes() == (work / "my_ops.py").read_bytes()
    assert (out / "repro_import_my_kernels.py").read_bytes() == (work / "my_kernels.py").read_bytes()
    assert not (out / "repro_import_torch.py").exists()  # installed: imported, never copied
    files = json.loads((out / "summary.json").read_text())["files"]
    assert {"repro_import_my_ops.py", "repro_import_my_kernels.py"} <= set(files)  # repros add keeps them
    report = " ".join((out / "report.md").read_text().split())  # the snippet's `import my_ops` needs them: said
    assert "It imports your modules `my_ops` (here `repro_import_my_ops.py`), `my_kernels` (here " \
           "`repro_import_my_kernels.py`): attach them under their own names." in report, report
    assert "`repro_import_my_kernels.py` (your module my_kernels.py, which the program's custom ops need)" in report
    del env["PYTHONPATH"]
    alone = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True, text=True, cwd=tmp_path,
                           env=env, timeout=300)
    assert alone.returncode == 1 and "REPRODUCED: RuntimeError: planted: no converter" in alone.stdout, \
        alone.stdout + alone.stderr[-2000:]
    (out / "repro_import_my_ops.py").unlink()  # gone: the import is looked for as before, and said missing
    gone = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)
    assert gone.returncode == 2 and "SKIPPED: my_ops, which registers" in gone.stdout, gone.stdout + gone.stderr


class ScalesInPlace(nn.Module):
    def forward(self, x):
        y = torch.sin(x) + 1
        torch.ops.trtmin_test.scale_(y, 3.0)  # exported as auto_functionalized_v2(trtmin_test.scale_, ...)
        return torch.exp(y) * 2 + torch.relu(x)


def test_a_custom_op_that_mutates_is_reduced_and_its_repro_and_snippet_import_its_library(tmp_path):
    """A custom op with mutates_args reaches the graph as an argument of auto_functionalized:
    the workers' graph file pickled it and failed, said as a full disk ("free space there, or
    set TMPDIR"; a bug hunt); repro.py and the snippet did not import its library."""
    model, inputs = save_program(ScalesInPlace().eval(), (torch.randn(4, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_reduce(str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_custom_op"),
                   "--import", LIB, "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    script = (out / "repro.py").read_text()
    assert "torch.ops.trtmin_test.scale_.default" in script and LIB in script, script
    found = run_repro(out, env={"PYTHONPATH": str(ROOT)})  # where the library is found
    assert found.returncode == 1 and "REPRODUCED: RuntimeError: planted: no converter" in found.stdout, \
        found.stdout + found.stderr[-2000:]
    snippet = run_report_snippet(out, PYTHONPATH=str(ROOT))  # in eager PyTorch: the library imported first
    assert snippet.returncode == 0 and "SNIPPET OK" in snippet.stdout, snippet.stdout + snippet.stderr[-2000:]
    assert f"import {LIB}" in report_snippet_text(out)


def test_a_plugins_own_modules_go_beside_repro_py(host_program, tmp_path):
    """A plugin file that imports modules of its folder (one at its top, which imports the
    other inside a function), as `python plugin.py` finds them: the run loads them, repro.py
    carries copies and runs alone once the folder is gone, the suite keeps the copies and
    names one that goes missing."""
    from pyflakes.api import check as pyflakes_check
    from pyflakes.reporter import Reporter

    model, inputs = host_program
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "rules.py").write_text("def refused(gm):\n    import matchers\n    return matchers.has_sin(gm)\n")
    (mine / "matchers.py").write_text("import torch\n\n\ndef has_sin(gm):\n    return any(n.target is "
                                      "torch.ops.aten.sin.default for n in gm.graph.nodes)\n")
    (mine / "compiler.py").write_text("import rules\n\n\ndef backend(gm, example_inputs):\n    if rules.refused(gm):\n"
                                      "        raise RuntimeError('[kernels.h:12: pick] own compiler: sin has no kernel')\n"
                                      "    return gm\n")
    out = tmp_path / "out"
    r = run_reduce(str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                   f"{mine / 'compiler.py'}:backend", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    # the compiler's [file: function] is its words, not the screen's markup (rich took it for a tag)
    said = "RuntimeError: [kernels.h:12: pick] own compiler: sin has no kernel"
    assert f"bug: CRASH: {said}" in r.stderr and f"printed `REPRODUCED: {said}`" in r.stderr, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and summary["repro_alone"]["status"] == "REPRODUCED", summary
    assert {"plugin.py", "repro_plugin_rules.py", "repro_plugin_matchers.py"} <= set(summary["files"])
    assert "`repro_plugin_matchers.py` (the plugin's module matchers.py)" in (out / "report.md").read_text()
    said = io.StringIO()
    pyflakes_check((out / "repro.py").read_text(), "repro.py", Reporter(said, said))
    assert not said.getvalue(), said.getvalue()
    with (mine / "matchers.py").open("a") as f:  # its verdicts were the old module's
        f.write("# changed\n")
    r = run_reduce(str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                   f"{mine / 'compiler.py'}:backend", "--out", str(out), "--resume")
    assert_one_line_error(r, "the modules of its folder that it imports, differ")
    shutil.rmtree(mine)  # the user's folder gone: only the copies can serve
    alone = run_repro(out)
    assert alone.returncode == 1 and "own compiler: sin has no kernel" in alone.stdout, alone.stdout + alone.stderr
    suite = tmp_path / "suite"
    r = run_cli("repros", "add", str(out), "--name", "own_modules", "--suite", str(suite))
    assert r.returncode == 0, r.stderr
    (suite / "own_modules" / "repro_plugin_matchers.py").unlink()
    r = run_cli("repros", "list", "--suite", str(suite))
    assert r.returncode == 1 and "no repro_plugin_matchers.py, which repro.py reads" in r.stdout + r.stderr, \
        r.stdout + r.stderr

