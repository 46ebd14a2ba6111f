"""A program with a custom op (torch.library) loads only where the library that registers
it is imported: --import names it, for trtmin, its workers and repro.py."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
from torch import nn

from tests.conftest import plugin, save_program
from tests.helpers import ROOT, run_check, run_reduce
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
