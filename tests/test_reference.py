"""--reference float64: a bf16 program's mismatch is judged against eager's own error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minimize.reduce import _mismatch_shrank
from oracles.checks import Tolerance, compare_outputs
from oracles.reference import ERROR_RATIO, float64_outputs
from oracles.verdict import Signature, Verdict, mismatch_decade
from tests.conftest import Host, plugin, save_program
from tests.helpers import run_cli, run_cli_here, run_repro
from tests.test_reduce_planted import ops_in


class CastsItself(torch.nn.Module):
    """Casts to bf16 inside and makes a bf16 arange: a float64 run must widen both."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.bfloat16) * torch.arange(4, dtype=torch.bfloat16)).exp()


def test_the_float64_run_widens_what_the_program_rounds():
    x = torch.randn(3, 4)
    ep = torch.export.export(CastsItself(), (x,))
    got = float64_outputs(ep.module(), [x])
    want = (x.double() * torch.arange(4, dtype=torch.float64)).exp()
    assert got.dtype == torch.float64 and torch.allclose(got, want, rtol=1e-12, atol=0)
    assert ep.module()(x).dtype == torch.bfloat16  # the program itself is left as it was


class MakesFloats(torch.nn.Module):
    """Makes floats without a dtype: torch's default (float32) in eager."""

    def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return x * torch.full((4,), 0.1) + i / 3 + torch.arange(0.0, 0.4, 0.1)


def test_the_float64_run_makes_floats_in_float64():
    x, i = torch.randn(4, dtype=torch.bfloat16), torch.arange(4)
    got = float64_outputs(torch.export.export(MakesFloats(), (x, i)).module(), [x, i])
    want = x.double() * 0.1 + i.double() / 3 + torch.arange(0.0, 0.4, 0.1, dtype=torch.float64)
    assert torch.allclose(got, want, rtol=1e-14, atol=0), (got - want).abs().max()
    assert torch.get_default_dtype() == torch.float32  # as it was before the run


class Bits(torch.nn.Module):
    """Clears a bf16 input's low mantissa bits by reinterpreting them (aten.view.dtype)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.view(torch.int16) & -4).view(torch.bfloat16) * 3 + x.exp()


class WidenedBits(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x * 2).view(torch.int16) & -4).view(torch.bfloat16)


def test_the_float64_run_reinterprets_only_the_programs_own_bits():
    """A bitcast of an input reads the bits eager reads; one of a value the float64 run has
    widened would read a float64's (four times as many int16s): that run refuses it rather
    than judge against garbage."""
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    got = float64_outputs(torch.export.export(Bits(), (x,)).module(), [x])
    want = (x.view(torch.int16) & -4).view(torch.bfloat16).double() * 3 + x.double().exp()
    assert torch.allclose(got, want, rtol=1e-12, atol=0)
    with pytest.raises(NotImplementedError, match="cannot reinterpret the bits of a widened value"):
        float64_outputs(torch.export.export(WidenedBits(), (x,)).module(), [x])


def test_a_difference_within_eagers_own_error_passes_and_says_so():
    exact = torch.linspace(-3, 3, 64, dtype=torch.float64).exp()
    signs = torch.tensor([1.0, -1.0], dtype=torch.float64).repeat(32)
    eager = (exact * (1 + signs * 2 ** -7)).to(torch.bfloat16)  # rounding carried through ops: 2 ulps or so
    once = exact.to(torch.bfloat16)                              # a fused kernel's: rounded once
    tol = Tolerance(1e-3, 1e-3, "float64")
    assert compare_outputs([eager], [once], Tolerance()).kind == "mismatch"  # what --reference eager says
    v = compare_outputs([eager], [once], tol, [exact])
    assert v.kind == "pass" and "eager's own (a bug above 2x)" in v.detail, v
    v = compare_outputs([eager], [once * 1.5], tol, [exact])
    assert v.kind == "mismatch" and "x eager's own error from float64" in v.detail, v
    # integers are not judged by rounding: an int64 off by one is off
    ints = torch.arange(5)
    assert compare_outputs([ints], [ints + 1], tol, [ints.clone()]).kind == "mismatch"
    assert ERROR_RATIO == 2.0  # the README and the CLI's help say "twice"


def test_a_mismatch_under_float64_keeps_its_size_in_eager_errors():
    """Under --reference float64 a candidate is the same bug only while its error over eager's
    own stays near the original's: a rounding-sized difference met on the way (4x, where the
    original's was 150x: an fp16 conv beside a var's overflow) is another bug, though its max
    abs is within the 3 decades a mismatch may fall; and a shrink may not take a bug near the
    threshold (2.9x) nearer it, where its repro fails on some seeds alone."""
    exact = torch.linspace(1, 2, 64, dtype=torch.float64)
    err = torch.tensor([1.0, -1.0], dtype=torch.float64).repeat(32) * 2 ** -10
    eager, tol = exact + err, Tolerance(1e-6, 1e-6, "float64")  # eager's own error: 2**-10 in each value

    def off(times: float) -> Verdict:  # a backend off `times` eager's own error
        return compare_outputs([eager], [exact + times * err], tol, [exact])

    big = off(150)
    assert big.kind == "mismatch" and big.extra["ratio"] == pytest.approx(150), big
    assert not Signature.of(big).matches(off(4.15)) and Signature.of(big).matches(off(20))
    assert mismatch_decade(off(4.15).max_abs) >= Signature.of(big).decade - Signature.MISMATCH_DECADES
    near = Signature.of(off(2.9))
    assert near.matches(off(3.06)) and not near.matches(off(2.44))
    assert near.matches(off(2.8))  # the original's own reruns (--repeat) vary a little
    # an output's own ratio counts: the rounding-sized one beside the big one is not it
    both = compare_outputs([eager, eager], [exact + 4.15 * err, exact + 150 * err], tol, [exact, exact])
    assert Signature.of(big).matches(both) and not Signature.of(big).matches(both, counts=lambda o: o == 0)
    # the journal keeps it (a resumed run judges alike); against eager alone there is none
    assert Verdict.from_dict(json.loads(json.dumps(big.to_dict(), allow_nan=False))).extra["ratio"] == big.extra["ratio"]
    assert Signature.of(compare_outputs([eager], [exact + 150 * err], Tolerance(1e-6, 1e-6))).ratio is None
    # a bug left near the threshold is said so (on screen and in report.md), one well above it is not
    assert "3.06x eager's own error from float64, near the 2x" in _mismatch_shrank(off(2.9), off(3.06))
    assert "(the original: 2.9x)" in _mismatch_shrank(off(2.9), off(3.06))
    assert _mismatch_shrank(big, off(20)) is None
    far = compare_outputs([eager * 1e4], [(exact + 150 * err) * 1e4], tol, [exact * 1e4])  # 1e4x larger, and 150x
    said = _mismatch_shrank(far, off(3.06))  # both are said: near the threshold, and far smaller than the original
    assert "near the 2x" in said and "less than the original's" in said and "--atol" in said, said


@pytest.fixture(scope="module")
def bf16_host(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("bf16")
    return save_program(Host().eval().to(torch.bfloat16), (torch.randn(4, 8, dtype=torch.bfloat16),), folder)


def test_check_counts_rounding_only_against_eager(bf16_host):
    """A backend that keeps bf16 values in float32 (fused kernels do) is off eager's per-op
    rounding by more than atol, yet closer to the exact answer than eager."""
    model, inputs = bf16_host
    base = ["check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", plugin("float32_inside")]
    r = run_cli_here(*base)
    assert r.returncode == 1 and "dtype bfloat16" in r.stdout, r.stdout + r.stderr
    assert "note: the mismatch is in a bfloat16 output, where rounding alone differs from eager" in r.stderr
    r = run_cli_here(*base, "--reference", "float64")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "its error from the float64 run is" in r.stdout and "eager's own (a bug above 2x)" in r.stdout, r.stdout
    # asked about NaN, pointed to --oracle mismatch: the same note, before a user reduces rounding
    base[base.index("mismatch")] = "nan"
    r = run_cli_here(*base)
    assert "--oracle mismatch asks about that" in r.stdout, r.stdout + r.stderr
    assert "note: the mismatch is in a bfloat16 output, where rounding alone differs from eager" in r.stderr
    # reduce's refusal says it as well: its hint alone sent a user to reduce rounding
    r = run_cli("reduce", *base[1:], "--out", str(model.parent / "out_nan"))
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "try --oracle mismatch (but the mismatch is in a bfloat16 output" in said, said


def test_a_bf16_reduction_keeps_the_bug_not_the_rounding(bf16_host, tmp_path):
    """The planted x1.5 sits among bf16 rounding. Judged against eager alone the reduction
    slips to rounding (a mismatch of a few ulps still passes as the same bug) and warns
    that it may; against the float64 run it keeps mul -> exp, and repro.py judges alike."""
    model, inputs = bf16_host
    base = ["reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
            "--backend", plugin("float32_inside_mul_exp"), "--no-verify"]
    r = run_cli(*base, "--out", str(tmp_path / "eager"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: the mismatch is in a bfloat16 output" in r.stderr + r.stdout
    # and again at the end, under the bug line, which else reads as a bug (a new user's trial)
    end = (r.stderr + r.stdout)[(r.stderr + r.stdout).index("\nbug: ") + 1:]
    assert end.splitlines()[1].startswith("but: the mismatch is in a bfloat16 output"), end
    assert "Precision:" in (tmp_path / "eager" / "report.md").read_text()
    r = run_cli(*base, "--out", str(tmp_path / "f64"), "--reference", "float64", "--emit", "tensorrt")
    assert r.returncode == 0, r.stdout + r.stderr
    from oracles.backends.tensorrt_script import load_npz
    meta = load_npz(tmp_path / "f64" / "repro_tensorrt.npz")[2]  # the TensorRT-only script judges alike
    assert meta["exact"] == 1 and meta["exact_arrays"][0].dtype.name == "float64"
    assert sorted(ops_in(tmp_path / "f64" / "repro.py")) == ["exp.default", "mul.Tensor"]
    assert "exp.default" not in ops_in(tmp_path / "eager" / "repro.py")  # the trap this option is for
    summary = json.loads((tmp_path / "f64" / "summary.json").read_text())
    assert "x eager's own error from float64" in summary["final_verdict"]
    assert "precision" not in summary["diagnosis"]
    script = (tmp_path / "f64" / "repro.py").read_text()
    assert "class Float64" in script and "with Float64():" in script and "off only beyond 2x eager's own" in script
    report = (tmp_path / "f64" / "report.md").read_text()
    assert "only beyond 2x eager's own error from a float64 run" in report
    assert "| index | eager | backend | float64 run |" in report, report  # which of the two is nearer
    assert "float64 run |" not in (tmp_path / "eager" / "report.md").read_text()
    rep = run_repro(tmp_path / "f64")
    assert rep.returncode == 1 and "eager's own error from float64" in rep.stdout, rep.stdout + rep.stderr
    control = run_repro(tmp_path / "f64", backend="eager")
    assert control.returncode == 0 and control.stdout.startswith("FIXED"), control.stdout + control.stderr
    # The script's judgement is the oracle's: a backend that only rounds elsewhere is FIXED there too.
    text = script.replace("float32_inside_mul_exp", "float32_inside")
    (tmp_path / "f64" / "repro_rounding.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    alone = subprocess.run([sys.executable, "repro_rounding.py"], cwd=tmp_path / "f64", capture_output=True,
                           text=True, env=env, timeout=300)
    assert "float32_inside" in text and alone.returncode == 0, alone.stdout + alone.stderr


def test_reference_is_refused_where_it_means_nothing(bf16_host, tmp_path):
    model, inputs = bf16_host
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_sin"),
                "--reference", "float64")
    assert r.returncode == 2 and "drop --reference" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "nan", "--backend", plugin("nan_on_rsqrt"),
                "--reference", "float64", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "a nan is judged without one: drop --reference" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_the_tensorrt_only_script_judges_against_the_saved_float64_run(tmp_path):
    """repro_tensorrt.py (numpy only) gets the float64 run's outputs in its .npz and judges
    as the oracle did."""
    import numpy as np

    from oracles.backends.tensorrt_script import compare_outputs_np, load_npz, save_npz
    exact = torch.linspace(-3, 3, 64, dtype=torch.float64).exp()
    signs = torch.tensor([1.0, -1.0], dtype=torch.float64).repeat(32)
    eager = (exact * (1 + signs * 2 ** -7)).to(torch.bfloat16)
    once = exact.to(torch.bfloat16)
    save_npz(tmp_path / "d.npz", {"x": torch.ones(2)}, [eager], [exact])
    _, expected, meta = load_npz(tmp_path / "d.npz")
    bits = lambda t: t.view(torch.int16).numpy().view(np.uint16)  # noqa: E731 - as TensorRT's bf16 comes back
    args = (["bfloat16"], "mismatch", 1e-3, 1e-3)
    assert compare_outputs_np(expected, [bits(once)], *args)[0]  # against eager alone: rounding is a mismatch
    reproduced, message = compare_outputs_np(expected, [bits(once)], *args, meta["exact_arrays"])
    assert not reproduced and "eager's own error from float64" in message, message
    reproduced, message = compare_outputs_np(expected, [bits(once * 1.5)], *args, meta["exact_arrays"])
    assert reproduced and "x eager's own error from float64" in message, message
    save_npz(tmp_path / "e.npz", {"x": torch.ones(2)}, [eager])
    assert load_npz(tmp_path / "e.npz")[2]["exact_arrays"] is None  # without --reference float64


class NoFloat64Kernel(torch.nn.Module):
    """Stands for an op with no float64 kernel (bf16-only grouped GEMMs, say)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            raise RuntimeError("no kernel for Double")
        return x * 2


def test_a_program_whose_float64_run_fails_cannot_be_judged_and_says_why():
    from oracles.backends import resolve
    from oracles.errors import unjudgeable
    from oracles.evaluate import evaluate
    x = torch.randn(3, dtype=torch.bfloat16)
    assert evaluate(NoFloat64Kernel(), [x], resolve("eager"), Tolerance()).kind == "pass"
    v = evaluate(NoFloat64Kernel(), [x], resolve("eager"), Tolerance(reference="float64"))
    assert v.kind == "invalid" and v.exc_type == "RuntimeError", v
    said = str(unjudgeable(v.exc_type, v.message))
    assert said == "the float64 run of this program fails (RuntimeError: no kernel for Double); drop --reference float64"
    assert str(unjudgeable("KeyError", "x")).startswith("eager PyTorch fails on this program (KeyError: x)")


def test_a_backend_that_loses_an_inf_or_nan_the_float64_run_has_is_off():
    """Values non-finite in eager and the float64 run alike (a -inf mask) are where a backend
    that returns a finite number is infinitely off: they are not left out of the judgement."""
    inf, nan = float("inf"), float("nan")
    tol = Tolerance(1e-3, 1e-3, "float64")
    for lost in (-inf, nan):
        e = torch.tensor([lost, 1.0, 2.0], dtype=torch.bfloat16)
        r = torch.tensor([lost, 1.0, 2.0], dtype=torch.float64)
        v = compare_outputs([e], [torch.tensor([-1e4, 1.0, 2.0], dtype=torch.bfloat16)], tol, [r])
        assert v.kind == "mismatch" and "where eager matches the float64 run" in v.detail, v
    # where eager overflows and the float64 run does not, a finite backend is no worse
    e = torch.tensor([inf, 1.0], dtype=torch.bfloat16)
    r = torch.tensor([3.5e38, 1.0], dtype=torch.float64)
    assert compare_outputs([e], [torch.tensor([3.4e38, 1.0])], tol, [r]).kind == "pass"


def test_a_journal_from_before_reference_does_not_resume_with_float64(tmp_path):
    """Such a journal's verdicts were judged against eager alone: replayed under
    --reference float64 they kept a rounding-only repro that its script calls float64's."""
    from minimize.emit.journal import Journal
    from oracles.errors import TrtminError
    old = {"model_sha256": "ab", "options": {"oracle": "mismatch", "atol": 0.001}}
    (tmp_path / "journal.jsonl").write_text(json.dumps({"header": old}) + "\n")
    Journal(tmp_path, {**old, "options": {**old["options"], "reference": "eager"}}, resume=True).close()
    with pytest.raises(TrtminError, match="--reference 'eager' there, --reference 'float64' now"):
        Journal(tmp_path, {**old, "options": {**old["options"], "reference": "float64"}}, resume=True)


def test_the_script_judges_a_float64_output_of_another_shape_as_the_oracle_does():
    """A data-dependent shape (x[x > t]) may differ in the float64 run: the oracle then
    judges against eager alone, and so does repro.py, rather than broadcast it (a FIXED)."""
    from oracles.script_checks import check_source
    from oracles.verdict import Signature
    ns = {"torch": torch, "ATOL": 1e-4, "RTOL": 1e-4}
    exec(check_source(Signature("mismatch", decade=-1), True), ns)  # noqa: S102 - the script's own source
    r = torch.randn(64, dtype=torch.float64)
    e, a = r.float(), (r * 1.1).float()
    tol = Tolerance(1e-4, 1e-4, "float64")
    for exact in ([r], [r[:1]], [r[:3]]):
        assert compare_outputs([e], [a], tol, exact).kind == "mismatch"
        assert ns["outcome"]([e], [a], exact)[0] == "REPRODUCED", exact[0].shape


def test_a_program_the_float64_run_cannot_run_is_refused_as_such(tmp_path):
    """Not as 'eager PyTorch fails on this program': eager runs it; the float64 run does not."""
    torch.manual_seed(0)
    model, inputs = save_program(WidenedBits(), (torch.randn(4, 8, dtype=torch.bfloat16),), tmp_path)
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "eager",
                     "--reference", "float64")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "the float64 run of this program fails (NotImplementedError: the float64 run cannot reinterpret" in r.stderr
    assert "eager PyTorch fails" not in r.stderr and "drop --reference float64" in r.stderr, r.stderr


@pytest.mark.parametrize("e, a, r", [
    ([1.0, 2.0, 3.0], [1.5, 2.5, 3.0], [1.01, 2.0, 3.02]),              # plainly off
    ([1.0, 2.0, 3.0], [1.001, 2.002, 3.0], [1.002, 2.001, 3.001]),      # within eager's own error
    ([float("-inf"), 1.0, 2.0], [-1e4, 1.0, 2.0], [float("-inf"), 1.0, 2.0]),  # a lost -inf
    ([float("inf"), 1.0], [3.0e38, 1.0], [3.5e38, 1.0]),                # eager overflowed, float64 did not
    ([1.0, 2.0], [1.0, 2.0], [1.0, 2.0]),                               # all exact
])
def test_the_numpy_judgement_is_the_oracles(e, a, r):
    """repro_tensorrt.py's error_ratio_np gives what oracles/reference.py's error_ratio does."""
    import numpy as np

    from oracles.backends.tensorrt_script import error_ratio_np
    from oracles.reference import error_ratio
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    assert error_ratio_np(np.array(e), np.array(a), np.array(r)) == error_ratio(t(e), t(a), t(r))


def test_a_bug_in_a_few_values_of_a_large_output_is_off():
    """By root mean square alone, one value off by 1.0 in a 512 x 512 bf16 output passes
    (it moves the mean by little); by the worst value it is 100s of times eager's error."""
    torch.manual_seed(0)
    exact = torch.randn(512, 512, dtype=torch.float64)
    eager = exact.to(torch.bfloat16)
    backend = eager.clone()
    backend[7, 7] += 1.0
    v = compare_outputs([eager], [backend], Tolerance(1e-3, 1e-3, "float64"), [exact])
    assert v.kind == "mismatch", v
    assert compare_outputs([eager], [eager.clone()], Tolerance(1e-3, 1e-3, "float64"), [exact]).kind == "pass"
