"""Faults that need a GPU: a real CUDA OOM, and a CUDA error that breaks the context."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import plugin
from tests.helpers import run_cli

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_cuda_oom_is_a_verdict_and_reduces(host_program, tmp_path):
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "oom", "--device", "cuda",
                "--backend", plugin("cuda_oom_on_tanh"), "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and summary["signature"] == "oom"


def test_broken_cuda_context_gets_a_fresh_worker(host_program, tmp_path):
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--device", "cuda",
                "--backend", plugin("cuda_bad_index_on_tanh"), "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and "tanh" in (tmp_path / "repro.py").read_text()
    assert summary["timing"]["worker_restarts"] >= 1
    # each restart was a fork of the zygote, which warmed Dynamo up with CUDA hidden: none
    # had to be spawned because the zygote had started the driver
    assert summary["timing"]["forked_workers"] >= summary["timing"]["worker_restarts"]


@pytest.mark.parametrize("generate", [True, False])
def test_a_cuda_repro_with_weights_runs_alone(host_program, tmp_path, generate):
    """The script's weights (written inline, loaded from repro_inputs.pt, or generated) are
    made on the CPU; the module goes to the GPU with its inputs, as in trtmin's workers."""
    model, inputs = host_program
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--device", "cuda",
                "--backend", plugin("crash_on_linear"), "--out", str(tmp_path),
                *([] if generate else ["--no-generate-values"]))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert "self.register_buffer('l1_weight'" in (tmp_path / "repro.py").read_text()
    assert bool(summary["generated_values"]) == generate
    assert (tmp_path / "repro_inputs.pt").exists() != generate
    assert summary["repro_alone"]["status"] == "REPRODUCED", summary["repro_alone"]
