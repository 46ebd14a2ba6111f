"""Real TensorRT on a machine without a GPU: TensorRT-RTX's ONNX parser and builder.

`pip install tensorrt-rtx` gives TensorRT's Python API as module `tensorrt_rtx`, and its
parser and builder run without a GPU. The `tensorrt` backend then parses and builds every
candidate and runs none: `crash` judges parser and builder failures, the value oracles are
refused in one line. These tests run the real library; they skip where neither TensorRT
nor TensorRT-RTX is installed.
"""

from __future__ import annotations

import ast
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

from bench.hosts import attn_pool_softmax_1d, upsampler_dilated_deconv
from oracles.backends import resolve
from oracles.backends.tensorrt import TensorRTBackend, import_tensorrt, tensorrt_name
from oracles.checks import Tolerance
from oracles.errors import TrtminError
from oracles.evaluate import evaluate
from tests.conftest import save_program
from tests.helpers import (alone_env, report_snippet_text, run_cli, run_cli_here, run_report_snippet,
                           run_repro)
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


HOSTS = {  # name: (the host: build() and RUN, what the final verdict says, its first 200 characters,
    #          the nodes the bug needs, the node TensorRT's error names: None where it names none)
    "softmax_1d_parser": (attn_pool_softmax_1d, "at least 2 dimensions", "Softmax", 1, "softmax"),
    "dilated_deconv_builder": (upsampler_dilated_deconv, "Strided & Dilated Deconv", "Myelin", 1, None),
}


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
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--backend", "tensorrt", "--oracle", "mismatch")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith("error: --oracle mismatch needs the TensorRT engine run")
    from minimize.arguments import gpu_driver_seen
    if not gpu_driver_seen():  # then said before torch loads (it took 7 s, after the workers' start: a hunt's)
        code = ("import sys\nfrom minimize.cli import run\n"
                f"code = run({['check', str(model), '--inputs', str(inputs), '--backend', 'tensorrt', '--oracle', 'nan']!r})\n"
                "print(code, 'torch' in sys.modules)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert r.stdout.split() == ["2", "False"] and "--oracle nan needs the TensorRT engine run" in r.stderr, r


def test_dynamic_sizes_tensorrt_builds_static_are_said_before_the_first_call(tmp_path: Path) -> None:
    """A program exported with a dynamic batch, on the tensorrt backend (static engines: no
    optimization profile): check says so with its first notes, naming the input's dim, so
    a user chasing a bug of the dynamic batch knows it cannot show. Inductor keeps the
    dynamic sizes: no such note."""
    from tests.helpers import run_cli_here

    x = torch.randn(4, 8)
    ep = torch.export.export(nn.ReLU(), (x,), dynamic_shapes={"input": {0: torch.export.Dim("batch", min=2, max=64)}})
    torch.export.save(ep, str(tmp_path / "dyn.pt2"))
    torch.save((x,), str(tmp_path / "dyn_inputs.pt"))
    said = {}
    for backend in ("tensorrt", "inductor"):
        r = run_cli_here("check", str(tmp_path / "dyn.pt2"), "--inputs", str(tmp_path / "dyn_inputs.pt"),
                         "--oracle", "crash", "--backend", backend)
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        said[backend] = r.stderr
    assert ("note: the program was exported with dynamic sizes (input dim 0); backend tensorrt builds each candidate "
            "with the inputs' own sizes, so a bug that needs them dynamic does not show here") in said["tensorrt"]
    assert "dynamic" not in said["inductor"], said["inductor"]


class CameraAndState(nn.Module):
    """A policy's two inputs of a dynamic batch: a uint8 camera frame, permuted as it comes
    (TensorRT-RTX 1.4's parser refuses a uint8 Transpose), and a state vector."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 3)

    def forward(self, frame: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        image = frame.permute(0, 3, 1, 2).float() / 255
        return image.mean((2, 3)) + self.l(state)


def test_the_reports_dynamic_sizes_note_names_only_the_inputs_its_repro_reads(tmp_path: Path) -> None:
    """A hunt on realistic policies: report.md of a 1-node uint8 permute said the dynamic
    dims of inputs the repro no longer reads (the state's). The screen names them all, at
    the start; the report those of the repro's inputs."""
    batch = torch.export.Dim("batch", min=1, max=16)
    args = (torch.randint(0, 256, (2, 8, 8, 3), dtype=torch.uint8), torch.randn(2, 4))
    ep = torch.export.export(CameraAndState().eval(), args, dynamic_shapes={"frame": {0: batch}, "state": {0: batch}})
    torch.export.save(ep, str(tmp_path / "policy.pt2"))
    torch.save(args, str(tmp_path / "inputs.pt"))
    r = run_cli_here("reduce", str(tmp_path / "policy.pt2"), "--inputs", str(tmp_path / "inputs.pt"), "--oracle",
                     "crash", "--backend", "tensorrt", "--out", str(tmp_path / "out"), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "exported with dynamic sizes (frame dim 0, state dim 0)" in r.stderr, r.stderr[-3000:]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "- Dynamic sizes: the program was exported with dynamic sizes (frame dim 0); backend tensorrt" in report, \
        report[:3000]


@needs_no_gpu
def test_a_built_candidate_is_a_pass_that_says_it_did_not_run() -> None:
    torch.manual_seed(0)
    gm, inputs = candidate(nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval(), (torch.randn(2, 8),))
    v = evaluate(gm, inputs, TensorRTBackend("tensorrt"), Tolerance())
    assert v.kind == "pass" and "parsed and built the engine; it was not run" in v.message, v
    assert v.describe().startswith("PASS: TensorRT")


@pytest.mark.skipif(HAS_GPU, reason="the note of a machine without a GPU")
def test_a_result_whose_failure_names_cuda_is_said_to_maybe_be_the_gpus_absence() -> None:
    """Without a GPU, TensorRT-RTX 1.4's build of a float -> int8 cast failed with "Error Code
    1: Cuda Runtime (In generateForCurrent at ... cudaDeviceProfile.cpp)" (a hunt): reduced,
    and report.md said only the start's words for any failure. A result's note is of its own
    failure: one that names CUDA is said to be perhaps no bug; another drops the CUDA clause."""
    from minimize.program.model import Slice
    from minimize.run.session import Session
    from oracles.verdict import Verdict
    backend = TensorRTBackend("tensorrt")
    cuda = Verdict("crash", "TensorRTError", "building the engine failed: IBuilder::buildSerializedNetwork: Error "
                   "Code 1: Cuda Runtime (In generateForCurrent at /_src/common/cudaDeviceProfile.cpp:42)")
    parser = Verdict("crash", "TensorRTError", "the ONNX parser failed: In node 1 with name: node_view (Reshape)")
    start = backend.note()
    assert start.startswith("no GPU here: ") and "one that names CUDA (or a layer with no runners) may be the GPU's" in start
    session = type("S", (), {"backend": backend, "_static_note": lambda self, among=None: None, "in_place": []})()
    piece = candidate(nn.ReLU(), (torch.randn(2),))[0]
    notes = Session.notes_on(session, {"backend": start}, Slice(piece, ["x"], ["relu"], [], {}), cuda)
    assert notes["backend"].endswith("this failure names CUDA, and may be the GPU's absence, not a bug: confirm it on "
                                     "a GPU before filing it"), notes
    # said as a doubt too: on the screen at the end, atop report.md, in a saved repro's manifest (a maintainer's hunt
    # found only the diagnosis saying it)
    assert notes["doubt"] == notes["backend"].removeprefix(start.split("; ")[0] + "; "), notes
    from minimize.emit.report import _whose_bug
    assert _whose_bug({"diagnosis": notes}, "tensorrt").startswith("**Before filing:** This failure names CUDA, and")
    notes = Session.notes_on(session, {"backend": start}, Slice(piece, ["x"], ["relu"], [], {}), parser)
    assert notes["backend"].endswith("only its parser and builder failures were judged") and "CUDA" not in notes["backend"]
    assert "doubt" not in notes and not _whose_bug({"diagnosis": notes}, "tensorrt")
    # torch.onnx's words are not TensorRT's: no doubt there, and whose bug it is still said (a review)
    export = Verdict("crash", "OnnxExportError", "torch.onnx.export failed (X): a CUDA tensor was expected")
    notes = Session.notes_on(session, {"backend": start}, Slice(piece, ["x"], ["relu"], [], {}), export)
    assert "doubt" not in notes and _whose_bug({"diagnosis": notes, "final_verdict": export.describe()},
                                               "tensorrt").startswith("**Whose bug:** PyTorch's ONNX exporter's")
    # a layer TensorRT-RTX finds no runners for, without a GPU (NonZero's, 88 -> 1: a hunt) may be its absence too
    runners = Verdict("crash", "TensorRTError", "building the engine failed: IBuilder::buildSerializedNetwork: Error "
                      "Code 10: Internal Error (node_NonZero_0 has no runners that implement it.)")
    said = Session.notes_on(session, {"backend": start}, Slice(piece, ["x"], ["relu"], [], {}), runners)["backend"]
    assert said.endswith("this failure finds no runners for a layer, and may be the GPU's absence, not a bug: "
                         "confirm it on a GPU before filing it"), said


def test_a_parser_failure_is_a_crash_with_the_parsers_words() -> None:
    torch.manual_seed(0)
    gm, inputs = candidate(RankNine().eval(), (torch.randn(64, 16),))
    v = evaluate(gm, inputs, TensorRTBackend("tensorrt"), Tolerance())
    assert v.kind == "crash" and v.exc_type == "TensorRTError", v
    assert v.message.startswith("the ONNX parser failed: ") and "Reshape" in v.message, v.message


def test_a_setting_that_fails_any_network_is_refused_not_reduced(tmp_path: Path) -> None:
    """A --set that TensorRT refuses whatever the model (TensorRT-RTX's FP16 flag: its
    networks are strongly typed; a flag it lacks; REFIT, whose Myelin build needs a GPU) made
    every candidate fail alike, and the reduction wrote a 1-node "bug" of the setting. It is
    refused in one line naming the setting; a setting that fails no network leaves the
    model's own bug to reduce."""
    torch.manual_seed(0)
    inputs = (torch.randn(64, 16),)
    gm, args = candidate(Linear16().eval(), inputs)
    rtx = import_tensorrt().__name__.startswith("tensorrt_rtx")
    refused = ([("fp16", "true")] if rtx else []) + ([("flags", "REFIT")] if rtx and not HAS_GPU else [])
    for key, value in refused:
        backend = TensorRTBackend("tensorrt", {key: value})
        v = evaluate(gm, args, backend, Tolerance())
        assert v.kind == "crash", (key, v)
        said = backend.setup_problem(v.message)
        assert said and said.startswith(f"--set {key}={value}: "), said
        # REFIT's error names CUDA: without a GPU, that may be the machine's, not the setting's
        assert ("this machine has no GPU, which the setting may need" in said) == (key == "flags"), said
        assert ("drop it or change it" in said) == (key != "flags"), said
    with pytest.raises(TrtminError, match=r"^--set flags: TensorRT\S* \S+ has no BuilderFlag.NOPE; its flags: .*TF32"):
        TensorRTBackend("tensorrt", {"flags": "tf32,nope"})  # a flag it lacks, before any build: the ones it has
    harmless = TensorRTBackend("tensorrt", {"optimization_level": "2"})
    v = evaluate(*candidate(RankNine().eval(), inputs), harmless, Tolerance())
    assert v.kind == "crash" and harmless.setup_problem(v.message) is None, v
    if rtx:  # a setting that fails a one-layer network otherwise than the model failed: the model's bug stays
        fp16 = TensorRTBackend("tensorrt", {"fp16": "true"})
        v = evaluate(*candidate(RankNine().eval(), inputs), fp16, Tolerance())
        assert v.kind == "crash" and v.message.startswith("the ONNX parser failed"), v
        assert fp16.setup_problem(v.message) is None
    model, saved = save_program(Linear16().eval(), inputs, tmp_path)
    from tests.test_bad_inputs import assert_one_line_error
    for key, value in refused:  # one line: TensorRT's own native line before it is off the screen (a hunt's)
        assert_one_line_error(run_cli_here("check", str(model), "--inputs", str(saved), "--oracle", "crash",
                                           "--backend", "tensorrt", "--set", f"{key}={value}"), f"--set {key}={value}: ",
                              "fails a one-layer network")
    # a model the parser refuses never reaches the flags: a flag TensorRT lacks is refused all the same
    model, saved = save_program(RankNine().eval(), inputs, tmp_path, name="rank9")
    assert_one_line_error(run_cli_here("check", str(model), "--inputs", str(saved), "--oracle", "crash", "--backend",
                                       "tensorrt", "--set", "flags=NOPE"), "--set flags: ", "has no BuilderFlag.NOPE")


class Linear16(nn.Module):
    """Nothing TensorRT refuses: a Linear and a ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.l(x))


def test_the_parsers_node_name_is_the_same_bug_once_the_views_before_it_are_cut() -> None:
    """torch.onnx names a node after its fx node, and the fx node after its op's count
    (node_view_2 behind two views, node_view alone): the parser's refusal of the 9-D view
    is one bug either way, and the script's pattern finds both. Else the reduction kept a
    view the bug does not need and called the result 1-minimal."""
    from oracles.script_checks import error_pattern
    from oracles.verdict import Signature

    class ViewsThenRankNine(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(x.view(4, 16, 16)).view(64, 16) * 2
            return h.view(2, 2, 2, 2, 2, 2, 2, 2, 4).sum(-1)

    class RankNineAlone(nn.Module):
        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return h.view(2, 2, 2, 2, 2, 2, 2, 2, 4)

    torch.manual_seed(0)
    whole, alone = (evaluate(*candidate(m.eval(), (torch.randn(64, 16),)), TensorRTBackend("tensorrt"), Tolerance())
                    for m in (ViewsThenRankNine(), RankNineAlone()))
    assert "name: node_view_2 " in whole.message and "name: node_view " in alone.message, (whole, alone)
    signature = Signature.of(whole)
    assert signature.matches(alone), (signature, alone)
    assert all(re.search(error_pattern(signature, None), v.message) for v in (whole, alone))
    # the parser names the operator too: the node's name is any name (5aa8452), the operator is the bug
    renamed = alone.message.replace("node_view", "node_Reshape_21")
    assert signature.matches(type(alone)("crash", alone.exc_type, renamed))
    assert "operator: Reshape " in alone.message, alone.message
    other = alone.message.replace("operator: Reshape ", "operator: Transpose ")  # another operator is another bug
    assert not signature.matches(type(alone)("crash", alone.exc_type, other))


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_real_failure_reduced_and_both_scripts_reproduce_alone(host: str, tmp_path: Path) -> None:
    """End to end on the real parser and builder: each host reduces to its culprit, and
    repro.py (torch + TensorRT) and repro_tensorrt.py (TensorRT + numpy + the .onnx) each
    say REPRODUCED alone in a new process; their controls (eager, ONNX Runtime) say FIXED."""
    module, words, first_words, nodes, named = HOSTS[host]
    model, inputs = save_program(*module.build(), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--backend", "tensorrt", "--oracle", "crash",
                "--emit", "tensorrt", "--out", str(out), "--device", "cuda" if HAS_GPU else "cpu",
                "--set", "optimization_level=2",  # the bug does not need it: dropped, and named nowhere
                "--no-verify")  # the test runs both scripts alone itself
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"] == {"given": {"optimization_level": "2"}, "needed": {}}, summary["settings"]
    assert all("optimization_level" not in (out / f).read_text().splitlines()[0] for f in ("report.md", "repro.py"))
    assert summary["original_nodes"] >= 10 and summary["final_nodes"] == nodes, summary["final_nodes"]
    assert words in summary["final_verdict"], summary["final_verdict"]
    if named:  # the parser's "node_softmax" read back to our node: the search starts there, 2 calls in all
        assert summary["diagnosis"]["named_node"].startswith(f"`{named}`"), summary["diagnosis"]
        assert summary["oracle_calls"] <= 3, summary["passes"]
    trt = import_tensorrt()
    assert summary["environment"][trt.__name__] == trt.__version__
    report = (out / "report.md").read_text()
    assert tensorrt_name(trt) in report.splitlines()[0]
    if not HAS_GPU:  # said of this failure, which names no CUDA (tested above where one does)
        assert "does not run it; only its parser and builder failures were judged" in " ".join(report.split())
    # for TensorRT's maintainers the model its parser read (repro_tensorrt.py below runs it with numpy alone)
    assert "Without torch, for the compiler's maintainers: `model.onnx`, the ONNX model the backend ran" in report
    # named for where TensorRT failed, not "crash on cpu": its parser or builder ran on no device
    stage = "parser failure" if "parser failed" in summary["final_verdict"] else "build failure"
    assert f") {stage}: " in report.splitlines()[0] and " on cpu" not in report.splitlines()[0], report.splitlines()[0]
    # one node left: nothing to cut, said so (not "each of the 0 one-node cuts was tried")
    assert "- 1-minimal: a single op is left." in report and "0 one-node" not in report + r.stdout
    # where the script makes every input it reads, no words of eager PyTorch computing them
    forward = next(f for f in ast.walk(ast.parse((out / "repro.py").read_text()))
                   if isinstance(f, ast.FunctionDef) and f.name == "forward")
    made_all = set(summary["generated_values"]) >= {a.arg for a in forward.args.args[1:]}
    assert ("fed in as eager PyTorch computed it" in " ".join(report.split())) != made_all, (summary["generated_values"], report[:2000])

    alone = run_repro(out)  # its line shows TensorRT's words to the cause (all it said, in one line)
    assert alone.returncode == 1 and alone.stdout.startswith("REPRODUCED: TensorRTError: ") and words in alone.stdout, \
        alone.stdout + alone.stderr[-2000:]
    assert run_repro(out, backend="eager").returncode == 0
    script = run_trt_script(out)
    assert script.returncode == 1, script.stdout + script.stderr[-2000:]
    assert script.stdout.startswith("REPRODUCED: TensorRTError: ") and first_words in script.stdout, script.stdout
    # on NVIDIA's TensorRT (TensorRT-RTX under its module name here) with no cuda-python, which
    # only running an engine needs: with a GPU the build runs and reproduces (it said SKIPPED:
    # "cuda-python is not installed", a hunt); without one, the driver's library says so
    shim = tmp_path / "full_tensorrt"
    shim.mkdir()
    (shim / "tensorrt.py").write_text("from tensorrt_rtx import *  # noqa\nfrom tensorrt_rtx import __version__  # noqa\n")
    if importlib.util.find_spec("cuda") is None:
        as_full = run_repro(out, script="repro_tensorrt.py", env={"PYTHONPATH": os.pathsep.join(
            [str(shim), *filter(None, [alone_env().get("PYTHONPATH")])])})  # a staged tensorrt_rtx's folder kept
        said = as_full.stdout + as_full.stderr[-2000:]
        if HAS_GPU:
            assert as_full.returncode == 1 and as_full.stdout.startswith("REPRODUCED: TensorRTError: "), said
        else:
            assert as_full.returncode == 2 and as_full.stdout.startswith("SKIPPED: TensorRT ") and "cuda-python" not in said \
                and re.search(r"needs a GPU: no CUDA (driver is installed|GPU is visible) here", said), said
    for word in ("onnxruntime", "eager"):  # eager: the control's word in repro.py, which report.md teaches
        control = run_trt_script(out, TRTMIN_BACKEND=word)
        assert control.returncode == 0 and control.stdout.startswith("FIXED"), control.stdout + control.stderr[-2000:]
    assert "import torch" not in (out / "repro_tensorrt.py").read_text()
    # report.md's snippet is the bug too: its parse or build, run alone, fails with TensorRT's words
    snippet = run_report_snippet(out)
    if importlib.util.find_spec("pyflakes"):  # a test extra: the GPU machine has none, and importing
        from tests.test_script_lint import lint  # test_script_lint there would skip this whole module
        assert not lint(report_snippet_text(out), "snippet.py")
    assert snippet.returncode == 1 and "RuntimeError: " in snippet.stderr, snippet.stdout + snippet.stderr[-2000:]
    assert first_words in snippet.stdout + snippet.stderr, snippet.stdout + snippet.stderr[-2000:]


@pytest.mark.skipif(not HAS_GPU, reason="the engine runs on a CUDA GPU")
@pytest.mark.parametrize("device, transposed", [("cuda", False), ("cpu", True)])
def test_the_snippet_of_a_bug_in_the_engines_run_runs_the_engine(tmp_path: Path, monkeypatch, device: str,
                                                                 transposed: bool) -> None:
    """report.md's snippet for a mismatch: export, parse, build, then the engine run into
    `got`, inputs first; on a graph TensorRT gets right, got is eager's out. Also for a
    reduction on --device cpu (eager's tensors on the CPU) whose output eager leaves
    transposed, not contiguous (the engine writes row-major buffers), and whose input's
    name, context, is one the snippet's own lines take: renamed apart (`context_`), as
    report.md's snippet does (snippet_source alone refuses it)."""
    from minimize.emit.report import compare_line
    from minimize.emit.snippet import renamed_apart, snippet_source, taken_names
    from oracles.verdict import Verdict
    from tests.helpers import repro_info
    from tests.test_snippet import FORWARD

    name = "context" if transposed else "x"
    verdict = Verdict("mismatch", output=0, max_abs=1.0)
    call = TensorRTBackend("tensorrt").snippet_call([name], verdict)
    tensors = {name: ("torch.randn(2, 3)", True), "w": ("torch.full((4, 3), 0.5)", True)}
    forward = FORWARD.replace("-inf", "-1.0")
    if transposed:
        forward = forward.replace("    return (linear,)", "    t = torch.ops.aten.t.default(linear)\n    return (t,)")
        forward = re.sub(r"\bx\b", name, forward)
    forward, renames = renamed_apart(forward, tensors, taken_names(call))  # as report_snippet does
    assert renames == ({"context": "context_"} if transposed else {}), renames
    name = renames.get(name, name)
    tensors = {renames.get(n, n): made for n, made in tensors.items()}
    call = TensorRTBackend("tensorrt").snippet_call([name], verdict)
    compare = compare_line(repro_info(verdict, device=device))  # raises where got is off
    text = snippet_source(forward, tensors, None, device, "differs", call, (name,), compare)
    assert text is not None
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - the snippet as report.md shows it, its assert_close last
    torch.cuda.synchronize()
    assert ns["out"][0].is_contiguous() is not transposed
    torch.testing.assert_close(ns["got"][0].cpu(), ns["out"][0].cpu(), rtol=1e-3, atol=1e-3)


def test_tensorrt_words_keep_what_was_said_and_drop_the_noise() -> None:
    """A builder error without an 'Error Code' line keeps its first line (it was 'no message',
    so different failures looked like one bug); catchCudaError's line, which every build logs
    without a GPU, goes where something else was said, and stays where nothing else was."""
    from oracles.backends.tensorrt import tensorrt_said
    cuda = "[checkMacros.cpp::catchCudaError::212] Error Code 1: Cuda Runtime (an illegal memory access)"
    assert tensorrt_said([], ["Network validation failed.", cuda]) == "Network validation failed."
    assert tensorrt_said([], ["Requested amount of GPU memory (1 bytes) could not be allocated."]).startswith("Requested")
    assert tensorrt_said([], [cuda]) == cuda
    parser = "In node 6 (parseNode): INVALID_NODE: Invalid Node - node_softmax\nITensor::getDimensions: Error Code 3: " \
             "API Usage Error (at least 2 dimensions are required for input)\n" + cuda
    said = tensorrt_said([parser], ["ModelImporter.cpp:138: While parsing node number 6 [Softmax]:"])
    assert said == ("In node 6 (parseNode): INVALID_NODE: Invalid Node - node_softmax | ITensor::getDimensions: Error "
                    "Code 3: API Usage Error (at least 2 dimensions are required for input)")
    # a logged error with "Error Code" lines is said by those alone: its first line (here the
    # node it was building, which another cut names otherwise) is no part of the bug's words
    coded = "[optimizer.cpp::compile::42] Error Code 10: Internal Error (Could not find any implementation)"
    assert tensorrt_said([], [f"Compiling node /layers.3/MatMul_7\n{coded}"]) == coded
    # a graph-wide parser error names no node, twice: the cause (here a UINT64 initializer of
    # torch.onnx's int64 >>, a maintainer's hunt) must fit in the verdict's 300 characters
    empty = "In node -1 with name:  and operator:  (parseGraph): "
    said = tensorrt_said([f"{empty}INVALID_GRAPH: Failed to import initializer: {empty}UNSUPPORTED_NODE: Assertion "
                          "failed: ctx->getWeightsContext().convertOnnxWeights(initializer, &weights): Failed to import "
                          "initializer: val_4"],
                         ["WeightsContext.cpp:462: Found unsupported datatype (13) when importing initializer: val_4"])
    assert "In node -1" not in said and len("the ONNX parser failed: " + said) <= 300, said
    assert said.endswith(" | WeightsContext.cpp:462: Found unsupported datatype (13) when importing initializer: val_4")


def test_nvidias_tensorrt_without_a_gpu_is_refused_and_its_script_skips(tmp_path: Path, monkeypatch) -> None:
    """Only TensorRT-RTX builds without a GPU: NVIDIA's TensorRT cannot start its builder there
    (a nullptr Builder), which must not be reduced as if it were the bug. The backend refuses
    in one line; repro_tensorrt.py says SKIPPED before it builds."""
    if HAS_GPU:
        pytest.skip("a GPU is visible")
    import oracles.backends.tensorrt as trt_backend
    from oracles.errors import TrtminError
    monkeypatch.setattr(trt_backend, "tensorrt_module_name", lambda: "tensorrt")
    with pytest.raises(TrtminError, match="needs an NVIDIA GPU"):
        trt_backend.check_tensorrt("tensorrt")
    from oracles.backends.onnx_export import export_onnx
    from oracles.backends.tensorrt_script import write_tensorrt_script
    from oracles.checks import flatten_outputs
    gm, inputs = candidate(*attn_pool_softmax_1d.build())
    onnx = export_onnx(gm, inputs, tmp_path / "m" / "model.onnx")
    script = write_tensorrt_script(tmp_path / "out", onnx.path, inputs, flatten_outputs(gm(*inputs)), "crash",
                                   1e-3, 1e-3, "header", error_pattern="Softmax", build_time=True,
                                   child=False)
    fake = tmp_path / "site" / "tensorrt"  # a module named tensorrt, as NVIDIA's is: not TensorRT-RTX
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '10.0.0'\n")
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    r = run_repro(script.parent, script="repro_tensorrt.py")
    assert r.returncode == 2 and r.stdout.startswith("SKIPPED: TensorRT 10.0.0 needs a GPU"), r.stdout + r.stderr


@pytest.mark.parametrize("kind", ["crash", "mismatch"])
def test_a_tensorrt_that_fails_to_import_skips_the_script_without_torch(tmp_path: Path, monkeypatch,
                                                                        kind: str) -> None:
    """repro_tensorrt.py where TensorRT is installed but its import fails (a broken install,
    a missing library): SKIPPED (exit 2), as repro.py says, not CHANGED: no news of the bug
    (a maintainer's hunt). So is a control ONNX Runtime cannot run."""
    from oracles.backends.onnx_export import export_onnx
    from oracles.backends.tensorrt_script import write_tensorrt_script
    from oracles.checks import flatten_outputs
    gm, inputs = candidate(*attn_pool_softmax_1d.build())
    onnx = export_onnx(gm, inputs, tmp_path / "m" / "model.onnx")
    script = write_tensorrt_script(tmp_path / "out", onnx.path, inputs, flatten_outputs(gm(*inputs)), kind,
                                   1e-3, 1e-3, "header", error_pattern="Softmax" if kind == "crash" else "",
                                   build_time=kind == "crash", child=False)
    broken = tmp_path / "site"
    broken.mkdir()
    for name in ("tensorrt", "tensorrt_rtx"):  # found, as installed ones are; their import fails
        (broken / f"{name}.py").write_text("raise ImportError('libnvinfer.so.10: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken))
    r = run_repro(script.parent, script="repro_tensorrt.py")
    assert (r.returncode, r.stdout.strip()) == (
        2, "SKIPPED: cannot run: ImportError: libnvinfer.so.10: cannot open shared object file"), r.stdout + r.stderr
    # the control, ONNX Runtime, that cannot run the model (a bf16 Conv it has no kernel for, a robotics
    # user's hunt): SKIPPED too, not CHANGED; the control is asked to say FIXED, and cannot here
    (broken / "onnxruntime.py").write_text("class InferenceSession:\n    def __init__(self, *args, **kwargs):\n"
                                           "        raise RuntimeError('INVALID_GRAPH: no bf16 Conv')\n")
    r = run_repro(script.parent, script="repro_tensorrt.py", backend="onnxruntime")
    assert (r.returncode, r.stdout.strip()) == (
        2, "SKIPPED: ONNX Runtime, the control, cannot run the model here: RuntimeError: INVALID_GRAPH: no bf16 Conv"), \
        r.stdout + r.stderr



class TwoInTwoOut(nn.Module):
    """Inputs and outputs of different shapes and dtypes: a swapped input or output of the
    engine's run fails or differs."""

    def forward(self, x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.tanh(x) * k.float()).sum(-1), k * 3


class EmptyToo(nn.Module):
    """An input and an output with no elements, beside a plain one."""

    def forward(self, x: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tanh(x) * 2, e + 1


def write_script(folder: Path, verdict, device: str, settings: dict[str, str] | None = None,
                 empty: bool = False) -> str:
    """repro.py of TwoInTwoOut (EmptyToo if `empty`) on the tensorrt backend (with
    `settings`) for a bug that shows as `verdict`, written to `folder` with its tensors file."""
    from minimize.program.model import Program
    from tests.helpers import write_repro

    torch.manual_seed(0)
    model, args = ((EmptyToo(), (torch.randn(3, 4), torch.randn(0, 4))) if empty else
                   (TwoInTwoOut(), (torch.randn(3, 4), torch.arange(1, 5, dtype=torch.int32))))
    program = Program(torch.export.export(model, args).run_decompositions({}), list(args))
    piece = program.materialize(program.all_kept())
    return write_repro(folder, piece.gm, dict(zip(piece.input_names, program.inputs_for(piece))), {}, verdict,
                       TensorRTBackend("tensorrt", settings), device)


@pytest.mark.skipif(not HAS_GPU, reason="the engine runs on a CUDA GPU")
@pytest.mark.parametrize("empty", [False, True])
def test_the_short_script_of_a_mismatch_runs_the_engine_by_tensor_name(tmp_path: Path, empty: bool) -> None:
    """repro.py's short TensorRT form of a static program (no pasted runner): it feeds each
    input by its name and reads each output into a buffer of the engine's shape and dtype
    (a tensor of no elements gets an address of its own). On a graph TensorRT gets right it
    says FIXED, alone in a new process."""
    from oracles.verdict import Verdict

    script = write_script(tmp_path, Verdict("mismatch", output=0, max_abs=1.0), "cuda", empty=empty)
    assert "def run_engine_torch" not in script and "context.execute_async_v3" in script, script
    r = run_repro(tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("FIXED: the backend matches eager"), r.stdout + r.stderr[-3000:]


@needs_no_gpu
@pytest.mark.parametrize("kind", ["mismatch", "nan"])
def test_the_short_script_of_a_value_bug_skips_without_a_gpu(tmp_path: Path, kind: str) -> None:
    """Reduced on --device cpu, the script's eager half runs anywhere; the engine does not:
    SKIPPED (exit 2), not CHANGED, on a machine without a GPU."""
    from oracles.verdict import Verdict

    write_script(tmp_path, Verdict(kind, output=0, max_abs=1.0), "cpu")
    r = run_repro(tmp_path)
    assert (r.returncode, r.stdout.strip()) == (
        2, "SKIPPED: running the TensorRT engine needs a CUDA GPU, and none is visible here"), r.stdout + r.stderr


@pytest.mark.parametrize("settings", [{}, {"optimization_level": "2"}, {"flags": "TF32"}])
def test_a_build_failure_script_says_fixed_where_the_build_passes(tmp_path: Path, settings: dict[str, str]) -> None:
    """The short form of a parser or builder bug builds and stops there: on a program
    TensorRT builds, FIXED names the TensorRT that built it, with or without a GPU. It
    writes build_plan's steps out (no helper of trtmin's), with the lines of the settings
    it has, no others."""
    from oracles.verdict import Verdict

    script = write_script(tmp_path, Verdict("crash", "TensorRTError", "building the engine failed: Error Code 10"),
                          "cuda" if HAS_GPU else "cpu", settings)
    assert "def build_plan" not in script and "def run_engine_torch" not in script, script
    assert ("config.builder_optimization_level = 2" in script) is ("optimization_level" in settings)
    assert ("config.set_flag(trt.BuilderFlag.TF32)" in script) is ("flags" in settings)
    if importlib.util.find_spec("pyflakes"):
        from tests.test_script_lint import lint
        assert not lint(script, "repro.py")
    r = run_repro(tmp_path)
    trt = import_tensorrt()
    assert (r.returncode, r.stdout.strip()) == (
        0, f"FIXED: {trt.__name__} {trt.__version__} parsed and built the engine without the error"), \
        r.stdout + r.stderr[-3000:]


def test_a_build_failure_script_matches_what_trtmin_kept_of_all_tensorrt_said() -> None:
    """The short build-failure script quotes every error TensorRT logged; trtmin's words keep
    some of them (tensorrt_said drops catchCudaError's line, which every build without a GPU
    logs, and the parser's node dumps). Its ERROR_PATTERN finds the kept lines, in order,
    among all of them, and another error code is another bug."""
    from oracles.backends.tensorrt import said_pattern, tensorrt_said

    cuda = "[checkMacros.cpp::catchCudaError::212] Error Code 1: Cuda Runtime (no CUDA-capable device)"
    myelin = "IBuilder::buildSerializedNetwork: Error Code 10: Internal Error (Could not find any implementation)"
    kept = "building the engine failed: " + tensorrt_said([], [cuda, "Network validation failed.", myelin])
    pattern = said_pattern(kept)
    assert re.search(pattern, "TensorRTError: building the engine failed: " + " | ".join(
        [cuda, "Network validation failed.", "node dump\nof two lines", myelin]))
    assert not re.search(pattern, "TensorRTError: building the engine failed: " + " | ".join(
        [cuda, "Network validation failed.", myelin.replace("Error Code 10", "Error Code 2")]))
    assert not re.search(pattern, "TensorRTError: the ONNX parser failed: Network validation failed. | " + myelin)
    # the same error at another line of TensorRT's source, about another node's counter: the same
    # bug, as trtmin's own signature judges it
    at = "[graphOptimizer.cpp::fuse::{}] Error Code 2: Internal Error (Assertion failed: /MatMul_{} has no tactic)"
    pattern = said_pattern("building the engine failed: " + tensorrt_said([], [cuda, at.format(731, 17)]))
    assert re.search(pattern, "TensorRTError: building the engine failed: " + " | ".join([cuda, at.format(802, 4)]))


class Median(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).median(-1).values


def test_an_emit_script_that_cannot_be_made_is_said_and_the_rest_stands(tmp_path: Path) -> None:
    """--emit tensorrt of a bug in torch.onnx's export itself (no ONNX function for median):
    the TensorRT-only script needs that export. It ended in a traceback (exit 1), with
    report.md and summary.json naming repro_tensorrt.py, model.onnx and the .npz, none
    written (a TensorRT user's hunt). Now report.md says why it is missing, and lists no
    such file; repro.py stands."""
    model, inputs = save_program(Median().eval(), (torch.randn(2, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", "tensorrt",
                     "--emit", "tensorrt", "--out", str(out), "--no-verify")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "note: no script for tensorrt: OnnxExportError: torch.onnx.export failed" in r.stderr, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["emitted"] == [] and "median" in summary["emit_failed"]["tensorrt"], summary
    assert not {"repro_tensorrt.py", "model.onnx", "repro_tensorrt.npz"} & set(summary["files"]), summary["files"]
    assert not any((out / name).exists() for name in ("repro_tensorrt.py", "model.onnx", "repro_tensorrt.npz"))
    report = (out / "report.md").read_text()
    assert "Not written for tensorrt (`repro_tensorrt.py`): making it failed, OnnxExportError" in report, report
    assert "Also written for other backends" not in report


def test_a_timeout_shorter_than_any_compile_is_refused_not_reduced_as_a_hang(tmp_path: Path) -> None:
    """--oracle hang with a --timeout under a fresh worker's first export and build: every
    program "hangs", and a reduction ended at a 1-node view "hang" whose repro reproduced (a
    TensorRT user's hunt). A one-op program runs past it too: refused, exit 2, one line."""
    model, inputs = save_program(nn.Linear(8, 4).eval(), (torch.randn(2, 8),), tmp_path)
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "hang", "--backend", "tensorrt",
                     "--timeout", "0.5")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith(
        "error: one-op programs (x + 1, x * 2) run past --timeout 0.5 s too"), r.stderr[-2000:]
