"""Generated values (minimize/search/passes/values.py): the script makes the tensors the bug does
not need the exact values of, and loads only the rest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from minimize.program.candidate import Candidate, make
from minimize.program.literals import tensor_literal
from minimize.search.passes.values import expression, reshaped
from minimize.search.problem import ReductionProblem
from minimize.program.model import Program
from oracles.verdict import Verdict
from tests.conftest import plugin
from tests.helpers import cpu_program, reduce_with, run_cli, run_cli_here


def test_a_float_tensor_is_made_again_with_its_shape_dtype_and_scale() -> None:
    g = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        value = (torch.randn(40, 50, generator=g) * 3.0 + 5.0).to(dtype)
        made = make(expression(value, seed=1))
        assert made.shape == value.shape and made.dtype == dtype
        assert abs(float(made.double().mean()) - 5.0) < 0.3 and abs(float(made.double().std()) - 3.0) < 0.3
        assert torch.equal(made, make(expression(value, seed=1)))  # the same text makes the same tensor
        assert not torch.equal(made, make(expression(value, seed=2)))


def test_integers_keep_their_range_and_booleans_their_share() -> None:
    pixels = torch.randint(10, 200, (32, 48, 3), dtype=torch.uint8)
    made = make(expression(pixels, 0))
    assert made.dtype == torch.uint8 and made.shape == pixels.shape
    assert int(made.min()) >= 10 and int(made.max()) <= int(pixels.max())
    flags = torch.arange(64).remainder(2)  # its largest value is in its range too: made 0s and 1s, not 0s alone
    made = make(expression(flags, 0))
    assert made.unique().tolist() == [0, 1], expression(flags, 0)
    index = torch.arange(100).reshape(4, 25)
    made = make(expression(index, 0))
    assert made.dtype == torch.int64 and 0 <= int(made.min()) and int(made.max()) <= 99
    mask = torch.rand(50, 50, generator=torch.Generator().manual_seed(0)) < 0.25
    made = make(expression(mask, 0))
    assert made.dtype == torch.bool and 0.15 < float(made.double().mean()) < 0.35


def test_constant_tensors_become_full_and_some_tensors_are_left_alone() -> None:
    assert expression(torch.full((8, 8), 2.5), 0) == "torch.full((8, 8), 2.5, dtype=torch.float32)"
    assert expression(torch.ones(5, 5, dtype=torch.bool), 0) == "torch.full((5, 5), True, dtype=torch.bool)"
    assert expression(torch.randn(4), 0) is None  # small: written inline, as it is
    mostly_inf = torch.full((10, 10), float("inf"))
    assert expression(mostly_inf, 0) is None  # not a spread of finite values with a few others
    assert expression(torch.full((10, 10), float("nan")).index_fill(0, torch.tensor([0]), 1.0), 0) is None
    assert expression(3.0, 0) is None


def test_a_few_nans_and_infs_are_made_too_first_in_memory_order() -> None:
    """A NaN in the input may be the bug's trigger (an op that drops it): the made tensor
    keeps as many of each, and the spread of the finite values. Where the bug needs their
    places, the oracle refuses the made tensor and the values stay in the file."""
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0)) * 3 + 1
    x[0, 1, 5, 7], x[1, 0, 0, 0] = float("nan"), float("-inf")
    made = make(expression(x, 4))
    assert made.shape == x.shape and made.dtype == torch.float32
    assert made.reshape(-1)[0].isnan() and made.reshape(-1)[1] == float("-inf")
    assert bool(torch.isfinite(made.reshape(-1)[2:]).all()) and 2.8 < float(made.reshape(-1)[2:].std()) < 3.2
    nine = torch.randn(100)
    nine[:9] = float("nan")
    assert expression(nine, 0) is None  # more than MAX_NON_FINITE: kept as it is
    three = nine.clone()
    three[3:9] = 0.5
    shrunk = make(reshaped(expression(three, 0), (100,), (2,)))  # put_ past the new size raised in the worker
    assert shrunk.shape == (2,) and bool(shrunk.isnan().all())
    assert make(reshaped(expression(three, 0), (100,), (0,))).shape == (0,)
    wide = (torch.rand(1000, generator=torch.Generator().manual_seed(1)) * 120000 - 60000).half()
    wide[5] = float("nan")  # float16's clamp (its randn tails past 65504) holds with a NaN too
    assert int(make(expression(wide, 0)).isinf().sum()) == 0


class _Masked(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = torch.sin(x) * 2
        return y.masked_fill(mask, 0.0).exp()


def _program() -> Program:
    g = torch.Generator().manual_seed(0)
    inputs = (torch.randn(4, 8, generator=g), torch.rand(4, 8, generator=g) < 0.5)
    return Program(torch.export.export(_Masked(), inputs), inputs)


def _reduce(needs: set[str], jobs: int) -> ReductionProblem:
    """A planted bug on masked_fill that survives generated values except for the inputs
    in `needs` (named by what they hold: 'mask' or 'mul')."""
    program = _program()
    fill = next(i for i, n in enumerate(program.nodes) if "masked_fill" in str(n.target))

    def verdict(cand: Candidate) -> Verdict:
        if fill not in cand.nodes or any(name in dict(cand.made) for name in needs):
            return Verdict("pass")
        return Verdict("crash", "E", "planted")

    return reduce_with(program, verdict, jobs=jobs, generate_values=True)


def test_what_the_bug_does_not_need_is_generated_in_few_calls() -> None:
    free = _reduce(set(), jobs=1)
    assert sorted(dict(free.current.made)) == ["mask", "mul"]
    # all at once, and at smaller sizes (minimize/search/passes/shapes.py generate_small_values)
    assert (free.pass_stats["generate_small_values"].calls, free.pass_stats["generate_values"].calls) == (1, 0)
    needs_mask = _reduce({"mask"}, jobs=1)
    assert sorted(dict(needs_mask.current.made)) == ["mul"]  # then the floats together
    assert needs_mask.pass_stats["generate_values"].calls == 2  # after the small run failed
    needs_all = _reduce({"mask", "mul"}, jobs=1)
    assert dict(needs_all.current.made) == {}
    assert needs_all.pass_stats["generate_values"].calls == 2  # one float: nothing to try alone
    # speculation changes nothing of the result
    assert _reduce({"mask"}, jobs=4).current == needs_mask.current


def test_a_reduction_writes_a_script_that_makes_the_weights_it_does_not_need(host_program, tmp_path: Path) -> None:
    model, inputs = host_program
    args = ["reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_linear")]
    made = run_cli(*args, "--out", str(tmp_path / "made"))
    assert made.returncode == 0, made.stderr[-3000:]
    summary = json.loads((tmp_path / "made" / "summary.json").read_text())
    assert "l1_weight" in summary["generated_values"]
    # made and shrunk in one call (generate_small_values): the two passes that try each have nothing left
    assert [summary["passes"][p]["calls"] for p in ("generate_small_values", "generate_values", "shrink_shapes")] == [1, 0, 0]
    script = (tmp_path / "made" / "repro.py").read_text()
    # and the sizes it does not need shrink (minimize/search/passes/shapes.py), the bias's 16 too:
    # its literal keeps its first values
    assert "self.register_buffer('l1_weight', torch.randn((2, 2), generator=torch.Generator().manual_seed(" in script
    assert summary["shrunk_shapes"] == {"l1_weight": [[16, 8], [2, 2]], "l1_bias": [[16], [2]], "x": [[4, 8], [2, 2]]}
    bias = torch.export.load(model).state_dict["l1.bias"]
    assert f"self.register_buffer('l1_bias', {tensor_literal(bias[:2])})" in script
    # its own first values, not made ones: not among the values the report says the script makes (a hunt)
    assert "l1_bias" not in summary["generated_values"] and summary["sliced_values"] == ["l1_bias"], summary
    from minimize.reduce import _leading_slice  # a NaN kept in the slice is still the original's (a review)
    nan = float("nan")
    assert _leading_slice(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0, 2.0]))
    assert not _leading_slice(torch.tensor([0.5, 1.0]), torch.tensor([nan, 1.0, 2.0]))
    assert not (tmp_path / "made" / "repro_inputs.pt").exists() and "repro_inputs.pt" not in summary["files"]
    # trtmin ran it alone, in a new process (what run_repro would run again): REPRODUCED, exit 1
    alone = summary["repro_alone"]
    assert (alone["status"], alone["exit"]) == ("REPRODUCED", 1), alone
    report = (tmp_path / "made" / "report.md").read_text()
    assert "the script makes them" in report and "`x` (4, 8) → (2, 2)" in report
    made_line = next(ln for ln in report.splitlines() if "the script makes them" in ln)
    assert "l1_bias" not in made_line and "- Nor all the values of `l1_bias`: the script keeps their first ones, " \
        "`l1_bias` (16,) → (2,)." in report, report
    # the plugin by its file's name: the folder it is in (a user's home) has no place in an issue
    assert "`planted.py:crash_on_linear` on `cpu`" in report and str(Path(plugin("x")).parent) not in report + script
    # asked not to, it keeps the originals, in the file; the journal's verdicts still hold,
    # so the run resumes with the pass turned off (and makes no oracle call)
    kept = run_cli_here(*args, "--out", str(tmp_path / "made"), "--no-generate-values", "--no-verify", "--resume")
    assert kept.returncode == 0, kept.stderr[-3000:]
    summary = json.loads((tmp_path / "made" / "summary.json").read_text())
    assert summary["generated_values"] == {} and summary["passes"]["generate_values"]["calls"] == 0
    assert summary["shrunk_shapes"] == {} and summary["passes"]["shrink_shapes"]["calls"] == 0
    assert summary["passes"]["generate_small_values"]["calls"] == 0
    assert summary["timing"]["evaluations"] == 0 and summary["timing"]["replayed_verdicts"] > 0  # said so
    assert (tmp_path / "made" / "repro_inputs.pt").exists() and "repro_inputs.pt" in summary["files"]


class _PooledCamera(torch.nn.Module):
    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = torch.relu(image * 2.0 + 1.0)
        return features.amax(dim=(2, 3)).sum(dim=1) + 1.0


def test_an_input_whose_nan_is_the_trigger_is_made_not_carried_in_a_file(tmp_path: Path) -> None:
    """A maintainer's review: a one-op bug that drops a NaN (ONNX Runtime's ReduceMax) kept
    the whole 6144-value camera image in repro_inputs.pt. The image is now made, its NaN
    first, and shrunk: no file, and the script reproduces alone."""
    from tests.conftest import save_program

    image = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    image[0, 1, 5, 7] = float("nan")
    model, inputs = save_program(_PooledCamera().eval(), (image,), tmp_path)
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                plugin("amax_drops_nan"), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    script = (tmp_path / "out" / "repro.py").read_text()
    [(name, made)] = summary["generated_values"].items()  # amax's input: the image, or what was cut before it
    assert "amax" in script and ".put_(torch.arange(1), torch.tensor([float('nan')]" in made, made
    assert summary["shrunk_shapes"][name][1] == [2, 2, 2, 2], summary["shrunk_shapes"]
    assert not (tmp_path / "out" / "repro_inputs.pt").exists(), summary["files"]
    assert summary["repro_alone"]["status"] == "REPRODUCED", summary["repro_alone"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_the_expression_needs_nothing_but_torch(dtype: torch.dtype) -> None:
    value = torch.arange(64).reshape(8, 8).to(dtype)
    text = expression(value, 3)
    assert text is not None and text.startswith("torch.")
    with pytest.raises(NameError):
        eval(text, {"__builtins__": {}})  # noqa: S307  (without torch it cannot run: it uses nothing else)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_wide_unsigned_integers_are_made_again(dtype: torch.dtype) -> None:
    """min and max are not implemented for these: the pass raised, at the end of a reduction."""
    value = torch.arange(100, 164).reshape(8, 8).to(dtype)
    made = make(expression(value, 0))
    assert made.dtype == dtype and made.shape == value.shape
    assert 100 <= int(made.to(torch.int64).min()) and int(made.to(torch.int64).max()) <= 163
    assert expression(torch.tensor([0, 2**64 - 1] * 10, dtype=torch.uint64), 0) is None  # beyond randint


def test_float64_too_large_for_a_finite_scale_is_left_alone() -> None:
    """The variance of 1e300 overflows, and 1.7976e308 rounds to 1.798e308: the text said
    `inf`, which make() (and a worker) cannot evaluate."""
    for big in (1e300, 1.7976e308):
        value = torch.tensor([big, -big] * 10, dtype=torch.float64)
        text = expression(value, 0)
        assert text is None or torch.isfinite(make(text)).all()
    assert expression(torch.full((20,), 1.7976e308, dtype=torch.float64), 0) is None


def test_constants_and_masks_are_made_in_a_fresh_process() -> None:
    """A Python float as a fill value or an operand makes torch's C code import through the
    frame's builtins: with none, make() raised KeyError '__import__' in a process that had
    not called torch.full before, e.g. at the end of a reduction, which it lost."""
    import subprocess
    import sys
    code = ("from minimize.program.candidate import make\n"
            "print(make('torch.full((32,), 1.0, dtype=torch.float32)').sum().item(),\n"
            "      make('torch.rand((20,), generator=torch.Generator().manual_seed(3)) < 0.25').dtype)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0 and r.stdout.split() == ["32.0", "torch.bool"], r.stderr[-2000:]



class _TwoOnes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("a", torch.ones(32))
        self.register_buffer("b", torch.ones(32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.a + self.b


COUNTING_PLUGIN = '''
def count_inputs(gm, example_inputs):
    raise RuntimeError(f"{len(example_inputs)} inputs")
'''


def test_a_worker_makes_each_generated_value_apart_even_where_two_texts_are_the_same(tmp_path: Path) -> None:
    """Two weights of ones have one expression; the worker made it once and gave both names
    that one tensor, where repro.py (and the state the workers load) has two: Dynamo folds
    aliased weights into one graph input, so the compiler was given another graph."""
    from tests.helpers import worker_in_process
    inputs = (torch.randn(32),)
    program = Program(torch.export.export(_TwoOnes(), inputs), inputs)
    exprs = {n: expression(program.values[n], seed) for seed, n in enumerate(sorted(program.constants))}
    assert len(exprs) == 2 and len(set(exprs.values())) == 1
    run = worker_in_process(tmp_path, program, COUNTING_PLUGIN, "count_inputs")
    original = run({"kept": list(program.all_kept()), "settings": {}})
    generated = run({"kept": list(program.all_kept()), "settings": {}, "generated": exprs})
    assert original["message"] == "3 inputs" and generated["message"] == original["message"], generated


def test_the_mean_keeps_the_precision_of_the_spread_and_a_constant_its_value() -> None:
    """4 significant digits of the mean moved 1000.15 ± 0.03 to 1000.0 (5 standard deviations:
    no value in the original's range), and float64 made in float32 is in steps of 128 at 1.7e9."""
    g = torch.Generator().manual_seed(0)
    narrow = torch.randn(40, 50, generator=g) * 0.03 + 1000.15
    made = make(expression(narrow, 0))
    assert abs(float(made.double().mean()) - 1000.15) < 0.005 and abs(float(made.double().std()) - 0.03) < 0.005
    stamps = torch.randn(40, 50, generator=g, dtype=torch.float64) * 100.0 + 1.7123456e9
    made = make(expression(stamps, 0))
    assert made.dtype == torch.float64
    assert abs(float(made.mean()) - 1.7123456e9) < 10 and abs(float(made.std()) - 100.0) < 10
    scale = torch.full((8, 8), 128 ** -0.5)
    assert torch.equal(make(expression(scale, 0)), scale)


def test_no_inf_where_the_original_has_none() -> None:
    """float16 near its largest value: randn's tails were cast to inf, which the pass refuses
    to take away from an input (it may be the trigger) and so must not add."""
    for dtype, big in ((torch.float16, 65000.0), (torch.float32, 3e38)):
        value = torch.tensor([big, -big] * 50, dtype=torch.float32).to(dtype)
        made = make(expression(value, 0))
        assert made.dtype == dtype and bool(torch.isfinite(made).all())


def test_the_same_text_makes_the_same_floats_on_every_cpu_kernel() -> None:
    """float32's randn has an AVX2 kernel and a default one (ARM's), which differ in the last
    bits of 4 values in 10: a script reduced on x86 ran on other values on a Jetson or a Grace."""
    import subprocess
    import sys
    value = torch.randn(64, 64, generator=torch.Generator().manual_seed(0)) * 0.5 + 0.1
    # the floats, then the other kinds (rand, randint and complex randn are made in one kernel)
    text = " + ".join([f"{expression(value, 3)}.double()",
                       f"{expression(value.to(torch.complex64), 4)}.real.double()",
                       f"({expression(value > 0.3, 5)}).double()",
                       f"{expression((value * 100).to(torch.int64), 6)}.double()"])
    code = ("import hashlib, sys\nfrom minimize.program.candidate import make\n"
            "print(hashlib.sha256(make(sys.argv[1]).numpy().tobytes()).hexdigest())\n")
    digests = set()
    for capability in ("default", "avx2"):
        r = subprocess.run([sys.executable, "-c", code, text], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parent.parent,
                           env={**os.environ, "ATEN_CPU_CAPABILITY": capability})
        assert r.returncode == 0, r.stderr[-2000:]
        digests.add(r.stdout.strip())
    assert len(digests) == 1


def test_tensor_subclasses_are_left_alone() -> None:
    """torchao's quantized weights stay subclasses in an exported program (read through
    access_subclass_inner_tensor): the expression raised NotImplementedError on them (aten.abs),
    after the reduction's last oracle call, and a plain tensor could not stand in anyway."""

    class Tagged(torch.Tensor):
        pass

    assert expression(torch.randn(8, 8).as_subclass(Tagged), 0) is None
    assert expression(torch.nn.Parameter(torch.randn(8, 8)), 0) is not None
    quantization = pytest.importorskip("torchao.quantization")
    linear = torch.nn.Sequential(torch.nn.Linear(32, 32))
    quantization.quantize_(linear, quantization.Int8WeightOnlyConfig())
    assert expression(linear[0].weight, 0) is None


def test_a_mask_almost_all_true_is_not_made_all_true() -> None:
    mask = torch.ones(100_000, dtype=torch.bool)
    mask[7] = False
    text = expression(mask, 0)
    assert text is not None and not text.endswith("< 1.0") and float(text.rsplit("<", 1)[1]) < 1.0


def test_a_value_no_expression_can_be_made_for_is_kept_not_the_end_of_the_reduction(monkeypatch) -> None:
    """The pass is an optional last step: a value it cannot make stays as it is."""
    import minimize.search.passes.values as values
    real = values.expression

    def fails_on_masks(value, seed):
        if value.dtype == torch.bool:
            raise NotImplementedError("a layout nobody foresaw")
        return real(value, seed)

    monkeypatch.setattr(values, "expression", fails_on_masks)
    problem = _reduce(set(), jobs=1)
    assert sorted(dict(problem.current.made)) == ["mul"]
    assert problem.pass_stats["generate_small_values"].calls + problem.pass_stats["generate_values"].calls == 1


def test_complex_tensors_are_made_too_even_small_ones() -> None:
    """RoPE's rotations: complex, which the script cannot write inline (even 4 of them went
    to repro_inputs.pt); made with their mean and spread, the same on every CPU kernel."""
    angles = torch.arange(98).double()[:, None] * torch.linspace(0.01, 1.0, 4)[None]
    freqs = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
    made = make(expression(freqs, 1))
    assert made.dtype == torch.complex64 and made.shape == freqs.shape
    assert abs(complex(made.mean()) - complex(freqs.mean())) < 0.15
    assert abs(float(made.std()) - float(freqs.std())) < 0.1
    assert make(expression(freqs[:2, :2], 1)).shape == (2, 2)  # 4 values: not inline, so made
    with_nan = freqs.clone()
    with_nan[0, 0] = complex(float("nan"), 0.0)
    assert expression(with_nan, 1) is None
    assert make(expression(torch.full((4, 5), complex(0.5, -1.0)), 0)).eq(complex(0.5, -1.0)).all()


def test_the_ops_before_a_crash_are_compiled_with_the_weights_made_for_them() -> None:
    """A crash of two ops, its values made and shrunk (the Linear's weight too): the check of
    what the failing op reads compiles the ops before it with every value made for them. It
    took only the made inputs, and the Linear met its original 32x32 weight against a
    shrunk input: "mat1 and mat2 shapes cannot be multiplied", unjudged and unsaid."""
    from types import SimpleNamespace

    from minimize.reduce import _read_values_off

    x = torch.randn(4, 32)
    program = Program(torch.export.export(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()).eval(), (x,)), [x])
    linear = [i for i, n in enumerate(program.nodes) if "linear" in str(n.target) or "addmm" in str(n.target)]
    relu = [i for i, n in enumerate(program.nodes) if "relu" in str(n.target)]
    assert len(linear) == 1 and len(relu) == 1, [str(n.target) for n in program.nodes]
    weights = [dep.name for dep in program.nodes[linear[0]].all_input_nodes if dep.name != "input"]
    made = {name: f"torch.randn({(2, 2) if 'weight' in name else (2,)})" for name in weights}
    made["input"] = "torch.randn((4, 2))"
    asked = []

    def verdict(cand: Candidate) -> Verdict:
        asked.append(cand)
        return Verdict("pass")

    from minimize.search.problem import Counters

    found = Candidate(tuple(linear + relu)).but(made=made, sizes={})
    problem = SimpleNamespace(signature=SimpleNamespace(kind="crash"), verdict=verdict, pass_stats={},
                              counters=Counters(), current=found)
    assert _read_values_off(program, problem, found) is None  # the ops before match eager: nothing to say
    assert [c.nodes for c in asked] == [tuple(linear)], asked
    assert dict(asked[0].made) == made, asked[0].made  # the weights' made values too, not the input's alone


def test_a_made_value_writes_no_scale_or_shift_that_does_nothing() -> None:
    """A layer_norm's output (mean 5.5e-10, spread 1) was made as randn(...).mul(1.0).add(5.502e-10):
    rounding noise in the script a maintainer reads. A mean under a thousandth of the spread
    and a spread of 1 at the digits written are left out; a real shift and scale stay."""
    torch.manual_seed(0)
    normed = torch.nn.functional.layer_norm(torch.randn(2, 12, 32), (32,))
    made = expression(normed, 0)
    assert made is not None and ".add(" not in made, made
    assert expression(normed / normed.std(), 0) == ("torch.randn((2, 12, 32), generator=torch.Generator()"
                                                   ".manual_seed(0), dtype=torch.float64).to(torch.float32)")
    shifted = expression(torch.randn(64, 64) * 3 + 2, 0)
    assert shifted is not None and ".mul(2.9" in shifted and ".add(1.9" in shifted, shifted
    # a shift of a twentieth of the spread is no rounding noise: it stays (a mean under a
    # thousandth of the spread is what goes)
    small = torch.randn(64, 64, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    small = (small - small.mean()) / small.std() * 3 + 0.15
    made = expression(small.float(), 0)
    assert made is not None and ".add(0.15" in made, made


def test_weights_that_go_to_the_file_are_read_from_it():
    """Only a weight is too big to write in the script: Repro's __init__ loads the file
    itself (repro.py raised NameError: tensors where only the inputs' code loaded it)."""
    from minimize.emit.script import tensors_source
    init, _, big = tensors_source({"x": torch.randn(2)}, {"w": torch.randn(64, 64)})
    assert set(big) == {"w"} and "tensors = torch.load(" in init, init


def test_a_value_that_is_a_view_goes_to_the_file_without_the_rest_of_its_storage():
    """torch.save writes a view's whole storage: a row of a (64, 4096) value, as a cut
    value or a user's input, made repro_inputs.pt 64 times its size."""
    from minimize.emit.script import tensors_source
    row = torch.randn(64, 4096)[1]
    _, _, big = tensors_source({"row": row}, {})
    assert big["row"].untyped_storage().nbytes() == row.nbytes and torch.equal(big["row"], row)


class FiveSizes(torch.nn.Module):
    def forward(self, a, b, c, d, e):
        return a.sum() + b.sum() + c.sum() + d.sum() + e.sum()


def test_where_one_value_is_the_bug_the_largest_others_are_made_one_at_a_time() -> None:
    """generate_values' last step: all made at once lost the bug (it needs `a`'s own
    values), so the largest float tensors are made each alone, which is what shrinks
    repro_inputs.pt; the smallest stay."""
    from minimize.search.passes.values import ONE_AT_A_TIME, generate_values
    from minimize.search.problem import Rules
    sizes = [(8, 8), (8, 9), (8, 10), (8, 11), (8, 12)]  # each too big to write in the script
    args = [torch.randn(s) for s in sizes]
    program = cpu_program(FiveSizes(), *args)
    problem = ReductionProblem(program, lambda cands: [Verdict("pass") if "a" in dict(c.made)
                                                       else Verdict("crash", "E", "bug") for c in cands],
                               Rules(generate_values=True))
    problem.establish_original()
    generate_values(problem)
    assert ONE_AT_A_TIME == 3 and sorted(dict(problem.current.made)) == ["c", "d", "e"], problem.current.made


class _Difference(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a - b).abs().sum()


def test_two_values_of_one_shape_are_made_apart() -> None:
    """Each made value is seeded by its place: two of one shape and scale (here the same
    values in another order) made with one seed would be equal, and a - b would be zeros,
    which may hide the bug or make another."""
    from minimize.search.passes.values import made_expressions
    from minimize.search.problem import Rules
    a = torch.randn(8, 8, generator=torch.Generator().manual_seed(0))
    program = cpu_program(_Difference(), a, a.flip(0))
    problem = ReductionProblem(program, lambda cands: [Verdict("crash", "E", "bug") for _ in cands],
                               Rules(generate_values=True))
    problem.establish_original()
    exprs = made_expressions(problem)
    assert sorted(exprs) == ["a", "b"] and not torch.equal(make(exprs["a"]), make(exprs["b"])), exprs


def test_a_nan_of_another_sign_or_payload_keeps_its_bits_in_the_script() -> None:
    """A literal writes every NaN as `nan` (0x7fc00000 in float32): a negative NaN or one
    with a payload, which the workers fed and a compiler may read, was lost, and the
    reduced bug said FIXED alone. Such a tensor goes to the file, which keeps its bits; a
    Python float of one is written as its bits."""
    import struct

    from minimize.emit.script import tensors_source
    from minimize.program.literals import tensor_literal
    odd = torch.zeros(4)
    odd.view(torch.int32)[0] = -4194304  # 0xffc00000: a negative NaN
    payload = torch.zeros(3, dtype=torch.bfloat16)
    payload.view(torch.int16)[1] = 0x7FC1
    _, source, big = tensors_source({"odd": odd, "payload": payload, "plain": torch.tensor([float("nan"), 1.0])}, {})
    assert set(big) == {"odd", "payload"} and "torch.tensor([nan, 1.0]" in source, source
    assert torch.equal(big["odd"].view(torch.int32), odd.view(torch.int32))
    assert torch.equal(big["payload"].view(torch.int16), payload.view(torch.int16))
    negative = struct.unpack("<d", struct.pack("<q", -2251799813685248))[0]  # 0xfff8000000000000
    made = eval(tensor_literal(negative), {"torch": torch})
    assert struct.pack("<d", made) == struct.pack("<d", negative) and tensor_literal(float("nan")) == "nan"
