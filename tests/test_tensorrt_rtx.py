"""Real TensorRT on a machine without a GPU: TensorRT-RTX's ONNX parser and builder.

`pip install tensorrt-rtx` gives TensorRT's Python API as module `tensorrt_rtx`, and its
parser and builder run without a GPU. The `tensorrt` backend then parses and builds every
candidate and runs none: `crash` judges parser and builder failures, the value oracles are
refused in one line. These tests run the real library; they skip where neither TensorRT
nor TensorRT-RTX is installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn

from oracles.backends import resolve
from oracles.backends.tensorrt import TensorRTBackend, import_tensorrt, tensorrt_name
from oracles.checks import Tolerance
from oracles.evaluate import evaluate
from tests.conftest import save_program
from tests.helpers import run_cli, run_repro
from tests.test_backends_trt_family import candidate

HAS_TRT = any(importlib.util.find_spec(m) is not None for m in ("tensorrt", "tensorrt_rtx"))
HAS_GPU = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not HAS_TRT, reason="neither tensorrt nor tensorrt_rtx is installed")
needs_no_gpu = pytest.mark.skipif(HAS_GPU, reason="a GPU is visible: the engines run there")


class RankNine(nn.Module):
    """A small MLP whose output is summed over groups through a 9-D view: TensorRT's
    ONNX parser refuses the 9-D Reshape (TensorRT tensors have at most 8 dims, Dims::MAX_DIMS),
    where ONNX Runtime and eager PyTorch run it."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.l2(torch.relu(self.l1(x))))
        grouped = h.reshape(2, 2, 2, 2, 2, 2, 2, 2, 4).sum(-1)
        return torch.tanh(grouped.flatten()) * 2 + h.mean()


def run_trt_script(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """repro_tensorrt.py alone, in a new process, without trtmin on its path."""
    return run_repro(folder, env.get("TRTMIN_BACKEND"), script="repro_tensorrt.py")


def test_module_and_name() -> None:
    trt = import_tensorrt()
    assert trt.__name__ in ("tensorrt", "tensorrt_rtx")
    name = tensorrt_name(trt)
    assert name.startswith("TensorRT-RTX " if trt.__name__ == "tensorrt_rtx" else "TensorRT ") and trt.__version__ in name
    assert name.split(" ")[0] in resolve("tensorrt").describe()


@needs_no_gpu
def test_value_oracles_need_a_gpu_and_crash_does_not() -> None:
    backend = TensorRTBackend("tensorrt")
    for oracle in ("mismatch", "nan", "oom"):
        problem = backend.oracle_problem(oracle)
        assert problem and "\n" not in problem and "--oracle crash" in problem and "GPU" in problem
    assert backend.oracle_problem("crash") is None and backend.oracle_problem("hang") is None
    assert "parses and builds" in (backend.note() or "")


@needs_no_gpu
def test_mismatch_without_a_gpu_is_one_line_exit_2(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, inputs = save_program(RankNine().eval(), (torch.randn(64, 16),), tmp_path)
    r = run_cli("check", str(model), "--inputs", str(inputs), "--backend", "tensorrt", "--oracle", "mismatch")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith("error: --oracle mismatch needs the TensorRT engine run")


@needs_no_gpu
def test_a_built_candidate_is_a_pass_that_says_it_did_not_run() -> None:
    torch.manual_seed(0)
    gm, inputs = candidate(nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval(), (torch.randn(2, 8),))
    v = evaluate(gm, inputs, TensorRTBackend("tensorrt"), Tolerance())
    assert v.kind == "pass" and "parsed and built the engine; it was not run" in v.message, v
    assert v.describe().startswith("PASS: TensorRT")


def test_a_parser_failure_is_a_crash_with_the_parsers_words() -> None:
    torch.manual_seed(0)
    gm, inputs = candidate(RankNine().eval(), (torch.randn(64, 16),))
    v = evaluate(gm, inputs, TensorRTBackend("tensorrt"), Tolerance())
    assert v.kind == "crash" and v.exc_type == "TensorRTError", v
    assert v.message.startswith("the ONNX parser failed: ") and "Reshape" in v.message, v.message


def test_parser_failure_reduced_and_both_scripts_reproduce_alone(tmp_path: Path) -> None:
    """End to end on the real parser: the host reduces to the 9-D view alone, and repro.py
    (torch + TensorRT) and repro_tensorrt.py (TensorRT + numpy + the .onnx) each say
    REPRODUCED alone in a new process; their controls (eager, ONNX Runtime) say FIXED."""
    torch.manual_seed(0)
    model, inputs = save_program(RankNine().eval(), (torch.randn(64, 16),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--backend", "tensorrt", "--oracle", "crash",
                "--emit", "tensorrt", "--out", str(out), "--device", "cuda" if HAS_GPU else "cpu")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["original_nodes"] >= 10 and summary["final_nodes"] == 1, summary["final_nodes"]
    assert "Reshape" in summary["final_verdict"] and summary["repro_alone"]["exit"] == 1
    trt = import_tensorrt()
    assert summary["environment"][trt.__name__] == trt.__version__
    assert tensorrt_name(trt) in (out / "report.md").read_text().splitlines()[0]

    alone = run_repro(out)
    assert alone.returncode == 1 and alone.stdout.startswith("REPRODUCED: TensorRTError: the ONNX parser failed"), \
        alone.stdout + alone.stderr[-2000:]
    assert run_repro(out, backend="eager").returncode == 0
    script = run_trt_script(out)
    assert script.returncode == 1, script.stdout + script.stderr[-2000:]
    assert script.stdout.startswith("REPRODUCED: TensorRTError: the ONNX parser failed") and "Reshape" in script.stdout
    control = run_trt_script(out, TRTMIN_BACKEND="onnxruntime")
    assert control.returncode == 0 and control.stdout.startswith("FIXED"), control.stdout + control.stderr[-2000:]
    assert "import torch" not in (out / "repro_tensorrt.py").read_text()
