"""Every Torch-TensorRT path, run for real: only where torch_tensorrt imports and a GPU is
visible (on the GPU machine, Torch-TensorRT-RTX 2.11 staged by ../shared/gpu/trt-rtx);
they skip elsewhere, CI included.

The real bug they reduce is the users' camera-preprocessing crash: a uint8 HWC frame
permuted before its cast to float fails to compile (`ValueError: __len__() should return
>= 0` on Torch-TensorRT-RTX 2.11.0).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.conftest import save_program
from tests.helpers import run_cli, run_report_snippet, run_repro

HAS_TORCH_TRT = importlib.util.find_spec("torch_tensorrt") is not None
pytestmark = pytest.mark.skipif(not (HAS_TORCH_TRT and torch.cuda.is_available()),
                                reason="needs torch_tensorrt and an NVIDIA GPU")


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.sigmoid(self.l1(x)) * torch.relu(self.l1(x)))


class Camera(nn.Module):
    """A uint8 HWC camera frame, preprocessed in the graph, then a small CNN."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, frame: torch.Tensor) -> torch.Tensor:
        x = frame.permute(0, 3, 1, 2).to(torch.float32) / 255.0
        x = torch.relu(self.conv((x - 0.5) / 0.25))
        return self.head(x.mean((2, 3)))


def gpu_candidate(model: nn.Module, inputs: tuple) -> tuple[torch.fx.GraphModule, list]:
    from minimize.program.model import Program
    model, inputs = model.cuda().eval(), tuple(x.cuda() for x in inputs)
    program = Program(torch.export.export(model, inputs).run_decompositions({}), list(inputs), device="cuda")
    piece = program.materialize(program.all_kept())
    return piece.gm, program.inputs_for(piece)


def test_compile_and_run_with_set_options(tmp_path: Path) -> None:
    from oracles.backends.torch_tensorrt import TorchTensorRTBackend, partition_report

    torch.manual_seed(0)
    gm, inputs = gpu_candidate(Mlp(), (torch.randn(4, 16),))
    backend = TorchTensorRTBackend("torch_tensorrt", {"optimization_level": "1", "truncate_double": "true"})
    run = backend.compile(gm, inputs)
    torch.testing.assert_close(run(*inputs)[0], gm(*inputs)[0], atol=1e-2, rtol=1e-2)
    assert partition_report(backend.last_compiled)["tensorrt_engines"] == 1
    model, values = save_program(Mlp().eval(), (torch.randn(4, 16),), tmp_path)
    r = run_cli("check", str(model), "--inputs", str(values), "--backend", "torch_tensorrt", "--oracle", "mismatch",
                "--atol", "1e-2", "--device", "cuda", "--set", "optimization_level=1", "--set", "min_block_size=1")
    assert r.returncode == 0 and "does not fail the mismatch oracle" in r.stdout, r.stdout + r.stderr[-2000:]


def test_fast_partition_reports_engines_around_a_fallback_op() -> None:
    from oracles.backends.torch_tensorrt import TorchTensorRTBackend

    torch.manual_seed(0)
    gm, inputs = gpu_candidate(Mlp(), (torch.randn(4, 16),))
    backend = TorchTensorRTBackend("torch_tensorrt", {"torch_executed_ops": "aten.sigmoid.default"})
    parts = backend.partitions(gm, inputs)
    sigmoid = [n.name for n in gm.graph.nodes if n.target == torch.ops.aten.sigmoid.default]
    assert len(sigmoid) == 1 and len(parts) >= 2, parts
    assert all(sigmoid[0] not in names for names in parts)
    assert all(names for names in parts)


def test_dynamic_sizes_compile_to_one_engine_that_runs_at_other_lengths() -> None:
    from oracles.backends.torch_tensorrt import TorchTensorRTBackend
    from oracles.dynamic import mark_dynamic
    from minimize.program.model import Program

    torch.manual_seed(0)
    model, x = Mlp().cuda().eval(), torch.randn(6, 16, device="cuda")
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("rows", min=2, max=32)},))
    program = Program(ep.run_decompositions({}), [x], device="cuda")
    piece = program.materialize(program.all_kept())
    inputs = [mark_dynamic(v, {0: (2, 32)}) if v.dim() == 2 and v.shape[0] == 6 else v
              for v in program.inputs_for(piece)]
    backend = TorchTensorRTBackend("torch_tensorrt", {})
    run = backend.compile(piece.gm, inputs)
    for rows in (3, 6, 17):
        y = torch.randn(rows, 16, device="cuda")
        args = [y if v.dim() == 2 and v.shape[0] == 6 else v for v in inputs]
        torch.testing.assert_close(run(*args)[0], piece.gm(*args)[0], atol=1e-2, rtol=1e-2)


def test_real_crash_reduced_culprit_named_settings_dropped_scripts_reproduce(tmp_path: Path) -> None:
    """The camera crash, end to end: op-type bisection names the permute's converter, the
    settings bisection drops what the bug does not need, repro.py (Torch-TensorRT alone)
    says REPRODUCED alone and FIXED under eager. (--emit torch_tensorrt beside --backend
    torch_tensorrt, which wrote a copy of repro.py, is refused since 2026-12-05.)"""
    torch.manual_seed(0)
    frame = torch.randint(0, 256, (1, 16, 24, 3), dtype=torch.uint8)
    model, values = save_program(Camera().eval(), (frame,), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(values), "--backend", "torch_tensorrt", "--oracle", "crash",
                "--device", "cuda", "--set", "optimization_level=1", "--set", "truncate_double=true",
                "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    diagnosis = summary["diagnosis"]
    assert summary["final_nodes"] <= 3, summary["final_nodes"]
    assert any("permute" in op for op in diagnosis["culprit_ops"]), diagnosis
    assert sorted(diagnosis["settings_dropped"]) == ["optimization_level", "truncate_double"], diagnosis
    assert summary["repro_alone"]["exit"] == 1, summary["repro_alone"]
    alone = run_repro(out)
    assert alone.returncode == 1 and alone.stdout.startswith("REPRODUCED"), alone.stdout + alone.stderr[-2000:]
    assert run_repro(out, backend="eager").returncode == 0
    snippet = run_report_snippet(out)  # report.md's snippet compiles with Torch-TensorRT: it is the crash
    exc_type = summary["signature"].split(": ")[1]
    assert snippet.returncode != 0 and exc_type in snippet.stderr, snippet.stdout + snippet.stderr[-2000:]


def test_tensorrt_backend_on_the_gpu_reduces_and_both_scripts_reproduce(tmp_path: Path) -> None:
    """The ONNX -> TensorRT path on the GPU: the CPU test's parser failure (Softmax on a 1-D
    input), reduced with --device cuda; both scripts say REPRODUCED there too."""
    from tests.test_tensorrt_rtx import test_real_failure_reduced_and_both_scripts_reproduce_alone as reduce_host
    reduce_host("softmax_1d_parser", tmp_path)


def test_tensorrt_backend_runs_engines_and_matches_eager() -> None:
    from oracles.backends.tensorrt import TensorRTBackend

    torch.manual_seed(0)
    gm, inputs = gpu_candidate(Mlp(), (torch.randn(4, 16),))
    run = TensorRTBackend("tensorrt").compile(gm, inputs)
    torch.testing.assert_close(run(*inputs)[0], gm(*inputs)[0], atol=1e-2, rtol=1e-2)
