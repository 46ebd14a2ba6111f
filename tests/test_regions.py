"""Programs whose export wraps regions in higher-order ops: `with torch.no_grad()` and
`torch.autocast` regions are inlined and cut like any other ops; a subgraph body
(torch.cond) is refused in one line."""

from __future__ import annotations

import json

import torch
from torch import nn

from tests.conftest import plugin, save_program
from tests.helpers import check_here, run_cli, run_cli_here
from tests.test_bad_inputs import assert_one_line_error
from tests.test_reduce_planted import ops_in


class NoGradRegion(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            h = torch.tanh(self.l1(x))
        return torch.exp(self.l2(h) * 2).sum(-1)


class AutocastRegion(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.l(x)
        return torch.exp(h.float() * 2)


class Bf16Inside(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            g = torch.exp(self.l(x) * 2)  # mul and exp in bfloat16
        return g.float().sum(-1)


def test_a_reduction_that_ends_in_a_bf16_output_says_what_rounding_does(tmp_path):
    """The original's output is float32, so nothing was said of rounding; the reduced
    program's (mul, exp inside an autocast region) is bfloat16, where rounding alone differs
    from eager: report.md says so, and how --reference float64 tells (a bug hunt)."""
    model, inputs = save_program(Bf16Inside().eval(), (torch.randn(4, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                "--backend", plugin("mismatch_mul_exp"), "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert "dtype float32" in summary["original_verdict"] and "dtype bfloat16" in summary["final_verdict"], summary
    assert "- Precision: the mismatch is in a bfloat16 output, where rounding alone differs from eager" \
        in (out / "report.md").read_text()


class CondBranch(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,)).exp()


def test_ops_inside_a_no_grad_region_are_cut_like_others(tmp_path):
    model, inputs = save_program(NoGradRegion().eval(), (torch.randn(4, 8),), tmp_path)
    assert "wrap_with_set_grad_enabled" in str(torch.export.load(str(model)).graph)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                "--backend", plugin("mismatch_mul_exp"), "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    assert ops_in(out / "repro.py") == ["exp.default", "mul.Tensor"]
    assert json.loads((out / "summary.json").read_text())["original_nodes"] >= 5  # linear, tanh, linear, mul, exp, sum
    assert "in-place ops" not in r.stderr + (out / "report.md").read_text()  # decomposed, but nothing was in place


class CountsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        self.calls.add_(1)
        return torch.exp(self.l(x) * 2) * self.calls


def test_a_program_with_in_place_ops_says_they_run_functional(tmp_path):
    """An in-place op (a buffer's `add_`) runs as its functional form in trtmin: a
    torch.compile backend of the user's own that fails on `aten.add_` itself read as "the
    bug does not reproduce here", with no word why (a bug hunt). Said on screen and in
    report.md."""
    model, inputs = save_program(CountsCalls().eval(), (torch.randn(4, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                "--backend", plugin("mismatch_mul_exp"), "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    said = "the program's in-place ops (aten.add_.Tensor) run as their functional forms"
    assert f"note: {said}" in r.stderr, r.stderr[-3000:]
    # report.md says it where the result holds what an in-place op became: here exp and mul, not the add
    assert ops_in(out / "repro.py") == ["exp.default", "mul.Tensor"]
    assert "In-place ops" not in (out / "report.md").read_text()
    model, inputs = save_program(ScalesInPlace().eval(), (torch.randn(4, 8),), tmp_path, "mul_")
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                "--backend", plugin("mismatch_mul_exp"), "--out", str(tmp_path / "out_mul_"), "--no-verify")
    assert r.returncode == 0 and ops_in(tmp_path / "out_mul_" / "repro.py") == ["exp.default", "mul.Tensor"]
    said = "- In-place ops: the program's in-place ops (aten.mul_.Tensor) run as their functional forms"
    assert said in (tmp_path / "out_mul_" / "report.md").read_text()
    from minimize.program.inputs import may_have_become  # what else an in-place op becomes (a review)
    for in_place, became in (("aten.mul_.Tensor", "aten.slice_scatter.default"),  # h[:, :2].mul_(2)
                             ("aten.bernoulli_.float", "aten.bernoulli.p"), ("aten.normal_.default",
                                                                              "aten.normal_functional.default"),
                             ("aten.copy_.default", "aten.copy.default"),
                             ("trtmin_test.scale_.default", "auto_functionalized_v2")):
        assert may_have_become(in_place, ["aten.exp.default", became]), (in_place, became)
    assert not may_have_become("aten.masked_fill_.Scalar", ["aten.permute.default", "aten._to_copy.default"])


class ScalesInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.l(x))
        h.mul_(2)
        return torch.exp(h)


def test_an_autocast_region_keeps_its_casts(tmp_path):
    model, inputs = save_program(AutocastRegion().eval(), (torch.randn(4, 8),), tmp_path)
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]  # eager against itself: the casts made it bf16 both times
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                     "--backend", plugin("mismatch_mul_exp"))
    assert r.returncode == 1 and "MISMATCH" in r.stdout, r.stdout + r.stderr[-2000:]


def test_a_cond_is_refused_in_one_line(tmp_path):
    model, inputs = save_program(CondBranch(), (torch.randn(4, 8),), tmp_path)
    assert_one_line_error(check_here(str(model), "--inputs", str(inputs), "--backend", "eager"),
                          "torch.cond", "subgraph")
