"""Sizes exported as dynamic (torch.export.Dim) stay dynamic in every candidate's compile.

Before, each candidate was compiled at the example's sizes, so a compiler that fails only
on a symbolic size (pytorch/TensorRT#5037: attention and split converters and a dynamic
text length) was never seen: `trtmin check` said the bug does not reproduce."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.export import Dim

from minimize.program.model import Program, dynamic_bounds
from oracles.backends import resolve
from oracles.dynamic import export_dynamic_shapes, mark_dynamic
from tests.conftest import plugin
from tests.helpers import run_cli, run_cli_here, run_repro


class Head(nn.Module):
    """A text head whose sequence length is the dynamic size."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        scores = torch.softmax(self.proj(tokens), -1)
        return torch.tanh(scores * tokens.shape[0]) + 1.0


def _save(tmp_path, dynamic: bool) -> tuple:
    torch.manual_seed(0)
    x = torch.randn(6, 8)
    shapes = ({0: Dim("seq", min=4, max=64)},) if dynamic else None  # 6 shrinks to 4, not 2
    ep = torch.export.export(Head().eval(), (x,), dynamic_shapes=shapes)
    model, inputs = tmp_path / f"head_{dynamic}.pt2", tmp_path / "head_inputs.pt"
    torch.export.save(ep, str(model))
    torch.save((x,), str(inputs))
    return model, inputs


def test_bounds_follow_the_export_through_derived_sizes():
    class Two(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.cat([a, b]).relu(), a.reshape(-1)

    ep = torch.export.export(Two(), (torch.randn(4, 3), torch.randn(5, 3)),
                             dynamic_shapes=({0: Dim("a", min=2, max=10)}, {0: Dim("b")}))
    bounds = dynamic_bounds(ep.graph)
    assert bounds["a"] == {0: (2, 10)} and bounds["b"][0][1] is None  # unbounded: no max
    assert bounds["cat"][0][0] == 4 and bounds["cat"][0][1] is None   # a + b
    assert bounds["reshape"] == {0: (6, 30)}                           # 3 * a
    static = torch.export.export(Two(), (torch.randn(4, 3), torch.randn(5, 3)))
    assert dynamic_bounds(static.graph) == {}

    class Masked(nn.Module):  # a data-dependent size is no size the export made dynamic
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0].softmax(-1) * 2

    assert dynamic_bounds(torch.export.export(Masked(), (torch.randn(48),)).graph) == {}


def test_a_size_a_kept_node_reads_stays_symbolic_not_a_number():
    """A candidate that cut `cond.shape[0]` (a sym_size node) fed the reshape that reads it
    the example's number: the export pinned state's dynamic batch to it (the ops fix it),
    and ExecuTorch 1.4 failed on that static program with dynamic marks, a program
    reduced.pt2 cannot hold (it checked as no bug) and report.md called dynamic. The size
    stays in the candidate, read from its input, and the batch stays symbolic."""
    class Reshaped(nn.Module):
        def forward(self, state: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
            s = torch.relu(state.reshape(-1, 4))
            return s.reshape(cond.shape[0], 8).softmax(-1) + cond

    batch = Dim("batch", min=2, max=16)
    state, cond = torch.randn(6, 2, 4), torch.randn(6, 8)
    ep = torch.export.export(Reshaped(), (state, cond), dynamic_shapes=({0: batch}, {0: batch}))
    program = Program(ep, [state, cond])
    (size,) = [i for i, n in enumerate(program.nodes) if n.target is torch.ops.aten.sym_size.int]
    (reshape,) = [i for i, n in enumerate(program.nodes) if size in {program.index.get(a.name) for a in n.all_input_nodes}]
    kept = program.normalize([reshape])
    assert kept == tuple(sorted({reshape, size})), [program.nodes[i].name for i in kept]
    piece = program.materialize(kept)
    inputs = [mark_dynamic(v, program.dynamic.get(name, {}))  # as a worker feeds them
              for name, v in zip(piece.input_names, program.inputs_for(piece))]
    exported = torch.export.export(piece.gm, tuple(inputs), dynamic_shapes=export_dynamic_shapes(inputs))
    assert exported.range_constraints, exported.graph  # not pinned to 6
    assert program.normalize([size]) == (size,)  # a size whose reader is cut goes as any node


def test_the_onnx_export_is_dynamic_only_for_marked_inputs(tmp_path):
    """ONNX Runtime gets the marked dims dynamic; the ONNX -> TensorRT backend, whose engine
    has no optimization profile, keeps no marks and gets a static graph."""
    pytest.importorskip("onnxscript")
    from oracles.backends.onnx_export import export_onnx
    from oracles.backends.tensorrt import TensorRTBackend

    gm = torch.fx.symbolic_trace(Head().eval())
    dims = []
    for name, x in [("marked", mark_dynamic(torch.randn(6, 8), {0: (2, 64)})), ("plain", torch.randn(6, 8))]:
        onnx = export_onnx(gm, [x], tmp_path / f"{name}.onnx")
        import onnx as onnx_lib
        dim = onnx_lib.load(str(onnx.path)).graph.input[0].type.tensor_type.shape.dim[0]
        dims.append(dim.dim_param or dim.dim_value)
    assert isinstance(dims[0], str) and dims[0] and dims[1] == 6, dims
    assert TensorRTBackend.keeps_dynamic is False


def test_a_bug_that_needs_a_dynamic_size_is_seen_reduced_and_reproduced_alone(tmp_path):
    static_model, inputs = _save(tmp_path, dynamic=False)
    model, _ = _save(tmp_path, dynamic=True)
    backend = plugin("crash_on_dynamic_softmax")
    # the checks and the resume in this process (the same words and codes); the reduction in a process of its own
    r = run_cli_here("check", str(static_model), "--inputs", str(inputs), "--oracle", "crash", "--backend", backend)
    assert r.returncode == 0, r.stdout + r.stderr  # the planted converter takes static sizes
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", backend)
    assert r.returncode == 1 and "dynamic dimension" in r.stdout, r.stdout + r.stderr
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", backend,
                "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_nodes"] == 1
    script = (out / "repro.py").read_text()
    assert "DYNAMIC = {0: {0: (" in script and "softmax" in script
    alone = run_repro(out)
    assert alone.returncode == 1 and "dynamic dimension" in alone.stdout, alone.stdout + alone.stderr
    control = run_repro(out, backend="eager")
    assert control.returncode == 0 and control.stdout.startswith("FIXED"), control.stdout + control.stderr
    reduced = torch.export.load(str(out / "reduced.pt2"))  # dynamic again, within the export's bound
    (placeholder,) = [n for n in reduced.graph.nodes if n.op == "placeholder"]
    assert isinstance(placeholder.meta["val"].shape[0], torch.SymInt)
    assert [(int(r.lower), int(r.upper)) for r in reduced.range_constraints.values()] == [(4, 64)]
    # the made input shrinks to the Dim's min, not below it: the export kept the user's range
    assert summary["shrunk_shapes"] == {"linear": [[6, 8], [4, 2]]}, summary["shrunk_shapes"]  # the cut value fed in
    assert "DYNAMIC = {0: {0: (4, 64)}}" in script, script
    report = (out / "report.md").read_text()
    assert "dim 0 dynamic" in report and "compiled with static sizes it does not show" in report, report
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", backend,
                     "--out", str(out), "--no-verify", "--resume")
    again = json.loads((out / "summary.json").read_text())  # every verdict replayed, the static check's too
    assert r.returncode == 0 and again["timing"]["evaluations"] == 0 and again["dynamic"] == summary["dynamic"], r.stderr


def test_a_bug_that_shows_with_static_sizes_too_gets_a_static_repro(tmp_path):
    """The same dynamic export, a bug that does not need its dynamic size (the planted
    linear crash): one more call, compiled with static sizes, shows it, so repro.py takes
    the short static form (no DYNAMIC table, no marks) and report.md says why."""
    model, inputs = _save(tmp_path, dynamic=True)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("crash_on_linear"), "--out", str(out))
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dynamic"] == {} and summary["repro_alone"]["status"] == "REPRODUCED", summary
    assert summary["passes"]["check_static_sizes"]["accepted"] == 1, summary["passes"]  # was 0 (a newcomer's hunt)
    script = (out / "repro.py").read_text()
    assert "DYNAMIC" not in script and "mark_dynamic" not in script and "linear" in script
    assert "the bug shows with them static too" in (out / "report.md").read_text()


@pytest.mark.parametrize("spec", ["onnxruntime", "executorch:xnnpack"])
def test_exporting_backends_compile_the_dynamic_dims(spec):
    """A real compiler, through the export path: marked, the candidate runs at another
    sequence length (the engine is dynamic); unmarked, it is compiled for 6 rows only."""
    pytest.importorskip("onnxruntime" if spec == "onnxruntime" else "executorch")
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(Head().eval())
    backend = resolve(spec, {})
    longer = torch.randn(9, 8)
    with torch.no_grad():
        compiled = backend.compile(gm, [mark_dynamic(torch.randn(6, 8), {0: (2, 64)})])
        torch.testing.assert_close(torch.cat([o.reshape(-1) for o in compiled(longer)]), gm(longer).reshape(-1))
        static = backend.compile(gm, [torch.randn(6, 8)])
        with pytest.raises(Exception):
            static(longer)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_dynamic_sizes_on_cuda(tmp_path):
    """The same on the GPU: the marks survive the move of the values to CUDA, and Inductor
    compiles the dynamic candidate there."""
    model, inputs = _save(tmp_path, dynamic=True)
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "inductor",
                "--device", "cuda")
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--device", "cuda",
                "--backend", plugin("crash_on_dynamic_softmax"), "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr
    alone = run_repro(out)
    assert alone.returncode == 1 and "dynamic dimension" in alone.stdout, alone.stdout + alone.stderr


def test_tensorrt_inputs_follow_the_exported_program(monkeypatch):
    """Torch-TensorRT builds its profiles from the exported program: an Input's range must be
    the export's (bounded: TensorRT needs a max), and a dim the candidate's ops fixed (Dim.AUTO
    made it static) is no range. torch_tensorrt cannot be installed here: its Input is
    recorded by a stand-in, the export and the ranges are torch's own."""
    import sys
    import types

    from oracles.dynamic import export_dynamic_shapes, tensorrt_inputs

    class Input:
        def __init__(self, **shapes):
            self.shapes = shapes

    monkeypatch.setitem(sys.modules, "torch_tensorrt", types.SimpleNamespace(Input=Input))

    class Fixed(nn.Module):
        def forward(self, free: torch.Tensor, unbounded: torch.Tensor, pinned: torch.Tensor) -> torch.Tensor:
            return free.sum() + unbounded.sum() + (pinned + torch.ones(6, 8)).sum()  # pinned's 6 is fixed

    inputs = [mark_dynamic(torch.randn(6, 8), {0: (2, 64)}), mark_dynamic(torch.randn(5, 8), {0: (0, None)}),
              mark_dynamic(torch.randn(6, 8), {0: (2, 64)})]
    ep = torch.export.export(torch.fx.symbolic_trace(Fixed()), tuple(inputs),
                             dynamic_shapes=export_dynamic_shapes(inputs, bounded=True))
    free, unbounded, pinned = tensorrt_inputs(ep, inputs)
    assert free.shapes == {"min_shape": [2, 8], "opt_shape": [6, 8], "max_shape": [64, 8], "dtype": torch.float32}
    assert unbounded.shapes["min_shape"] == [2, 8] and unbounded.shapes["max_shape"] == [5, 8]  # max: the example's
    assert pinned is inputs[2]  # static in the export: a plain tensor


def test_a_commands_files_keep_the_dynamic_dims_and_load_as_weights(tmp_path):
    """cmd: the exported {model} is dynamic, and {inputs} holds plain tensors: the marks trtmin
    and Dynamo put on a tensor are not saved with it (the user's command would inherit them)."""
    import sys

    from oracles.backends.command import run_command

    reader = ("import sys, torch; x, = torch.load(sys.argv[2]); assert not x.__dict__, x.__dict__; "
              "ep = torch.export.load(sys.argv[1]); "
              "torch.save((ep.module()(torch.randn(9, 8)),), sys.argv[3])")  # another length: a dynamic program
    gm = torch.fx.symbolic_trace(Head().eval())
    out = run_command([sys.executable, "-c", reader, "{model}", "{inputs}", "{outputs}"], gm,
                      [mark_dynamic(torch.randn(6, 8), {0: (2, 64)})], tmp_path)
    assert out[0].shape == (9, 8)


def test_a_copy_keeps_the_marks_and_the_export_gets_the_bounds_widened_to_the_example():
    """Every oracle call compiles clones of the inputs: a clone keeps the dims marked
    dynamic (else each candidate compiles static and a bug of symbolic sizes never shows).
    A dim of size 1 stays static, as torch specializes it; the export's bounds keep their
    min and widen their max to the example's size (a max below it is an export error)."""
    from oracles.dynamic import clone_marked, export_dynamic_shapes

    x = mark_dynamic(torch.randn(6, 1, 8), {0: (2, 4), 1: (1, 64)})
    assert x._trtmin_dynamic == {0: (2, 4)}
    [copy] = clone_marked([x])
    assert copy is not x and copy._trtmin_dynamic == {0: (2, 4)}
    [spec] = export_dynamic_shapes([copy])
    assert list(spec) == [0] and (spec[0].min, spec[0].max) == (2, 6)
    assert export_dynamic_shapes([torch.randn(6, 8)]) is None
