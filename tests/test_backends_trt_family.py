"""The TensorRT family of backends: torch_tensorrt, tensorrt, onnxruntime, executorch.

What runs here (CPU): onnxruntime end to end, the ONNX export + .npz + TensorRT-only
script (through its onnxruntime reference path), executorch:xnnpack/portable, setting
validation and parsing, missing-package errors, the environment report. TensorRT and
Torch-TensorRT themselves need an NVIDIA GPU; their tests here check only what can be
checked without them, and skip where the package is in fact installed.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from minimize.program.model import Program
from oracles.backends import BUILTIN, resolve
from oracles.backends.onnx_export import export_onnx
from oracles.backends.tensorrt import TensorRTBackend, parse_trt_settings
from oracles.backends.tensorrt_script import compare_outputs_np, load_npz_torch, write_tensorrt_script
from oracles.backends.torch_tensorrt import (Expr, TorchTensorRTBackend, parse_settings, parse_value,
                                             render_value, valid_option_names)
from oracles.checks import Tolerance, flatten_outputs
from oracles.environment import collect_environment, format_environment
from oracles.errors import MissingPackageError, TrtminError
from oracles.evaluate import evaluate
from tests.helpers import ROOT, alone_env

HAS_TORCH_TRT = importlib.util.find_spec("torch_tensorrt") is not None
HAS_TRT = any(importlib.util.find_spec(m) is not None for m in ("tensorrt", "tensorrt_rtx"))
HAS_ORT = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnxscript") is not None
HAS_ET = importlib.util.find_spec("executorch") is not None
needs_ort = pytest.mark.skipif(not HAS_ORT, reason="onnxruntime / onnxscript not installed")
needs_et = pytest.mark.skipif(not HAS_ET, reason="executorch not installed")


class LinearBN3d(nn.Module):
    """BatchNorm1d over dim 1 of a Linear's 3-D output (N, C, F): XNNPACK folds the BN
    into the Linear along the wrong axis (ExecuTorch 1.4.1), a silent ~1.5 mismatch."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 5)
        self.bn = nn.BatchNorm1d(5)
        self.bn.running_mean.uniform_(-1, 1)
        self.bn.running_var.uniform_(0.5, 2)
        self.bn.weight.data.uniform_(0.5, 2)
        self.bn.bias.data.uniform_(-1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.l(x))


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.relu(self.l(x)) * 2, torch.softmax(y, -1) + x.sum(), y.mean()  # a 0-d output too


def candidate(model: nn.Module, inputs: tuple) -> tuple[torch.fx.GraphModule, list]:
    """The whole program as trtmin hands it to a backend: weights are attributes."""
    program = Program(torch.export.export(model.eval(), inputs).run_decompositions({}), list(inputs))
    piece = program.materialize(program.all_kept())
    return piece.gm, program.inputs_for(piece)


@pytest.fixture(scope="module")
def small() -> tuple[torch.fx.GraphModule, list]:
    torch.manual_seed(0)
    return candidate(Small(), (torch.randn(3, 8), torch.randn(3, 4)))


@pytest.fixture(scope="module")
def linear_bn() -> tuple[torch.fx.GraphModule, list]:
    torch.manual_seed(0)
    return candidate(LinearBN3d(), (torch.randn(2, 5, 8),))


# ---- registry, missing packages ----------------------------------------------------------

def test_registered_names() -> None:
    for name in ("torch_tensorrt", "tensorrt", "onnxruntime", "executorch:xnnpack", "executorch:portable",
                 "executorch:cuda", "executorch:tensorrt"):
        assert name in BUILTIN


@pytest.mark.skipif(HAS_TORCH_TRT, reason="torch_tensorrt is installed here")
def test_missing_torch_tensorrt_is_one_line() -> None:
    with pytest.raises(MissingPackageError) as info:
        resolve("torch_tensorrt")
    text = str(info.value)
    assert "\n" not in text
    assert "torch_tensorrt package" in text and "pip install torch-tensorrt" in text


@pytest.mark.skipif(HAS_TRT, reason="tensorrt is installed here")
def test_missing_tensorrt_is_one_line() -> None:
    with pytest.raises(MissingPackageError) as info:
        resolve("tensorrt")
    assert "\n" not in str(info.value) and "pip install tensorrt" in str(info.value)
    assert "pip install 'tensorrt-rtx==" in str(info.value)


def test_a_missing_packages_hint_pins_the_version_trtmin_pins() -> None:
    """A bare `pip install executorch` took 1.5.1, built for another torch than the 2.13
    that pyproject.toml's extra pairs it with (a newcomer's hunt): the hint names the pin."""
    import tomllib

    from oracles.backend_setup import pip_install
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, package in (("executorch", "executorch"), ("onnx", "onnxruntime"), ("tensorrt", "tensorrt-rtx")):
        pin = next(r for r in extras[extra] if r.startswith(package) and not r[len(package)].isalpha()
                   and r[len(package)] != "-")
        assert pip_install(package) == f"pip install '{pin}' (trtmin's pin; pip install -e '.[{extra}]' in its checkout)"
    assert pip_install("not-a-dependency") == "pip install not-a-dependency"


def test_unknown_executorch_variant() -> None:
    with pytest.raises(TrtminError, match="executorch:xnnpack"):
        resolve("executorch:xnnpak")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_gpu_variants_need_a_gpu() -> None:
    if not HAS_ET:
        pytest.skip("executorch not installed")
    with pytest.raises(TrtminError, match="GPU"):
        resolve("executorch:cuda")


# ---- settings ------------------------------------------------------------------------------

def test_unknown_set_key_refused_with_suggestion() -> None:
    with pytest.raises(TrtminError) as info:
        TorchTensorRTBackend("torch_tensorrt", {"min_blok_size": "1"})
    assert "min_blok_size" in str(info.value) and "min_block_size" in str(info.value)
    with pytest.raises(TrtminError, match="fp16"):
        TensorRTBackend("tensorrt", {"fp61": "true"})
    if HAS_ORT:
        with pytest.raises(TrtminError, match="graph_optimization_level"):
            resolve("onnxruntime", {"graph_optimisation_level": "all"})
    with pytest.raises(TrtminError, match="takes no settings"):
        BUILTIN["executorch:portable"]("executorch:portable", {"anything": "1"})


@pytest.mark.skipif(HAS_TORCH_TRT, reason="checks the static Torch-TensorRT 2.13 option list")
def test_removed_option_explained() -> None:
    names, source = valid_option_names()
    assert "min_block_size" in names and "enabled_precisions" not in names and "2.13" in source
    with pytest.raises(TrtminError, match="removed in Torch-TensorRT 2.13"):
        parse_settings({"enabled_precisions": "fp16"})


def test_a_run_without_settings_asks_nothing_of_torch_tensorrt(monkeypatch) -> None:
    """Listing Torch-TensorRT's options imports it: 5 s in the main process at each run's
    start on the H200, and its warnings on the terminal. Only --set keys need the list."""
    from oracles.backends import torch_tensorrt as backend_module

    def listed():
        raise AssertionError("torch_tensorrt's options were listed for a run without --set")

    monkeypatch.setattr(backend_module, "valid_option_names", listed)
    assert TorchTensorRTBackend("torch_tensorrt", {}).options == {"min_block_size": 1}
    with pytest.raises(AssertionError, match="without --set"):
        TorchTensorRTBackend("torch_tensorrt", {"min_block_size": "2"})


def test_an_emitted_script_takes_only_the_settings_its_backend_takes() -> None:
    """--emit for another backend: of the reduced backend's --set settings, those the other
    also takes go with it, and the rest stay with the backend they were for (a TensorRT flag
    in an ONNX Runtime session would be refused)."""
    from minimize.emit.outputs import settings_for
    settings = {"graph_optimization_level": "basic", "fp16": "true", "max_autotune": "true"}
    assert settings_for("onnxruntime", settings) == {"graph_optimization_level": "basic"}
    assert settings_for("tensorrt", settings) == {"fp16": "true"}
    assert settings_for("inductor", settings) == {"max_autotune": "true"}


def test_setting_values_parsed() -> None:
    parsed = parse_settings({
        "min_block_size": "3", "enable_autocast": "true", "autocast_low_precision_type": "fp16",
        "torch_executed_ops": "aten.add.Tensor,torch.ops.aten.mul.Tensor", "optimization_level": "none",
        "dryrun": "false", "tiling_optimization_level": "none", "engine_capability": "standard",
        "workspace_size": "1_000", "autocast_max_output_threshold": "512.5",
    })
    assert parsed["min_block_size"] == 3 and parsed["enable_autocast"] is True
    assert parsed["autocast_low_precision_type"] is torch.float16
    assert parsed["torch_executed_ops"] == {"torch.ops.aten.add.Tensor", "torch.ops.aten.mul.Tensor"}
    assert parsed["optimization_level"] is None and parsed["dryrun"] is False
    assert parsed["tiling_optimization_level"] == "none"  # a string option, not None
    assert parsed["engine_capability"] == Expr("torch_tensorrt.EngineCapability.STANDARD")
    assert parsed["workspace_size"] == 1000 and parsed["autocast_max_output_threshold"] == 512.5
    # older releases' precision list, as Torch-TensorRT <= 2.12 takes it
    assert parse_value("enabled_precisions", "fp16,fp32") == {torch.float16, torch.float32}
    assert render_value({torch.float32, torch.float16}) == "{torch.float16, torch.float32}"
    with pytest.raises(TrtminError, match="expected an integer"):
        parse_settings({"min_block_size": "three"})
    with pytest.raises(TrtminError, match="unknown dtype"):
        parse_value("autocast_low_precision_type", "fp17")
    for level in ("9", "-1"):  # TensorRT would build at level 5 (or its default) without a word
        with pytest.raises(TrtminError, match=f"optimization_level={level}: TensorRT takes 0 to 5"):
            parse_settings({"optimization_level": level}, valid=["optimization_level"])
        with pytest.raises(TrtminError, match=f"optimization_level={level}: TensorRT takes 0 to 5"):
            parse_trt_settings({"optimization_level": level})
    for size in ("-5", str(2**64)):  # a size_t: set_memory_pool_limit's TypeError, a traceback, before
        with pytest.raises(TrtminError, match=f"workspace={size}: TensorRT takes 0 to {2**64 - 1} \\(bytes"):
            parse_trt_settings({"workspace": size})
    trt = parse_trt_settings({"fp16": "true", "tf32": "off", "flags": "strict_nans", "optimization_level": "5",
                              "workspace": "0x40000000", "strongly_typed": "no", "opset": "18"})
    assert trt == {"builder_flags": {"FP16": True, "TF32": False, "STRICT_NANS": True}, "optimization_level": 5,
                   "workspace": 1 << 30, "strongly_typed": False, "opset": 18}


@needs_ort
def test_an_opset_the_exporter_cannot_write_is_refused_not_used_silently(tmp_path: Path) -> None:
    """torch.onnx.export writes another opset (18 here) without a word where its converter
    cannot reach the one asked for. An opset ONNX does not know is refused as the setting is
    read; one the converter fails on a program is no verdict on it (invalid: never the bug,
    also under --any-failure or a --match of the exporter's), and for the original, the
    setting's mistake (exit 2, one line, check and reduce alike)."""
    from oracles.backends.onnxruntime import parse_ort_settings
    from tests.conftest import save_program
    from tests.helpers import run_cli_here

    for parse in (parse_ort_settings, parse_trt_settings):
        with pytest.raises(TrtminError, match=r"opset=99: ONNX .* knows opsets 1 to \d+; torch.onnx.export writes "
                                              "the newer ones itself and converts down"):
            parse({"opset": "99"})
    assert parse_ort_settings({"opset": "17"}) == {"opset": 17}
    model, args = nn.Linear(4, 3).eval(), (torch.randn(2, 4),)
    v = evaluate(*candidate(model, args), resolve("onnxruntime", {"opset": "7"}), Tolerance())
    assert v.kind == "invalid" and v.exc_type == "SettingNotHonoured", v
    pt2, inputs = save_program(model, args, tmp_path)
    for command in ("check", "reduce"):
        r = run_cli_here(command, str(pt2), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                         "onnxruntime", "--set", "opset=7", *(["--out", str(tmp_path / "out")] if command == "reduce"
                                                              else []))
        said = r.stderr.strip().splitlines()
        assert r.returncode == 2 and "Traceback" not in r.stderr, (command, r.stderr)
        assert said[-1] == ("error: --set opset=7: torch.onnx.export made opset 18 for this program, not 7 (its "
                            "version converter cannot convert it); drop --set opset (the exporter's default) or pick "
                            "another"), (command, said[-1])
    exported = export_onnx(*candidate(model, args), tmp_path / "m.onnx", opset=17)  # the converter reaches 17
    import onnx
    assert [o.version for o in onnx.load(str(exported.path)).opset_import if o.domain in ("", "ai.onnx")] == [17]


def test_torch_tensorrt_script_part_has_the_settings() -> None:
    be = TorchTensorRTBackend("torch_tensorrt", {"enable_autocast": "true", "autocast_low_precision_type": "bf16"})
    part = be.script_part()
    assert part.requires == ["torch_tensorrt"]
    assert ("torch_tensorrt.dynamo.compile(ep, arg_inputs=tensorrt_inputs(ep, runtime_inputs), min_block_size=1, "
            "enable_autocast=True, autocast_low_precision_type=torch.bfloat16)") in part.compile_body
    assert "def tensorrt_inputs(ep, inputs):" in "".join(part.imports)  # the script defines what it calls
    ast.parse("def compile_backend(module, inputs):\n    " + part.compile_body)  # valid Python as placed
    for source in part.imports:
        ast.parse(source)


def test_candidates_keep_parameters_as_weights(linear_bn) -> None:
    gm, inputs = linear_bn
    assert len(inputs) == 1  # only x is an input: the 6 weights and statistics are attributes
    assert sum(n.op == "get_attr" for n in gm.graph.nodes) == 6


# ---- onnxruntime ------------------------------------------------------------------------------

@needs_ort
def test_onnxruntime_matches_eager(small) -> None:
    gm, inputs = small
    assert evaluate(gm, inputs, resolve("onnxruntime"), Tolerance()).kind == "pass"


@needs_ort
def test_onnxruntime_argmax_nan_differs_from_eager() -> None:
    """A real difference: eager argmax returns the NaN's index, onnxruntime's ArgMax skips NaN."""

    class ArgMax(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).argmax(-1)

    x = torch.tensor([[1.0, float("nan"), 2.0], [0.0, 3.0, 1.0]])
    gm = torch.export.export(ArgMax(), (x,)).module()  # an unlifted module, as users build them
    verdict = evaluate(gm, [x], resolve("onnxruntime"), Tolerance())
    assert verdict.kind == "mismatch" and verdict.output == 0 and verdict.max_abs == 1.0


class ArgMaxHost(nn.Module):
    """A small head whose argmax meets a NaN: eager returns the NaN's index, onnxruntime's
    ArgMax skips it (onnxruntime 1.2x), a real mismatch in a few nodes."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.l(x)) + 1
        return (h * w).argmax(-1), h.mean()


class FakeQuantConv(nn.Module):
    """Fake-quantized activations around a float conv: ONNX Q/DQ pairs around Conv."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.fake_quantize_per_tensor_affine(x, 0.05, 0, -128, 127)
        return torch.fake_quantize_per_tensor_affine(torch.relu(self.enc(x)), 0.02, 3, -128, 127)


@needs_ort
def test_a_bug_of_onnxruntimes_graph_optimizer_is_said_so(tmp_path: Path) -> None:
    """ONNX Runtime 1.32's optimizer quantizes a float Conv's weights that sit between
    DequantizeLinear and QuantizeLinear (a quantized hunt: off by one step, 0.02); with
    graph_optimization_level=disable it matches eager. The report said "onnxruntime computes
    it wrong" and never tried that: one call at the end now names it."""
    import json

    from tests.conftest import save_program
    from tests.helpers import run_cli

    torch.manual_seed(0)
    model, inputs = save_program(FakeQuantConv().eval(), (torch.randn(2, 3, 8, 8) * 3,), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--backend", "onnxruntime", "--oracle", "mismatch",
                "--out", str(out), "--no-verify")
    if r.returncode == 2 and "does not fail" in r.stderr + r.stdout:
        pytest.skip("this ONNX Runtime computes the fake-quantized conv as eager does")
    assert r.returncode == 0, r.stderr[-2000:]
    lowering = json.loads((out / "summary.json").read_text())["diagnosis"]["lowering"]
    assert lowering == ("the bug is in the compiler's rewrite of the whole graph (its graph optimizations: a fusion, "
                        "a folded constant, a layout change), not in its ops as written: it vanishes with --set "
                        "graph_optimization_level=disable"), lowering
    assert "- Lowering: the bug is in the compiler's rewrite" in (out / "report.md").read_text()


@needs_ort
def test_onnxruntime_mismatch_reduced_and_its_short_script_reproduces_alone(tmp_path: Path) -> None:
    """A static program gets repro.py's short ONNX Runtime form (export to a folder, a
    session fed numpy by input name), not the pasted runner; alone, it reproduces the real
    mismatch, its eager control passes, and pyflakes finds nothing."""
    import json

    from tests.conftest import save_program
    from tests.helpers import run_cli, run_repro

    torch.manual_seed(0)
    x, w = torch.randn(4, 6), torch.rand(4, 6)
    w[1, 2] = float("nan")
    model, inputs = save_program(ArgMaxHost().eval(), (x, w), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--backend", "onnxruntime", "--oracle", "mismatch",
                "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((out / "summary.json").read_text())["final_verdict"].startswith("MISMATCH")
    # the NaN the bug needs sits in repro_inputs.pt: the report says where, or it reads as an argmax bug
    said = " ".join((out / "report.md").read_text().split())
    assert "The inputs are not all finite: `mul` holds 1 NaN of 24 values (the first at [1, 2])." in said, said[:1500]
    script = (out / "repro.py").read_text()
    assert "onnxruntime.InferenceSession(" in script and "def run_onnxruntime" not in script, script
    assert len(script.splitlines()) <= 80, len(script.splitlines())
    if importlib.util.find_spec("pyflakes"):
        from tests.test_script_lint import lint
        assert not lint(script, "repro.py")
    # whose bug: ONNX's reference evaluator runs the same model.onnx as eager does (its ArgMax
    # keeps the NaN's index), so the model is right and ONNX Runtime runs it wrong
    assert "- Exported model: ONNX's reference evaluator (onnx " in said and \
        "matches eager PyTorch: the model torch.onnx made is right, and onnxruntime computes it wrong." in said, said
    # its kernel's bug: turning the graph optimizations off leaves it, so no rewrite is blamed
    assert "Lowering:" not in said and "lowering" not in json.loads((out / "summary.json").read_text())["diagnosis"]
    assert "the model torch.onnx made is right" in r.stderr  # on the screen too
    alone = run_repro(out)
    assert alone.returncode == 1 and alone.stdout.startswith("REPRODUCED: output 0 differs"), \
        alone.stdout + alone.stderr[-2000:]
    assert run_repro(out, backend="eager").returncode == 0
    # model.onnx, for ONNX Runtime's maintainers: onnxruntime alone on it differs from eager
    import onnxruntime

    assert "Without torch, for the compiler's maintainers: `model.onnx`, the ONNX model the backend ran (opset" in said
    assert re.search(r"ONNX Runtime Version: [\w.]+ \(CPUExecutionProvider, as trtmin runs it\)", said), said
    import numpy as np

    with np.load(out / "model_io.npz") as data:  # numpy alone: each input under its ONNX name
        arrays = dict(data)
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {i.name: arrays[i.name] for i in session.get_inputs()})
    assert sorted(arrays) == sorted([i.name for i in session.get_inputs()] + [f"eager_output_{k}" for k in range(len(got))])
    assert (got[0] != arrays["eager_output_0"]).any(), (got, arrays)
    assert {"model.onnx", "model_io.npz"} <= set(json.loads((out / "summary.json").read_text())["files"])
    from repros.suite import add_repro  # saved with the report that names them
    assert {"model.onnx", "model_io.npz", "report.md"} <= {p.name for p in add_repro(out, "ort", tmp_path / "suite").iterdir()}


class AttentionAllMasked(nn.Module):
    """Attention whose boolean mask holds rows with no key at all (a padded VLA prefix):
    eager gives 0 there, torch.onnx's lowering of SDPA a mean of the values."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@needs_ort
def test_a_wrong_value_of_the_exported_model_is_said_to_be_torch_onnxs() -> None:
    """The report's "Exported model" note (minimize/reduce.py _exported_model_note) from the
    reference evaluator's real verdict: on SDPA rows whose mask is all False, ONNX's reference
    evaluator computes what ONNX Runtime computes, not eager's 0, so the bug is the exported
    model's (a hunt: titled as ONNX Runtime's, 31 -> 1); on an ArgMax over a NaN it matches
    eager, so ONNX Runtime's; a bf16 Conv ONNX Runtime refuses as an invalid model, onnx.checker
    refuses too, so torch.onnx's."""
    from types import SimpleNamespace

    from minimize.program.candidate import Candidate
    from minimize.reduce import _exported_model_note
    from oracles.backends.onnxruntime import OnnxReference

    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    mask = torch.tensor([[True, True, False, False], [False] * 4, [True] * 4, [False] * 4])
    conv = nn.Conv1d(2, 2, 1).to(torch.bfloat16)
    cases = {"sdpa": (AttentionAllMasked(), (q, k, v, mask)),
             "argmax": (ArgMaxHost().eval(), (torch.randn(4, 6), torch.tensor([[1.0, float("nan"), 0, 0, 0, 0]] * 4))),
             "bf16_conv": (conv, (torch.randn(2, 2, 2, dtype=torch.bfloat16),))}
    notes, exporters = {}, {}
    for name, (module, inputs) in cases.items():
        gm = torch.export.export(module, inputs).module()
        backend, control = resolve("onnxruntime"), resolve("onnxruntime").exporter_control()
        assert isinstance(control, OnnxReference)
        found = evaluate(gm, list(inputs), backend, Tolerance())
        assert found.kind == ("crash" if name == "bf16_conv" else "mismatch"), (name, found)
        session = SimpleNamespace(backend=backend,
                                  exporter_control=lambda cand, static: evaluate(gm, list(inputs), control, Tolerance()))
        notes[name], exporters[name] = _exported_model_note(session, Candidate(nodes=(0,)), found, static=True)
    assert exporters == {"sdpa": True, "argmax": False, "bf16_conv": True}  # repros add watches torch's releases
    assert "differs from eager PyTorch too (max abs " in notes["sdpa"], notes
    assert notes["sdpa"].endswith("so the bug is likely torch.onnx's lowering, not onnxruntime's"), notes
    assert notes["argmax"].endswith("the model torch.onnx made is right, and onnxruntime computes it wrong"), notes
    # ONNX Runtime refuses a bf16 Conv as an invalid model (opset 20 has none): onnx.checker does too
    assert "INVALID_GRAPH" in found.message and notes["bf16_conv"].startswith("onnx.checker (onnx "), notes
    assert notes["bf16_conv"].endswith("torch.onnx made an invalid ONNX model, so the bug is likely torch.onnx's, not "
                                       "onnxruntime's"), notes
    assert resolve("inductor").exporter_control() is None  # no ONNX export: no such note
    # the evaluator off on another output, or by far less, is no word on whose this bug is (a review)
    from oracles.verdict import Verdict
    bug = Verdict("mismatch", output=0, max_abs=0.6)
    for control in (Verdict("mismatch", output=1, max_abs=0.6), Verdict("mismatch", output=0, max_abs=1e-5)):
        session = SimpleNamespace(backend=resolve("onnxruntime"), exporter_control=lambda cand, static: control)
        assert _exported_model_note(session, Candidate(nodes=(0,)), bug, static=True) == (None, False), control


class MishHost(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mish(x * 2)


@needs_ort
def test_a_crash_naming_the_backends_scratch_file_names_it_by_its_name(tmp_path: Path) -> None:
    """torch.onnx writes a bf16 mish as ONNX Mish, which ONNX Runtime refuses ("Load model from
    /tmp/trtmin-state-.../scratch/trtmin-onnx-.../model.onnx failed"): report.md, repro.py and
    the screen quoted folders gone by then, another in each run; they say model.onnx, and the
    script, matching any folder, still reproduces."""
    from tests.conftest import save_program
    from tests.helpers import run_cli, run_repro

    model, inputs = save_program(MishHost().eval(), (torch.randn(2, 8, dtype=torch.bfloat16),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--backend", "onnxruntime", "--oracle", "crash",
                "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    texts = {"screen": r.stderr, "report.md": (out / "report.md").read_text(), "repro.py": (out / "repro.py").read_text()}
    for name, text in texts.items():
        said = " ".join(text.split())  # the docstring is wrapped
        assert "Load model from model.onnx failed" in said and "trtmin-onnx-" not in said, (name, said[:3000])
        assert "trtmin-state-" not in said, (name, said[:3000])  # nor half a folder, where the snippet's comment cut it
    alone = next(line for line in r.stderr.splitlines() if line.startswith("Run alone after the reduction"))
    assert "Load model from model.onnx failed" in alone, alone  # repro.py's own temporary folder, gone too
    assert json.loads((out / "summary.json").read_text())["repro_alone"]["status"] == "REPRODUCED"
    assert run_repro(out).returncode == 1


def test_onnxruntime_short_form_only_where_numpy_holds_every_value() -> None:
    """numpy has no bfloat16: a program with a bf16 input or output, one whose outputs'
    dtypes are not recorded, or one with dynamic dims keeps the general runner."""
    from minimize.emit.script import io_dtypes
    from oracles.verdict import Verdict

    class Half(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x.to(torch.bfloat16) * 2, x + 1

    x = torch.randn(2, 3)
    gm, inputs = candidate(Half(), (x,))
    assert io_dtypes(gm, inputs) == {torch.float32, torch.bfloat16}
    ort, verdict = resolve("onnxruntime"), Verdict("mismatch", output=0, max_abs=1.0)
    assert "InferenceSession(" in ort.script_part_for(verdict, False, frozenset({torch.float32})).compile_body
    for dynamic, dtypes in ((False, io_dtypes(gm, inputs)), (False, frozenset({torch.float32, None})),
                            (True, frozenset({torch.float32})), (False, None)):
        assert "run_onnxruntime(" in ort.script_part_for(verdict, dynamic, dtypes).compile_body, (dynamic, dtypes)


# ---- the TensorRT-only script -------------------------------------------------------------------

def _run_script(script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = alone_env()
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**clean, **env}, cwd=script.parent)


@needs_ort
def test_tensorrt_script_reference_path_and_skip(small, tmp_path: Path) -> None:
    gm, inputs = small
    expected = flatten_outputs(gm(*inputs))
    export = export_onnx(gm, inputs, tmp_path / "work" / "model.onnx")
    assert export.input_names == ["x", "y"]  # weights became initializers
    be = TensorRTBackend("tensorrt", {"fp16": "true"})
    script = write_tensorrt_script(tmp_path / "out", export.path, inputs, expected, "mismatch", 1e-3, 1e-3,
                                   "Small: planted header", settings=be.build_settings, child=False)
    assert sorted(p.name for p in script.parent.iterdir()) == ["model.onnx", "repro_tensorrt.npz", "repro_tensorrt.py"]
    text = script.read_text()
    assert "import torch" not in text and "TRT_SETTINGS = {'builder_flags': {'FP16': True}}" in text
    assert "def build_plan(trt, onnx_path, settings):" in text and "execute_async_v3" in text

    reference = _run_script(script, TRTMIN_BACKEND="onnxruntime")
    assert reference.returncode == 0, reference.stdout + reference.stderr
    assert reference.stdout.strip() == "FIXED: the backend matches eager PyTorch"
    plain = _run_script(script)
    if not HAS_TRT:
        assert plain.returncode == 2 and plain.stdout.strip() == "SKIPPED: tensorrt or tensorrt_rtx is not installed"
    elif not torch.cuda.is_available():  # built by the real TensorRT; a mismatch needs the engine run
        if importlib.util.find_spec("tensorrt") is None:  # TensorRT-RTX is strongly typed: it refuses the FP16 flag
            assert plain.returncode == 3 and "kFP16" in plain.stdout, plain.stdout + plain.stderr
        unset = write_tensorrt_script(tmp_path / "plain", export.path, inputs, expected, "mismatch", 1e-3, 1e-3,
                                      "Small: planted header", child=False)
        built = _run_script(unset)
        assert built.returncode == 2 and built.stdout.startswith("SKIPPED: TensorRT"), built.stdout + built.stderr
        assert "built the engine; running it needs a GPU" in built.stdout
        if importlib.util.find_spec("cuda") is None:  # no GPU said first: cuda-python would not help (a laptop's hunt)
            assert built.stdout.rstrip().endswith(("no CUDA GPU is visible here", "no CUDA driver is installed here")), \
                built.stdout

    ins, outs = load_npz_torch(script.parent / "repro_tensorrt.npz")  # the .npz round-trips
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert list(ins) == ["x", "y"]
    assert torch.equal(ins["x"], inputs[names.index("x")]) and torch.equal(ins["y"], inputs[names.index("y")])
    assert len(outs) == 3 and all(torch.equal(a, b) for a, b in zip(outs, expected))


@needs_ort
def test_tensorrt_script_without_its_npz_cannot_run(small, tmp_path: Path) -> None:
    """The script runs TensorRT in a child: a missing .npz is exit 2 naming it, not the child's
    traceback passed on as exit 1 (REPRODUCED)."""
    gm, inputs = small
    export = export_onnx(gm, inputs, tmp_path / "work" / "model.onnx")
    script = write_tensorrt_script(tmp_path / "out", export.path, inputs, flatten_outputs(gm(*inputs)), "crash",
                                   1e-3, 1e-3, "Small: planted header", error_pattern="SIGSEGV", child=True)
    (script.parent / "repro_tensorrt.npz").unlink()
    r = _run_script(script, TRTMIN_BACKEND="onnxruntime")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.startswith("SKIPPED: cannot run") and "repro_tensorrt.npz" in r.stdout, r.stdout


@needs_ort
def test_tensorrt_script_without_its_onnx_or_with_another_control_cannot_run(small, tmp_path: Path) -> None:
    """The scripts trial: without model.onnx beside it, the parser's "file cannot be found"
    (and ONNX Runtime's, for the control) said CHANGED, exit 3; and TRTMIN_BACKEND=onnxruntim,
    a typo of the control, ran TensorRT. Both cannot run: SKIPPED, exit 2, saying why."""
    gm, inputs = small
    export = export_onnx(gm, inputs, tmp_path / "work" / "model.onnx")
    script = write_tensorrt_script(tmp_path / "out", export.path, inputs, flatten_outputs(gm(*inputs)), "mismatch",
                                   1e-3, 1e-3, "Small: planted header", child=False)
    typo = _run_script(script, TRTMIN_BACKEND="onnxruntim")
    assert (typo.returncode, typo.stdout.strip()) == (
        2, "SKIPPED: TRTMIN_BACKEND takes onnxruntime or eager alone (ONNX Runtime in place of TensorRT)"), typo.stdout
    (script.parent / "model.onnx").unlink()
    for control in ("onnxruntime", ""):
        r = _run_script(script, TRTMIN_BACKEND=control)
        assert (r.returncode, r.stdout.strip()) == (2, "SKIPPED: cannot run: model.onnx must sit beside this script"), \
            (control, r.stdout + r.stderr[-2000:])


def test_npz_round_trips_bf16_and_ints(tmp_path: Path) -> None:
    from oracles.backends.tensorrt_script import save_npz

    inputs = {"a": torch.randn(3, 2).bfloat16(), "b": torch.arange(6).reshape(2, 3), "c": torch.tensor(True)}
    expected = [torch.randn(4).half(), torch.randn(2, 2).bfloat16()]
    save_npz(tmp_path / "d.npz", inputs, expected)
    ins, outs = load_npz_torch(tmp_path / "d.npz")
    assert all(torch.equal(ins[k], v) and ins[k].dtype == v.dtype for k, v in inputs.items())
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(outs, expected))


def test_script_comparison_matches_trtmins_checks() -> None:
    import numpy as np

    e = [np.array([1.0, 2.0, np.nan], np.float32), np.array([3, 4])]
    same = [np.array([1.0005, 2.0, np.nan], np.float32), np.array([3, 4])]
    assert compare_outputs_np(e, same, ["float32", "int64"], "mismatch", 1e-3, 1e-3) == \
        (False, "the backend matches eager PyTorch")
    off = [np.array([1.0, 2.5, np.nan], np.float32), np.array([3, 5])]
    reproduced, message = compare_outputs_np(e, off, ["float32", "int64"], "mismatch", 1e-3, 1e-3)
    assert reproduced and message.startswith("output 1 differs from eager by max abs 1")
    nan_out = [np.array([np.inf, 2.0, np.nan], np.float32), np.array([3, 4])]
    assert compare_outputs_np(e, nan_out, ["float32", "int64"], "nan", 0, 0)[0]
    # to trtmin an inf where eager is finite is a nan: for a mismatch bug, it fails another way (CHANGED)
    assert compare_outputs_np(e, nan_out, ["float32", "int64"], "mismatch", 1e-3, 1e-3) == \
        (None, "output 0 has 1 non-finite values where eager is finite")
    # ... unless another output is off: the mismatch, as trtmin names it then (Tolerance.asked)
    nan_and_off = [np.array([np.inf, 2.0, np.nan], np.float32), np.array([3, 5])]
    reproduced, message = compare_outputs_np(e, nan_and_off, ["float32", "int64"], "mismatch", 1e-3, 1e-3)
    assert reproduced is True and message.startswith("output 1 differs from eager by max abs 1"), message
    bf16_bits = np.array([0x3F80, 0x4000], np.uint16)  # 1.0, 2.0
    assert not compare_outputs_np([bf16_bits], [bf16_bits], ["bfloat16"], "mismatch", 0, 0)[0]


# ---- executorch --------------------------------------------------------------------------------

@needs_et
def test_executorch_small_graph_matches_eager(small) -> None:
    gm, inputs = small
    assert evaluate(gm, inputs, resolve("executorch:xnnpack"), Tolerance()).kind == "pass"


@needs_et
def test_xnnpack_delegation_names_the_ops_it_left_to_the_portable_kernels() -> None:
    """A bf16 conv2d XNNPACK does not take runs on ExecuTorch's portable kernels: a bug there
    is theirs (a new user's bf16 conv was filed as XNNPACK's). The float32 one is delegated."""
    from oracles.backends.executorch import ExecuTorchBackend
    be = ExecuTorchBackend("executorch:xnnpack")
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3).eval()
    assert be.delegation(*candidate(conv, (torch.randn(1, 3, 8, 8),))) == {"delegated": True, "not_delegated": []}
    assert ExecuTorchBackend("executorch:portable").delegation(*candidate(conv, (torch.randn(1, 3, 8, 8),))) is None
    bf16 = be.delegation(*candidate(conv.to(torch.bfloat16), (torch.randn(1, 3, 8, 8, dtype=torch.bfloat16),)))
    assert bf16 == {"delegated": False, "not_delegated": ["aten.convolution.default"]}, bf16


@needs_et
def test_executorch_xnnpack_linear_bn3d_bug(linear_bn) -> None:
    gm, inputs = linear_bn
    xnnpack = evaluate(gm, inputs, resolve("executorch:xnnpack"), Tolerance())
    assert xnnpack.kind == "mismatch" and xnnpack.max_abs > 0.5, xnnpack.describe()
    portable = evaluate(gm, inputs, resolve("executorch:portable"), Tolerance())
    assert portable.kind == "pass", portable.describe()


# ---- environment -------------------------------------------------------------------------------

def test_environment_has_the_template_fields() -> None:
    env = collect_environment()
    for key in ("Torch-TensorRT Version", "PyTorch Version", "TensorRT Version", "ExecuTorch Version",
                "CPU Architecture", "OS", "How you installed PyTorch", "Python version", "CUDA version",
                "GPU models and configuration", "Driver version"):
        assert env[key], key
    assert env["PyTorch Version"] == torch.__version__
    if not HAS_TORCH_TRT:
        assert env["Torch-TensorRT Version"] == "not installed"
    text = format_environment(env)
    assert text.splitlines()[0].startswith(" - Torch-TensorRT Version: ")


@pytest.mark.parametrize("backend, compilers", [
    ("inductor", []), ("eager", []), ("tensorrt", ["TensorRT"]), ("executorch:xnnpack", ["ExecuTorch"]),
    ("onnxruntime", ["ONNX Runtime"]), ("torch_tensorrt", ["Torch-TensorRT", "TensorRT"])])
def test_a_reports_environment_names_only_the_compilers_its_backend_uses(backend: str, compilers: list[str]) -> None:
    """report.md's environment, for a bug: the backend's compilers (installed or not), not
    the others installed here, which say nothing about it."""
    env = {"Torch-TensorRT Version": "2.11.0", "PyTorch Version": "2.13.0", "TensorRT Version": "not installed",
           "ExecuTorch Version": "1.4.1", "ONNX Runtime Version": "1.32.0", "ONNX export": "onnx 1.23.2, onnxscript 0.7.2",
           "OS": "Linux"}
    lines = format_environment(env, backend, "cpu").splitlines()
    named = [line.split(" - ", 1)[1].rsplit(" Version:", 1)[0] for line in lines if " Version:" in line]
    assert named == [c for c in ["Torch-TensorRT", "PyTorch", "TensorRT", "ExecuTorch", "ONNX Runtime"]
                     if c in compilers or c == "PyTorch"], lines
    # the exporter is half of the path to TensorRT's parser and to ONNX Runtime
    assert (" - ONNX export: onnx 1.23.2, onnxscript 0.7.2" in lines) == (backend in ("tensorrt", "onnxruntime")), lines
    assert lines[-1] == " - OS: Linux"
    # a plugin's or a command's compilers are not known: those installed stay, whatever its name starts with
    for unknown in ("plugins/mine.py:compile", "inductor_variant.py:compile", "cmd:tensorrt_run.sh {model}"):
        assert "ExecuTorch Version" in format_environment(env, unknown, "cpu"), unknown


@needs_ort
def test_onnx_export_failure_reproduces_alone(tmp_path: Path) -> None:
    """An exporter failure (no ONNX conversion for linalg.inv) reduced with --oracle crash:
    the workers word it `OnnxExportError: torch.onnx.export failed (ConversionError): ...`,
    and repro.py, which calls torch.onnx.export itself, must word it the same way, or its
    ERROR_PATTERN never matches and it says CHANGED where the bug is there."""
    import json

    from tests.conftest import save_program
    from tests.helpers import run_cli, run_repro

    class Inv(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.linalg.inv(x @ x.T + torch.eye(4)).relu()

    torch.manual_seed(0)
    model, inputs = save_program(Inv(), (torch.randn(4, 4),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--backend", "onnxruntime", "--oracle", "crash",
                "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_verdict"].startswith("CRASH: OnnxExportError: torch.onnx.export failed")
    # the exporter's cause (its "Exception summary"), not its boilerplate nor its colours: another
    # op the exporter cannot convert is another bug
    assert "No ONNX function found for" in summary["final_verdict"] and "\x1b" not in summary["final_verdict"]
    assert "\x1b" not in (out / "repro.py").read_text() and r"No\\s+ONNX\\s+function" in (out / "repro.py").read_text()
    assert (out / "report.md").read_text().startswith("# onnxruntime torch.onnx export failure: ")  # whose bug it is
    assert summary["diagnosis"]["fixed_by"] == "onnxscript"  # torch.onnx's lowerings: `repros add` watches its releases
    alone = run_repro(out)
    assert alone.returncode == 1 and alone.stdout.startswith("REPRODUCED: OnnxExportError"), alone.stdout
    assert run_repro(out, backend="eager").returncode == 0


@needs_ort
def test_an_onnx_node_an_error_names_is_read_back_as_our_node(tmp_path: Path) -> None:
    """TensorRT's parser names the ONNX node it refused ("with name: node_softmax"): its
    fx node and source line, which torch.onnx keeps, come back in the words failing_node
    reads. A message naming no node of the model gives no guess. ONNX Runtime's errors
    name theirs too: a real NOT_IMPLEMENTED (no bf16 Mul kernel) comes back as our `mul`,
    where localization starts (it took 7 oracle calls to find, now 3)."""
    from oracles.backends.onnx_export import named_node_text
    from oracles.checks import failing_node

    class Pool(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x).softmax(-1) * 2

    gm, inputs = candidate(Pool(), (torch.randn(6),))
    export = export_onnx(gm, inputs, tmp_path / "model.onnx")
    text = named_node_text(export, "In node 1 with name: node_softmax and operator: Softmax (parseNode)")
    located = failing_node(text or "")
    assert located and located["name"] == "softmax" and "softmax" in located["target"], text
    assert "return torch.relu(x).softmax(-1) * 2" in located["stack"], located
    assert named_node_text(export, "In node 1 with name: node_nothing and operator: Softmax") is None
    # --set opset=17: the version converter drops the metadata and keeps the names (a hunt's:
    # the search took 6 calls where it took 1), read from the candidate's own nodes
    older = export_onnx(gm, inputs, tmp_path / "older" / "model.onnx", opset=17)
    located = failing_node(named_node_text(older, "In node 1 with name: node_softmax and operator: Softmax") or "")
    assert located and located["name"] == "softmax" and "softmax" in located["target"], older.origins

    class HalfStep(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (torch.relu(x).to(torch.bfloat16) * 2).float().sum(-1)

    v = evaluate(*candidate(HalfStep(), (torch.randn(4, 8),)), resolve("onnxruntime"), Tolerance())
    assert v.kind == "crash" and "node_mul" in v.message, v
    assert v.extra["failing_node"]["name"] == "mul" and "torch.bfloat16) * 2" in v.extra["failing_node"]["stack"], v


def test_the_exporters_notes_to_itself_stay_off_the_screen(tmp_path, caplog):
    """onnx_ir logged "Skipped deduplication of initializer 'mul' as it is a graph input or
    output" in the middle of a reduction's screen (--emit tensorrt of a program whose output
    is a folded constant): a note of the exporter to itself, not the user's business."""
    import logging

    class Folded(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x + 1, torch.arange(4) * 1_000

    gm, inputs = candidate(Folded(), (torch.randn(2),))
    with caplog.at_level(logging.WARNING):
        export_onnx(gm, inputs, tmp_path / "model.onnx")
    said = [r.getMessage() for r in caplog.records if r.name.startswith(("onnx_ir", "onnxscript", "torch.onnx"))]
    assert not said, said


def test_a_reports_environment_keeps_the_gpu_of_a_cuda_bug_and_what_its_compilers_need() -> None:
    """A CUDA bug's report names the GPU, its driver and CUDA (on cuda:N too); a CPU bug's
    drops them, which say nothing about it. executorch:tensorrt's names Torch-TensorRT,
    which lowers it. A plugin's or a command's keeps the compilers installed here and
    drops those that are not: "not installed" lines read as if the bug needed them."""
    env = {"Torch-TensorRT Version": "2.11.0", "PyTorch Version": "2.13.0", "TensorRT Version": "not installed",
           "ExecuTorch Version": "1.4.1", "ONNX Runtime Version": "not installed", "CUDA version": "12.8",
           "GPU models and configuration": "1 GPU(s): 0: NVIDIA H100, 80 GiB, sm_90", "Driver version": "570.124.06"}
    gpu_lines = ("CUDA version", "GPU models and configuration", "Driver version")
    for device in ("cuda", "cuda:1"):
        shown = format_environment(env, "inductor", device).splitlines()
        assert [f" - {k}: {env[k]}" for k in gpu_lines] == shown[-3:], (device, shown)
    assert not any(k in format_environment(env, "inductor", "cpu") for k in gpu_lines)
    # a TensorRT engine is the GPU's wherever the program ran: its build failure without one may
    # be the GPU's absence, and the report says which GPU, or none (a TensorRT user's hunt)
    assert all(k in format_environment(env, "tensorrt", "cpu") for k in gpu_lines)
    lowered = format_environment(env, "executorch:tensorrt", "cuda").splitlines()
    assert " - Torch-TensorRT Version: 2.11.0" in lowered and " - TensorRT Version: not installed" in lowered, lowered
    for unknown in ("plugins/mine.py:compile", "cmd:tensorrt_run.sh {model}"):
        shown = format_environment(env, unknown, "cpu")
        assert "not installed" not in shown and " - ExecuTorch Version: 1.4.1" in shown, (unknown, shown)


def test_the_environment_names_the_cpus_vector_isa_and_onnxruntimes_provider() -> None:
    """A vectorized CPU kernel's bug can differ between AVX2 and AVX-512 machines, and an
    ONNX Runtime bug between its providers: the CPU line names the ISA torch's kernels use
    here, and an installed ONNX Runtime the provider trtmin runs (none where it is not)."""
    from oracles.environment import package_version

    env = collect_environment()
    assert env["CPU"].endswith(f"; torch's CPU kernels use {torch.backends.cpu.get_cpu_capability()}"), env["CPU"]
    ort = package_version("onnxruntime")
    assert env["ONNX Runtime Version"] == (
        ort if ort == "not installed" else f"{ort} (CPUExecutionProvider, as trtmin runs it)"), env


def test_the_tensorrt_line_says_which_tensorrt_is_here(monkeypatch) -> None:
    """NVIDIA's full TensorRT, TensorRT-RTX (module tensorrt_rtx), or both: each named as
    it is, never "not installed" where one of them is (the libraries' version stands in
    only where neither module is)."""
    from oracles import environment

    for versions, said in (({"tensorrt": "10.16.0"}, "10.16.0"),
                           ({"tensorrt_rtx": "1.4.0.76"}, "TensorRT-RTX 1.4.0.76 (module tensorrt_rtx)"),
                           ({"tensorrt": "10.16.0", "tensorrt_rtx": "1.4.0.76"},
                            "10.16.0; TensorRT-RTX 1.4.0.76 (module tensorrt_rtx)")):
        monkeypatch.setattr(environment, "package_version", lambda p, v=versions: v.get(p, "not installed"))
        assert environment.tensorrt_line() == said, versions


def test_the_newest_opset_onnx_knows_is_taken() -> None:
    """--set opset=N is refused where ONNX here knows no such opset, not at the newest one it
    knows (the range's ends are its own: 1 and onnx_opset_version())."""
    onnx = pytest.importorskip("onnx")
    from oracles.backends.onnxruntime import parse_ort_settings

    newest = onnx.defs.onnx_opset_version()
    assert parse_ort_settings({"opset": str(newest)}) == {"opset": newest}
    assert parse_trt_settings({"opset": "1"}) == {"opset": 1}
    with pytest.raises(TrtminError, match=f"knows opsets 1 to {newest}"):
        parse_trt_settings({"opset": str(newest + 1)})


def test_onnxruntimes_own_names_of_its_optimization_levels_are_taken() -> None:
    """--set graph_optimization_level takes trtmin's words and ONNX Runtime's own enum names
    (ORT_DISABLE_ALL, ORT_ENABLE_EXTENDED, ...), as a user copies them from its docs."""
    from oracles.backends.onnxruntime import parse_ort_settings

    for given, level in (("ORT_DISABLE_ALL", "disable"), ("ORT_ENABLE_BASIC", "basic"),
                         ("ORT_ENABLE_EXTENDED", "extended"), ("ORT_ENABLE_ALL", "all"), ("Extended", "extended")):
        assert parse_ort_settings({"graph_optimization_level": given}) == {"graph_optimization_level": level}, given
    with pytest.raises(TrtminError, match="use one of disable, basic, extended, all"):
        parse_ort_settings({"graph_optimization_level": "max"})


def test_settings_trtmin_lists_are_refused_before_torch_and_torch_tensorrts_are_left_to_it(monkeypatch) -> None:
    """check_before_torch answers a --set mistake of a backend whose settings are trtmin's
    own lists in a second, before the workers import torch; executorch:tensorrt takes
    Torch-TensorRT's settings, which only the installed torch_tensorrt knows: they pass
    here (parsed as ExecuTorch's flags, min_block_size was a TypeError's traceback).
    Checked as on a machine with every package installed."""
    from oracles import backend_setup

    monkeypatch.setattr(backend_setup, "check_packages", lambda spec: None)
    for spec, key in (("onnxruntime", "graph_optimisation_level"), ("tensorrt", "fp61"),
                      ("executorch:xnnpack", "per_op"), ("executorch:portable", "per_op_mode")):
        with pytest.raises(TrtminError, match=f"--set {key}"):
            backend_setup.check_before_torch(spec, {key: "1"})
    backend_setup.check_before_torch("executorch:tensorrt", {"min_block_size": "1"})


@pytest.mark.skipif(HAS_TORCH_TRT, reason="torch_tensorrt is installed here")
def test_executorch_tensorrt_without_torch_tensorrt_names_that_package_first() -> None:
    """executorch:tensorrt lowers with torch_tensorrt, then loads with its ExecuTorch
    runtime: without torch_tensorrt the first missing package is named, not the runtime
    (installing the runtime alone would only lead to the next refusal)."""
    from oracles.backend_setup import check_packages

    if not HAS_ET:
        pytest.skip("executorch not installed")
    with pytest.raises(MissingPackageError, match="needs the torch_tensorrt package.*pip install torch-tensorrt"):
        check_packages("executorch:tensorrt")


@needs_et
def test_executorch_short_form_only_for_a_static_program_on_xnnpack_or_portable_kernels() -> None:
    """The few-line script (export, lower, load from the buffer) has no dynamic shapes and
    no .ptd: a program with dynamic dims keeps lower_to_pte's runner, as ONNX Runtime's does."""
    from oracles.verdict import Verdict

    verdict, dtypes = Verdict("mismatch", output=0, max_abs=1.0), frozenset({torch.float32})
    for spec in ("executorch:xnnpack", "executorch:portable"):
        backend = resolve(spec)
        assert "lower_to_pte(" not in backend.script_part_for(verdict, False, dtypes).compile_body, spec
        assert "lower_to_pte(" in backend.script_part_for(verdict, True, dtypes).compile_body, spec


def test_executorch_tensorrts_script_skips_without_a_gpu_and_checks_for_both_of_its_packages() -> None:
    """executorch:tensorrt's repro.py lowers with Torch-TensorRT and loads with its
    ExecuTorch runtime: it says SKIPPED (exit 2) where no GPU is visible, before any
    compile, and names both packages in REQUIRES, which `repros run` checks before it runs
    the script. The CPU variants ask for no GPU."""
    from oracles.backends.executorch import ExecuTorchBackend

    part = ExecuTorchBackend("executorch:tensorrt").script_part()
    body = part.compile_body.strip()
    assert body.startswith("if not torch.cuda.is_available():") and "sys.exit(2)" in body.split("\n", 3)[2], body
    assert part.requires == ["executorch", "torch_tensorrt", "torch_tensorrt_executorch_runtime"], part.requires
    xnnpack = ExecuTorchBackend("executorch:xnnpack").script_part()
    assert "cuda" not in xnnpack.compile_body and xnnpack.requires == ["executorch"]


@needs_ort
def test_every_file_of_the_tensorrt_script_is_one_the_run_lists(small, tmp_path: Path) -> None:
    """--emit tensorrt writes its script, model.onnx and the .npz the script reads: summary.json's
    `files` (what `repros add` saves, and what --force counts as the run's) names each, from
    emitted_names; one left out was not saved, and the saved script could not run."""
    from oracles.out_folder import emitted_names
    gm, inputs = small
    out = tmp_path / "out"
    export = export_onnx(gm, inputs, out / "model.onnx")
    write_tensorrt_script(out, export.path, inputs, flatten_outputs(gm(*inputs)), "crash", 1e-3, 1e-3,
                          "Small: planted header", child=False)
    assert sorted(p.name for p in out.iterdir()) == sorted(emitted_names("tensorrt"))
