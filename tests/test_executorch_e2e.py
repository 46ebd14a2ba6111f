"""A real ExecuTorch 1.4 bug, reduced end to end, and the same program emitted for the
TensorRT family: XNNPACK folds a BatchNorm1d into the Linear before it along the wrong
axis when the Linear's output is 3-D (silent mismatch; the portable kernels are right)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.conftest import save_program
from tests.helpers import run_cli, run_report_snippet, run_repro

pytestmark = pytest.mark.skipif(importlib.util.find_spec("executorch") is None, reason="executorch not installed")


class SensorEncoder(nn.Module):
    """(batch, 5 channels, 8 features) -> an embedding; the BatchNorm1d normalizes channels."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.proj = nn.Linear(8, 5)
        self.bn = nn.BatchNorm1d(5)
        self.head = nn.Linear(25, 6)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 2)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x)) + x
        h = self.bn(self.proj(h))
        h = h + 0.5 * torch.relu(h)
        return self.head(h.flatten(1)).softmax(-1) * 10


@pytest.fixture(scope="module")
def reduced(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("et")
    model, inputs = save_program(SensorEncoder().eval(), (torch.randn(2, 5, 8),), folder)
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "executorch:portable")
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]  # the portable kernels are right
    out = folder / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "executorch:xnnpack",
                "--emit", "tensorrt", "--emit", "torch_tensorrt", "--emit", "executorch:portable", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"for other backends \(run alone\): repro_tensorrt.py \w+, repro_torch_tensorrt.py \w+, "
                     r"repro_executorch_portable.py FIXED", " ".join(r.stderr.split())), r.stderr[-3000:]
    return out


def test_xnnpack_bug_reduces_to_linear_and_batch_norm(reduced):
    s = json.loads((reduced / "summary.json").read_text())
    assert s["original_nodes"] >= 12 and s["final_nodes"] <= 3
    script = (reduced / "repro.py").read_text()
    assert "linear" in script and "batch_norm" in script
    assert "self.register_buffer('proj_weight'" in script  # weights stay weights: the bug needs it
    # not their values: the script makes them (and its input), and ships no tensor file
    assert "proj_weight" in s["generated_values"] and "torch.randn((2, 2)" in script
    # nor their sizes: the 5 features shrink in the weight and in BatchNorm's inline statistics,
    # which keep their first values
    assert s["shrunk_shapes"]["proj_weight"] == [[5, 8], [2, 2]], s["shrunk_shapes"]
    assert s["shrunk_shapes"]["bn_running_var"] == [[5], [2]], s["shrunk_shapes"]
    assert not (reduced / "repro_inputs.pt").exists()
    # a static program: export, lower and load in the compile body, no helpers for other variants
    assert "load_program(pte.buffer)" in script and "def lower_to_pte" not in script, script
    assert s["repro_alone"]["status"] == "REPRODUCED", s["repro_alone"]  # trtmin ran it alone
    assert run_repro(reduced, backend="eager").returncode == 0
    # report.md's snippet lowers with XNNPACK and executes: the bug, in a few lines
    s = run_report_snippet(reduced)
    assert "SNIPPET OK" in s.stdout and "SNIPPET BACKEND DIFFERS" in s.stdout, s.stdout + s.stderr[-2000:]
    assert "SNIPPET ASSERT RAISES Tensor-likes are not close!" in s.stdout, s.stdout


def _run(script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRTMIN_BACKEND")}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env={**clean, **env}, cwd=script.parent)


def test_emitted_scripts_for_the_tensorrt_family(reduced):
    # each --emit script was run alone too, and report.md says what it printed
    ran = json.loads((reduced / "summary.json").read_text())["emitted_alone"]
    report = (reduced / "report.md").read_text()
    for name, alone in ran.items():
        assert f"| `{name}` | {alone['status']} (exit {alone['exit']}) |" in report, report
    # Torch-TensorRT: from a CPU reduction, a script for the GPU (it fed CPU tensors to
    # Torch-TensorRT, and said CHANGED where there was no GPU); a one-line skip without one.
    if importlib.util.find_spec("torch_tensorrt") is None or not torch.cuda.is_available():
        from repros.runner import ENV_SKIP  # a skip `repros run` counts as "cannot run here"
        alone = ran["repro_torch_tensorrt.py"]  # e.g. "SKIPPED: cannot run: AssertionError: Torch not compiled ..."
        assert alone["exit"] == 2 and alone["status"] == "SKIPPED" and ENV_SKIP.search(alone["line"]), alone
    assert "torch_tensorrt.dynamo.compile" in (reduced / "repro_torch_tensorrt.py").read_text()
    assert re.search(r"^DEVICE(, ATOL, RTOL)? = 'cuda'", (reduced / "repro_torch_tensorrt.py").read_text(), re.M)
    assert "`repro_tensorrt.py`, `model.onnx`, `repro_tensorrt.npz` (tensorrt); `repro_torch_tensorrt.py` " \
        "(torch_tensorrt)" in report
    # TensorRT-only: no torch in it; its ONNX file and npz are checked against onnxruntime.
    trt_script = (reduced / "repro_tensorrt.py").read_text()
    assert "import torch" not in trt_script
    assert (reduced / "model.onnx").exists() and (reduced / "repro_tensorrt.npz").exists()
    r = _run(reduced / "repro_tensorrt.py", TRTMIN_BACKEND="onnxruntime")
    assert r.returncode == 0 and r.stdout.startswith("FIXED"), r.stdout + r.stderr[-2000:]
    if importlib.util.find_spec("tensorrt") is None:  # no TensorRT, or TensorRT-RTX without a GPU: it builds, and
        alone = ran["repro_tensorrt.py"]                # says it cannot run the engine
        assert alone["exit"] == 2 and "SKIPPED" in alone["line"] and "tensorrt" in alone["line"].lower(), alone
    # ExecuTorch portable: the same program runs right there (the bug is XNNPACK's), and
    # takes its .pte folder away with it (one was left per run).
    assert ran["repro_executorch_portable.py"]["status"] == "FIXED", ran
    scratch = reduced.parent / "scratch"
    scratch.mkdir(exist_ok=True)
    r = _run(reduced / "repro_executorch_portable.py", TMPDIR=str(scratch))
    assert r.returncode == 0 and r.stdout.startswith("FIXED"), r.stdout + r.stderr[-2000:]
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("repro-")]


def test_a_sequentials_weight_names_keep_xnnpacks_batch_norm_fusion_crash(tmp_path):
    """ExecuTorch 1.4.1's XNNPACK FuseBatchNormPass names the fused weight after the conv's
    (`0_weight_fused_bn`, as a top-level nn.Sequential names it) and then fails to find
    it. Candidates named their weights as export's placeholders (`p_0_weight`), so `check`
    said "does not fail" where the user's own lowering failed; and the verdict showed only
    the pass manager's wrapper ("An error occurred when running the 'FuseBatchNormPass'
    pass"), not the pass's own error, which two such bugs would have shared."""
    torch.manual_seed(0)
    model, inputs = save_program(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                                               nn.Linear(8 * 36, 4)).eval(), (torch.randn(2, 3, 8, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", "executorch:xnnpack",
                "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert "'FuseBatchNormPass' pass after the following passes: []: ValueError: '0_weight_fused_bn' is not in list" \
        in summary["final_verdict"], summary["final_verdict"]
    assert summary["repro_alone"]["status"] == "REPRODUCED", summary["repro_alone"]
    # and repro.py, run alone, says the pass's own words too, as trtmin did
    assert summary["repro_alone"]["line"].endswith("passes: []: ValueError: '0_weight_fused_bn' is not in list"), \
        summary["repro_alone"]
    assert "self.register_buffer('0_weight'" in (out / "repro.py").read_text()
    assert summary["final_nodes"] == 2  # the conv and the batch norm it is fused with


def test_a_lowering_failure_ends_the_snippet_at_the_lowering():
    """XNNPACK's batch-norm fusion fails in to_edge_transform_and_lower, where a Linear's 2
    features meet a BatchNorm1d's 8 channels. report.md's snippet said its CRASH at the
    program's execute(), two lines it never reaches: the verdict now keeps the step that
    failed, and the snippet ends at the lowering. A bug of the run keeps the load and the
    execute."""
    from oracles.backends import resolve
    from oracles.checks import Tolerance
    from oracles.evaluate import evaluate
    from oracles.verdict import Verdict
    from tests.test_backends_trt_family import candidate

    class LinearThenBatchNorm1d(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l, self.bn = nn.Linear(2, 2), nn.BatchNorm1d(8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.bn(self.l(torch.tanh(x)))

    torch.manual_seed(0)
    backend = resolve("executorch:xnnpack", {})
    v = evaluate(*candidate(LinearThenBatchNorm1d().eval(), (torch.randn(2, 8, 2),)), backend, Tolerance())
    assert v.kind == "crash" and "FuseBatchNormPass" in v.message and v.extra.get("step") == "lower", v
    call = backend.snippet_call(["x"], v)
    assert call.last.startswith("pte = to_edge_transform_and_lower(torch.export.export(f, (x,)), partitioner=")
    assert not call.setup and not any("Runtime" in line for line in call.imports), call
    ran = backend.snippet_call(["x"], Verdict("mismatch", output=0, max_abs=1.0))
    assert ran.last == "" and ran.setup[-1] == "program = Runtime.get().load_program(pte.buffer)", ran


class ComplexRope(nn.Module):
    """Complex RoPE beside a real mul and a plain resize: ExecuTorch 1.4's to_edge refuses
    the complex64 mul ("mismatched dtypes", every dtype complex64), and the antialiased
    bicubic resize (not core ATen)."""

    def __init__(self, antialias: bool) -> None:
        super().__init__()
        self.antialias = antialias

    def forward(self, x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.interpolate(x * 2, size=(4, 4), mode="bilinear")
        h = torch.nn.functional.interpolate(h, size=(2, 4), mode="bicubic", antialias=self.antialias)
        rotated = torch.view_as_complex(h.reshape(1, 2, 2, 2, 2).contiguous()) * freqs
        return torch.view_as_real(rotated).flatten() * 3


@pytest.mark.parametrize("antialias", [True, False], ids=["not_core_aten", "complex_mul"])
def test_executorchs_verifier_error_names_the_node_the_search_starts_at(antialias: bool):
    """ExecuTorch's to_edge verifiers name the op they refuse, and for a dtype error the
    source stack of its node (ours, kept through to_edge); failing_node read neither, so a
    complex RoPE's mul (78 nodes) or an antialiased resize (58) took 7 calls of bisection (a
    hunt). Now the guess is the node: by stack and target among three muls, by the one
    node of a target that is not core ATen."""
    from minimize.search.localize import named_failing_position
    from minimize.search.problem import ReductionProblem, Rules
    from oracles.backends import resolve
    from oracles.checks import Tolerance
    from oracles.evaluate import evaluate
    from oracles.verdict import Verdict
    from tests.helpers import cpu_program

    inputs = (torch.randn(1, 2, 4, 4), torch.randn(2, 1, 2, dtype=torch.complex64))
    program = cpu_program(ComplexRope(antialias), *inputs)
    piece = program.materialize(program.all_kept())
    v = evaluate(piece.gm, program.inputs_for(piece), resolve("executorch:portable", {}), Tolerance())
    assert v.kind == "crash" and ("not in Core ATen" if antialias else "mismatched dtypes") in v.message, v
    # titled as ExecuTorch's own verifier's, before any delegate: not an XNNPACK crash (a hunt)
    xnnpack = resolve("executorch:xnnpack", {})
    assert xnnpack.failure_words(v) == "to_edge verifier failure"
    assert xnnpack.failure_words(Verdict("crash", "RuntimeError", "XNNPACK failed")) is None
    assert xnnpack.failure_words(Verdict("crash", "SpecViolationError", "Delegate broke the graph")) is None
    problem = ReductionProblem(program, lambda cands: [], Rules(locate_from_errors=True))
    problem.cache[problem.current] = [v]
    guessed = program.nodes[problem.current.nodes[named_failing_position(problem, problem.current.nodes)]]
    muls = [n for n in program.nodes if "mul" in str(n.target)]
    want = "aten._upsample_bicubic2d_aa.vec" if antialias else "aten.mul.Tensor"  # ExecuTorch says .default
    assert len(muls) >= 3 and str(guessed.target) == want, guessed
    assert antialias or guessed.meta["val"].dtype == torch.complex64, guessed


class ClipEncoder(nn.Module):
    """A frame MLP beside a clip's conv3d, which ExecuTorch 1.4's portable convolution kernel
    takes through lowering and refuses at run (it expects 3-D or 4-D input)."""

    def __init__(self) -> None:
        super().__init__()
        self.frame, self.clip = nn.Linear(8, 8), nn.Conv3d(2, 2, 3, padding=1)

    def forward(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.frame(x).relu().sum() + self.clip(v).tanh().mean()


def test_the_kernel_executorchs_runtime_logs_names_the_node_the_search_starts_at():
    """Behind "execute() failed with error 0x12" ExecuTorch logs the kernel that failed, as
    the core ATen op's out variant: "KernelCall failed ... in operator aten::convolution.out"
    for our conv3d. Read as the failing node (worker_side, with the native errors), it is the
    search's first guess: 7 -> 1 in 3 oracle calls, not 6."""
    from minimize.search.localize import named_failing_position
    from minimize.search.problem import ReductionProblem, Rules
    from oracles.checks import failing_kernel
    from oracles.verdict import Verdict
    from tests.helpers import cpu_program

    logged = ["[op_convolution.cpp:363] Check failed (check_convolution_args(...)):",
              "[method.cpp:1480] KernelCall failed at instruction 0:4 in operator aten::convolution.out: 0x12"]
    kernel = failing_kernel(logged)
    assert kernel == {"name": "", "target": "aten.convolution.out", "stack": ""}
    assert failing_kernel(logged[:1]) is None
    program = cpu_program(ClipEncoder(), torch.randn(2, 8), torch.randn(1, 2, 4, 4, 4))
    problem = ReductionProblem(program, lambda cands: [], Rules(locate_from_errors=True))
    problem.cache[problem.current] = [Verdict("crash", "RuntimeError", "method->execute() failed with error 0x12",
                                              extra={"native_errors": logged, "failing_node": kernel})]
    guessed = program.nodes[problem.current.nodes[named_failing_position(problem, problem.current.nodes)]]
    assert str(guessed.target) == "aten.conv3d.default", guessed


class Wrap(nn.Module):
    """An int64 phase index wrapped into [0, 16): Python's % (the divisor's sign)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 3 - 7) % 16


def test_a_bug_the_delegate_left_to_the_portable_kernels_is_run_on_them_alone(tmp_path):
    """A real ExecuTorch 1.4 bug: the portable kernel of aten.remainder.Scalar on int64
    takes the dividend's sign (C's %), -31 % 16 = -15 where eager says 1. XNNPACK takes none
    of it, so the reduction with executorch:xnnpack also writes the script for the portable
    kernels alone and runs it: it reproduces there, so the bug is theirs."""
    model, inputs = save_program(Wrap(), (torch.arange(-8, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                "executorch:xnnpack", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and "remainder" in (out / "repro.py").read_text()
    assert summary["emitted"] == ["executorch:portable"], summary["emitted"]  # not asked for: the delegate took none
    assert summary["emitted_alone"]["repro_executorch_portable.py"]["status"] == "REPRODUCED", summary["emitted_alone"]
    said = " ".join(r.stderr.split())
    assert "the delegate took none of the program's ops" in said and "(repro_executorch_portable.py, for " \
        "executorch:portable, tells)" in said and "for other backends (run alone): repro_executorch_portable.py " \
        "REPRODUCED" in said, said[-2000:]
    report = (out / "report.md").read_text()
    assert "| `repro_executorch_portable.py` | REPRODUCED (exit 1) |" in report
    # the title names whose it is too (and so the saved repro's, which takes it): not XNNPACK's maintainers
    assert report.startswith("# executorch:portable mismatch on cpu: remainder.Scalar (executorch:xnnpack's delegate "
                             "took none of its ops)\n"), report[:300]
    # at the top, whose bug it is; the portable script's own title names its backend, not XNNPACK
    assert report.index("**Whose bug:** executorch:portable's: executorch:xnnpack's delegate took none of the "
                        "program's ops, and `repro_executorch_portable.py`") < report.index("```python"), report[:1500]
    portable = (out / "repro_executorch_portable.py").read_text()
    assert portable.startswith('"""executorch:portable mismatch') and "checked on cpu with executorch:xnnpack." \
        in " ".join(portable.split()), portable[:400]


class ViewTo8Dims(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.relu(x * 2).view(1, 2, 2, 2, 4, 2, 4, 2) + 1).sum()


def test_an_emitted_delegates_share_is_asked_of_its_own_backend(tmp_path):
    """--backend executorch:portable --emit executorch:xnnpack: the XNNPACK script said
    REPRODUCED where XNNPACK took none of the ops (a bf16 conv: its portable kernel ran; a
    hunt), and nothing said so. A worker lowers for the emitted backend when asked, and
    report.md says whose kernels ran beside the script's status."""
    from minimize.emit.report import _emitted_line
    from tests.helpers import cpu_program, worker_in_process

    def share(module: nn.Module, x: torch.Tensor, backend: str | None) -> dict | None:
        program = cpu_program(module, x)
        run = worker_in_process(tmp_path, program, "def f(gm, inputs):\n    return gm\n", "f")
        job = {"kept": list(program.all_kept()), "settings": {}, "delegation": True, "static": True}
        return run({**job, **({"backend": backend} if backend else {})})["delegation"]

    assert share(Wrap(), torch.arange(-8, 8), None) is None  # the session's backend: a plugin, no delegate
    said = share(Wrap(), torch.arange(-8, 8), "executorch:xnnpack")  # int64: XNNPACK takes none
    assert said and not said["delegated"] and "aten.remainder.Scalar" in said["not_delegated"], said
    assert share(nn.Linear(4, 4).eval(), torch.randn(2, 4), "executorch:xnnpack")["delegated"]
    if importlib.util.find_spec("torch_tensorrt") is None:  # one not installed here says nothing, and ends nothing
        assert share(Wrap(), torch.arange(-8, 8), "torch_tensorrt") is None
    summary = {"emitted": ["executorch:xnnpack"], "emitted_undelegated": {"executorch:xnnpack": said["not_delegated"]},
               "emitted_alone": {"repro_executorch_xnnpack.py": {"status": "REPRODUCED", "exit": 1, "line": "x"}}}
    line = " ".join(_emitted_line(summary).split())
    assert "`repro_executorch_xnnpack.py`: executorch:xnnpack's delegate takes none of the program's ops; " \
           "ExecuTorch runs `aten.mul.Tensor`, `aten.remainder.Scalar`" in line and "theirs, not the delegate's" in line, line


def test_what_executorch_logged_behind_its_bare_error_code_is_reported(tmp_path):
    """A real ExecuTorch 1.4 failure: XNNPACK cannot define an 8-D tensor, and the runtime
    raises only "Failed to load method forward, error: 0x:1"; the cause is in its log on
    stderr. The worker reads it: the screen, report.md, summary.json and the signature
    carry it."""
    model, inputs = save_program(ViewTo8Dims(), (torch.randn(1, 2, 4, 8, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                "executorch:xnnpack", "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    cause = "Failed to define tensor 0 with code: xnn_status_unsupported_parameter"
    assert summary["final_nodes"] == 1 and cause in summary["native_errors"][0], summary
    assert "(logged: [XNNCompiler.cpp:<n>] Failed to define tensor <n> with code: " in summary["signature"]
    assert f"\nlogged: {summary['native_errors'][0]}\n" in r.stderr, r.stderr[-2000:]
    report = (out / "report.md").read_text()
    assert report.index("**The compiler logged** (to stderr, not in the error):") < report.index(cause) \
        < report.index("```python"), report[:1500]
    # repro.py alone judges the logged cause too: the same bare code with another cause is CHANGED
    script = (out / "repro.py").read_text()
    alone = subprocess.run([sys.executable, "repro.py"], cwd=out, capture_output=True, text=True, timeout=300)
    assert (alone.returncode, alone.stdout.split(":")[0]) == (1, "REPRODUCED"), alone.stdout + alone.stderr[-2000:]
    assert cause in alone.stderr, alone.stderr[-2000:]  # caught, then shown on stderr as ever
    (out / "repro.py").write_text(re.sub(r"(?m)^LOGGED_PATTERN = .*$", "LOGGED_PATTERN = 'tensor 7'", script))
    other = subprocess.run([sys.executable, "repro.py"], cwd=out, capture_output=True, text=True, timeout=300)
    assert other.returncode == 3 and "the runtime logged another cause" in other.stdout, other.stdout


class SoftmaxToUint16(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.softmax(torch.tanh(self.l(x)) * 2 + 1, -1) * 100
        return (h.to(torch.uint16).to(torch.float32) + torch.sigmoid(x)).sum(-1)


def test_a_failure_at_execute_is_reduced_by_its_logged_cause_not_the_first_runs_noise(tmp_path):
    """A real ExecuTorch 1.4 failure at execute time: the portable kernel has no uint16
    (error 0x12, "[op__to_dim_order_copy.cpp:106] Unhandled dtype UInt16 ..."). A worker's
    first threaded run logs CPU probes first, in the same form ("[cpuinfo_utils.cpp:87]
    Failed to open midr file"): taken for the cause, no later candidate matched it and the
    reduction cut nothing (11 -> 11 in 25 calls)."""
    model, inputs = save_program(SoftmaxToUint16().eval(), (torch.randn(4, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                "executorch:portable", "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_nodes"] == 1 and "Unhandled dtype UInt16" in summary["native_errors"][0], summary
    assert not any("cpuinfo" in line for line in summary["native_errors"]), summary["native_errors"]


class PhaseEmbedding(nn.Module):
    """A step counter wrapped into 12 phases, then looked up: ExecuTorch 1.4's portable
    remainder keeps the dividend's sign (-7 % 12 = -7, eager 5), and the embedding fails on
    the negative index."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 4)

    def forward(self, step: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        return self.emb((step - offset) % 12)


def test_a_crash_on_a_value_an_earlier_op_got_wrong_names_that_op(tmp_path):
    """A maintainer read "[op_embedding.cpp:52] Check failed ... indices_ptr[0] -7 < 0" as a
    user's negative index and would close it; the remainder before it is the bug. The ops
    the failing one reads are compiled alone (one call): they already differ from eager."""
    model, inputs = save_program(PhaseEmbedding().eval(), (torch.arange(10), torch.tensor(7)), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                "executorch:portable", "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    said = "the ops before the failing ones (remainder.Scalar), compiled alone, already differ from eager: MISMATCH"
    assert f"but: {said}" in " ".join(r.stderr.split()), r.stderr[-2000:]
    assert "eager 5, backend -7" in r.stderr, r.stderr[-2000:]
    assert f"- What the failing ops read: {said}" in (out / "report.md").read_text()
    summary = json.loads((out / "summary.json").read_text())  # its one call has a row of the per-pass table
    assert summary["passes"]["read_values_off"]["calls"] == 1, summary["passes"]
    assert sum(s["calls"] for s in summary["passes"].values()) == summary["oracle_calls"], summary["passes"]
    assert "| read_values_off | 1 | 0 | 0 |" in (out / "report.md").read_text()
    # the remainder alone is the suite's saved bug: the crash, its effect, is no new issue to file
    known = ("looks like a known bug: executorch_portable_int64_remainder_sign (the ops the failing ones read "
             "(remainder.Scalar), compiled alone, fail as it does: ")
    assert known in " ".join(r.stderr.split()), r.stderr[-2000:]
    assert summary["read_off"]["ops"] == {"aten.remainder.Scalar": 1}, summary["read_off"]


class QuantizeDequantize(nn.Module):
    """PT2E quantization's ops, as convert_pt2e leaves them around an op: int8 in between."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.ops.quantized_decomposed.quantize_per_tensor.default(x, 0.05, 3, -128, 127, torch.int8)
        return torch.ops.quantized_decomposed.dequantize_per_tensor.default(q, 0.05, 3, -128, 127, torch.int8) * 2


def test_a_quantized_program_runs_on_executorchs_quantized_kernels(tmp_path):
    """A hunt: every PT2E-quantized program crashed on executorch:portable ("Missing out
    variants: {'quantized_decomposed::...'}"), and reduce wrote that up as ExecuTorch's bug:
    ExecuTorch loads its quantized kernels only when executorch.kernels.quantized is
    imported. The check, repro.py and report.md's snippet import them: real ExecuTorch
    matches eager. Without --import, the load names torch's module that registers the ops."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - registers quantized_decomposed here

    from minimize.emit.script import render_script
    from minimize.program.model import Program
    from oracles.backends.executorch import ExecuTorchBackend
    from oracles.verdict import Verdict
    from tests.helpers import repro_info

    x = torch.randn(2, 8)
    model, inputs = save_program(QuantizeDequantize(), (x,), tmp_path, "qdq")
    unregistered = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                           "--backend", "executorch:portable")
    assert unregistered.returncode == 2 and "--import torch.ao.quantization.fx._decomposed" in unregistered.stderr
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                "executorch:portable", "--import", "torch.ao.quantization.fx._decomposed")
    assert r.returncode == 0 and "does not fail" in r.stdout, (r.stdout, r.stderr)
    for variant in ("portable", "xnnpack"):
        backend = ExecuTorchBackend(f"executorch:{variant}")
        program = Program(torch.export.export(QuantizeDequantize(), (x,)), [x])
        gm = program.materialize(program.all_kept()).gm
        info = repro_info(Verdict("mismatch", output=0, max_abs=1.0))
        info.imports = ("torch.ao.quantization.fx._decomposed",)
        script, _ = render_script(info, gm, {"x": x}, {}, backend)
        (folder := tmp_path / variant).mkdir()
        (folder / "repro.py").write_text(script)
        alone = run_repro(folder)
        assert (alone.returncode, alone.stdout.split(":")[0]) == (0, "FIXED"), alone.stdout + alone.stderr
        if importlib.util.find_spec("pyflakes"):  # the kernels' import is no unused one (a review)
            from tests.test_script_lint import lint
            assert not lint(script, "repro.py")
