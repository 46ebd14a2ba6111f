"""The eager snippet at the top of report.md (minimize/emit/snippet.py), on forward sources
as repro.py writes them."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re

import pytest
import torch

from minimize.emit.snippet import MAX_LINES, OWN_NAMES, bound_names, snippet_source
from oracles.backends import BUILTIN
from oracles.backends.base import SnippetCall

FORWARD = """def forward(self, x):
    w = self.w
    masked_fill = torch.ops.aten.masked_fill.Scalar(x, torch.ops.aten.gt.Scalar(x, 0), -inf)
    linear = torch.ops.aten.linear.default(masked_fill, w)
    return (linear,)"""


def test_weights_become_variables_and_it_runs_as_eager_code():
    tensors = {"x": ("torch.ones(2, 3)", True), "w": ("torch.full((4, 3), 0.5)", True)}
    text = snippet_source(FORWARD, tensors, None, "cpu", "compiled with b: output 0 differs")
    assert "self." not in text and "w = w" not in text
    assert text.splitlines()[-1] == "out = (linear,)  # compiled with b: output 0 differs"
    ns: dict = {}
    exec(text, ns)  # -inf needs the header's inf; no tensors file
    expected = torch.nn.functional.linear(torch.ones(2, 3).masked_fill(torch.ones(2, 3) > 0, float("-inf")),
                                          torch.full((4, 3), 0.5))
    torch.testing.assert_close(ns["out"][0], expected, rtol=0, atol=0, equal_nan=True)


def test_tensors_move_to_the_device_and_the_file_is_loaded_where_used():
    tensors = {"x": ("tensors['x']", True), "n": ("3", False), "w": ("torch.ones(4, 3)", True)}
    text = snippet_source(FORWARD, tensors, "repro_inputs.pt", "cuda", "f")
    assert "x = tensors['x'].to('cuda')" in text and "n = 3\n" in text and "w = torch.ones(4, 3).to('cuda')" in text
    assert "tensors = torch.load('repro_inputs.pt', weights_only=True)" in text


def test_no_snippet_for_subgraphs_on_self_or_long_graphs():
    cond = FORWARD.replace("    linear =", "    true_graph_0 = self.true_graph_0\n    linear =")
    assert snippet_source(cond, {"x": ("1", False), "w": ("2", False)}, None, "cpu", "f") is None
    long = FORWARD.replace("    return", "".join(f"    y{i} = torch.ops.aten.sin.default(x)\n" for i in range(MAX_LINES))
                           + "    return")
    assert snippet_source(long, {"x": ("1", False), "w": ("2", False)}, None, "cpu", "f") is None
    many = {**{f"t{i}": ("1", False) for i in range(MAX_LINES)}, "x": ("1", False), "w": ("2", False)}
    assert snippet_source(FORWARD, many, None, "cpu", "f") is None  # a short graph, a line per input: as long


def test_every_made_value_form_runs_on_another_device():
    """Each form the made values take (minimize/search/passes/values.py: randn, a bool mask made
    by a comparison, integers, complex), moved to a device: the move binds to the whole
    expression (`torch.rand(...) < 0.75` then `.to(...)` raised as `0.75.to(...)`). 'meta'
    stands for a GPU here: the code must run, the values need not."""
    from minimize.search.passes.values import expression

    forward = """def forward(self, a, b, c, d):
    return (a, b, c, d)"""
    g = torch.Generator().manual_seed(0)
    values = {"a": torch.randn(8, 8, generator=g), "b": torch.rand(8, 8, generator=g) < 0.5,  # above the inline size
              "c": torch.randint(0, 7, (64,), generator=g), "d": torch.randn(2, 2, dtype=torch.complex64, generator=g)}
    tensors = {name: (expression(v, seed), True) for seed, (name, v) in enumerate(values.items())}
    assert " < " in tensors["b"][0]
    text = snippet_source(forward, tensors, None, "meta", "f")
    ns: dict = {}
    exec(text, ns)
    assert [t.device.type for t in ns["out"]] == ["meta"] * 4
    assert [t.dtype for t in ns["out"]] == [v.dtype for v in values.values()]


def test_with_a_backend_call_the_snippet_compiles_the_graph_as_a_function():
    """Where the backend is one short call (Inductor's torch.compile), the snippet is the
    bug: the graph as f(inputs), run eagerly and through the backend, both of which run."""
    tensors = {"x": ("torch.ones(2, 3)", True), "w": ("torch.full((4, 3), 0.5)", True)}
    call = BUILTIN["inductor"]("inductor", {}).snippet_call(["x"])
    text = snippet_source(FORWARD, tensors, None, "cpu", "output 0 differs", call, ("x",))
    lines = text.splitlines()
    assert "def f(x):" in lines and lines[-2:] == [
        "out = f(x)  # eager", 'got = torch.compile(f, backend="inductor")(x)  # output 0 differs']
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - the snippet as report.md shows it
    torch.testing.assert_close(ns["got"], ns["out"], equal_nan=True)


def test_a_compiler_that_exports_gets_the_graph_as_a_module_that_exports():
    """Torch-TensorRT compiles an ExportedProgram, and torch.export takes no function: the
    snippet's graph is then class F, whose weights (snippet variables) are its buffers, as
    program's buffers. Here an export then Inductor stands in for Torch-TensorRT's
    call, which needs a GPU (tests/test_torch_tensorrt_gpu.py runs that one); the
    Torch-TensorRT form itself must be lint-clean."""
    from tests.test_script_lint import lint

    tensors = {"x": ("torch.ones(2, 3)", True), "w": ("torch.full((4, 3), 0.5)", True)}
    exported = SnippetCall('torch.compile(torch.export.export(f, (x,)).module(), backend="inductor")', module=True)
    text = snippet_source(FORWARD, tensors, None, "cpu", "output 0 differs", exported, ("x",))
    assert "class F(torch.nn.Module):" in text and "    def forward(self, x):" in text and "f = F(w=w)" in text
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - the snippet as report.md shows it
    torch.testing.assert_close(ns["got"], ns["out"], equal_nan=True)
    # its weight exports as a weight (a buffer, as in repro.py), not a constant: XNNPACK's
    # linear + batch_norm bug needs that (tests/test_executorch_e2e.py runs that snippet)
    assert list(torch.export.export(ns["f"], (ns["x"],)).graph_signature.buffers) == ["w"]

    trt = BUILTIN["torch_tensorrt"]("torch_tensorrt", {}).snippet_call(["x"])
    text = snippet_source(FORWARD, tensors, None, "cuda", "crash", trt, ("x",))
    assert text.splitlines()[:2] == ["import torch", "import torch_tensorrt"]
    assert text.splitlines()[-1] == ("got = torch_tensorrt.dynamo.compile(torch.export.export(f, (x,)), arg_inputs=[x], "
                                     "min_block_size=1)(x)  # crash"), text
    assert not lint(text, "snippet.py")


@pytest.mark.parametrize("spec,package", [("onnxruntime", "onnxruntime"), ("executorch:portable", "executorch"),
                                          ("executorch:xnnpack", "executorch")])
def test_onnxruntime_and_executorch_snippets_run_the_graph_through_the_backend(spec: str, package: str):
    """ONNX Runtime's snippet is torch.onnx's exported program called (it runs itself in
    an onnxruntime session); ExecuTorch's lowers, loads the program from its buffer and
    executes forward. Each runs here, lint-clean, and gets eager's values."""
    pytest.importorskip(package)
    from oracles.backends import resolve
    from tests.test_script_lint import lint

    tensors = {"x": ("torch.ones(2, 3)", True), "w": ("torch.full((4, 3), 0.5)", True)}
    call = resolve(spec, {}).snippet_call(["x"])
    text = snippet_source(FORWARD, tensors, None, "cpu", "output 0 differs", call, ("x",))
    assert "class F(torch.nn.Module):" in text and not lint(text, "snippet.py"), text
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - the snippet as report.md shows it
    torch.testing.assert_close(list(ns["got"]), list(ns["out"]))


def test_a_tensorrt_build_failure_snippet_parses_and_builds_as_trtmin_did(tmp_path, monkeypatch):
    """TensorRT's parser or builder shows the bug without any run: the snippet exports to
    ONNX, parses, and builds with the backend's settings, the failing step last. Run here
    on real TensorRT-RTX (which builds without a GPU) on a graph that builds: no assert
    fails. Another bug runs the engine (tests/test_tensorrt_rtx.py runs that form on a GPU)."""
    pytest.importorskip("onnxscript")
    from oracles.backends import resolve
    from oracles.backends.tensorrt import tensorrt_module_name
    from oracles.verdict import Verdict
    from tests.test_script_lint import lint

    if tensorrt_module_name() is None:
        pytest.skip("neither tensorrt nor tensorrt_rtx is installed")
    tensors = {"x": ("torch.ones(2, 3)", True), "w": ("torch.full((4, 3), 0.5)", True)}
    backend = resolve("tensorrt", {"tf32": "false", "optimization_level": "1", "workspace": str(2**28)})
    built = backend.snippet_call(["x"], Verdict("crash", "TensorRTError", "building the engine failed: Error Code 1"))
    assert "config.clear_flag(trt.BuilderFlag.TF32)" in built.setup
    assert "config.builder_optimization_level = 1" in built.setup and built.last.startswith("if not builder.build")
    parsed = backend.snippet_call(["x"], Verdict("crash", "TensorRTError", "the ONNX parser failed: In node 0"))
    assert parsed.last.startswith("if not parser.parse_from_file(") and not any("config" in s for s in parsed.setup)
    assert not any(line.lstrip().startswith("assert ") for call in (built, parsed) for part in (*call.setup, call.last)
                   for line in part.splitlines())  # python -O drops an assert: the bug would pass unseen
    # the builder segfaulting (a trial's two attentions): the build is last, no input goes to a GPU
    died = backend.snippet_call(["x"], Verdict("crash", "Signal", "SIGSEGV in build_plan (called from compile)"))
    assert died.last == built.last and not any("cuda" in s for s in died.setup), died
    import dataclasses

    from minimize.emit.outputs import export_passed
    from tests.helpers import repro_info
    death = Verdict("crash", "Signal", "SIGSEGV in build_plan (called from compile)")  # model.onnx goes beside it
    assert export_passed(dataclasses.replace(repro_info(death), needs_subprocess=True), backend)
    assert not export_passed(dataclasses.replace(repro_info(Verdict("crash", "Signal", "SIGSEGV in export_onnx")),
                                                 needs_subprocess=True), backend)
    # the export failing: TensorRT never sees the model, and the snippet stops at the export
    export = backend.snippet_call(["x"], Verdict("crash", "OnnxExportError", "torch.onnx.export failed (X): y"))
    assert export.last.startswith("torch.onnx.export(f, (x,)") and not export.setup and not export.imports, export
    ran = backend.snippet_call(["x"], Verdict("mismatch", output=0, max_abs=1.0))
    assert ran.last.startswith("context.execute_async_v3(") and "config.clear_flag(trt.BuilderFlag.TF32)" in ran.setup
    assigned = [line.split(" = ")[0] for line in ran.setup]  # the inputs are read before a name is taken
    assert assigned.index("feed") < min(assigned.index(n) for n in ("logger", "network", "config", "engine", "context"))
    assert not lint(snippet_source(FORWARD, tensors, None, "cuda", "differs", ran, ("x",)), "snippet.py")

    text = snippet_source(FORWARD, tensors, None, "cpu", "building the engine failed", built, ("x",))
    assert not lint(text, "snippet.py"), text
    monkeypatch.chdir(tmp_path)  # where it writes its export
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - the snippet as report.md shows it: this graph builds
    assert "got" not in ns and ns["builder"].build_serialized_network(ns["network"], ns["config"])


def test_every_tensorrt_setting_shows_in_its_snippet():
    """The snippet writes the builder's settings as text, beside build_plan's code that
    applies them: each --set key the backend takes must change the snippet's text, so a
    setting added to one and not the other fails here."""
    from oracles.backend_setup import TRT_KEYS
    from oracles.backends.tensorrt import TensorRTBackend
    from oracles.verdict import Verdict

    def text(settings: dict[str, str]) -> str:
        call = TensorRTBackend("tensorrt", settings).snippet_call(["x"], Verdict("mismatch", output=0, max_abs=1.0))
        return "\n".join((*call.setup, call.last))

    plain = text({})
    values = {"flags": "FP16", "strongly_typed": "true", "optimization_level": "1", "workspace": "1024", "opset": "18"}
    for key in TRT_KEYS:
        assert text({key: values.get(key, "true")}) != plain, f"--set {key}=... leaves the snippet as it was"


@pytest.mark.parametrize("off_by", [1.0, 0.0])
def test_a_mismatch_snippet_raises_on_the_bug_and_passes_once_fixed(off_by: float):
    """A maintainer runs the snippet and sees the bug: its last line is assert_close at
    trtmin's tolerances, on whatever device and dtype the backend returns. A backend off
    by 1 (here a compiled call that adds it) raises; one that matches runs through."""
    from minimize.emit.report import compare_line
    from oracles.verdict import Verdict
    from tests.helpers import repro_info

    info = repro_info(Verdict("mismatch", output=0, max_abs=1.0))
    compare = compare_line(info)
    shown = compare_line(dataclasses.replace(info, reference="float64"))  # eager's own error judges it there:
    assert shown.startswith('print("output 0 differs from eager by", ')  # no assert, the size printed
    assert "check_device=False" in compare    # ONNX Runtime's on the host, TensorRT's on the GPU for --device cpu
    # as trtmin judges: integers with no relative tolerance; a number or a complex value (a
    # compiler's real view of it) is trtmin's to judge, and an assert would raise on its form
    assert "rtol=0.0," in compare_line(info, [torch.zeros(2, dtype=torch.int64)])
    assert "rtol=0.001," in compare_line(info, [torch.zeros(2, dtype=torch.int64), torch.zeros(2)])
    assert compare_line(info, [torch.zeros(2), 3]) == compare_line(info, [torch.zeros(2, dtype=torch.cfloat)]) == ""
    off = SnippetCall(f"(lambda fn: lambda *a: [t.double() + {off_by} for t in fn(*a)])(f)")  # and another dtype
    tensors = {"x": ("-torch.ones(2, 3)", True), "w": ("torch.full((4, 3), 0.5)", True)}
    text = snippet_source(FORWARD, tensors, None, "cpu", "output 0 differs", off, ("x",), compare)
    assert text.splitlines()[-1] == f"{compare}  # output 0 differs"
    ns: dict = {}
    if off_by:
        with pytest.raises(AssertionError, match="Tensor-likes are not close"):
            exec(text, ns)  # noqa: S102 - the snippet as report.md shows it
    else:
        exec(text, ns)  # noqa: S102
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(snippet_source(FORWARD, tensors, None, "cpu", "output 0 differs", off, ("x",), shown), {})  # noqa: S102
    assert printed.getvalue() == f"output 0 differs from eager by {off_by}\n"


def test_an_error_the_headline_cuts_is_in_the_report_whole():
    """TensorRT's 'must have type Float, Half, ... Int4, I...' was cut at 300 characters in
    the headline, report.md and summary alike: the clause that said what was wrong (no
    UInt8) appeared nowhere. A message the headline shows whole gets no fold."""
    from minimize.emit.report import _whole_message
    from oracles.verdict import Verdict

    long = "input must have type " + ", ".join(f"T{i}" for i in range(80)) + ", or Bool"
    folded = _whole_message(Verdict("crash", "TensorRTError", long))
    assert folded.startswith("<details><summary>The whole error</summary>") and "or Bool\n```\n" in folded
    assert _whole_message(Verdict("crash", "RuntimeError", "short and whole")) == ""
    assert "stack line 2" in _whole_message(Verdict("crash", "RuntimeError", "first\nstack line 2"))
    stack = _whole_message(Verdict("crash", "ValueError", 'bad\nFile "/home/me/policy/camera.py", line 37, in forward'))
    assert 'File "camera.py", line 37' in stack and "/home/me" not in stack  # for an upstream issue: no folders
    assert _whole_message(Verdict("mismatch", output=0, max_abs=1.0)) == ""
    odd = _whole_message(Verdict("crash", "E", "bad\n```\nx\n````\nafter\n\x1b[31mred\x1b[0m"))
    assert odd.count("`````") == 2 and "\x1b" not in odd  # a fence the message cannot close; no colours


def test_onnxruntime_and_xnnpack_snippets_carry_the_settings_the_bug_was_seen_with():
    """The snippet runs the backend as the reduction did, or is not written: ONNX Runtime's
    export at --set opset=N (a bug of one opset may not show at the exporter's default; a
    session option, which torch.onnx's call cannot take, leaves no snippet), and XNNPACK's
    partitioner with its --set flags."""
    pytest.importorskip("onnxruntime")
    from oracles.backends import resolve

    call = resolve("onnxruntime", {"opset": "18"}).snippet_call(["x"])
    assert call is not None and call.compiled == "torch.onnx.export(f, (x,), dynamo=True, opset_version=18)", call
    assert resolve("onnxruntime", {"intra_op_num_threads": "2"}).snippet_call(["x"]) is None
    pytest.importorskip("executorch")
    call = resolve("executorch:xnnpack", {"per_op_mode": "true"}).snippet_call(["x"])
    assert call.setup[0] == ("pte = to_edge_transform_and_lower(torch.export.export(f, (x,)), "
                             "partitioner=[XnnpackPartitioner(per_op_mode=True)]).to_executorch()"), call


def test_a_report_of_a_program_that_kept_every_node_says_whether_anything_changed():
    """One node, 1 -> 1: where a pass tried and took nothing (the made values lost the bug),
    the program is the user's as it is; where one took a step (the values made, the sizes
    shrunk) no node was cut, but something was, and the Diagnosis says what. Neither reads
    "cut it down to 1 call node"."""
    from dataclasses import replace

    from minimize.emit.report import render_report
    from oracles.backends import resolve
    from oracles.verdict import Verdict
    from tests.helpers import repro_info

    info = replace(repro_info(Verdict("crash", "E", "boom")), original_nodes=1, final_nodes=1, oracle_calls=2)
    rows = {"check_original": {"calls": 1, "accepted": 0, "removed": 0}}
    for accepted, said in ((0, "is `model.pt2` as it is (1 call node; 2 oracle calls): there was nothing to cut"),
                           (1, "is `model.pt2` with no node cut (1 call node; 2 oracle calls): what trtmin changed, "
                               "the Diagnosis below says")):
        summary = {"passes": {**rows, "generate_small_values": {"calls": 1, "accepted": accepted, "removed": 0}},
                   "check_rows": ["check_original"]}
        report = " ".join(render_report(info, "", resolve("inductor"), summary, input_names=["x"]).split())
        assert said in report and "cut it down" not in report, (accepted, report)
        assert "| generate_small_values | 1 |" in report, report  # the pass that ran is in the table either way


def test_the_inputs_nan_and_infinities_are_counted_apart() -> None:
    """report.md says how many NaN and how many infinities each float input holds, and where
    the first is; finite inputs and integers say nothing."""
    from minimize.emit.report import _nonfinite_section

    x = torch.zeros(3, 4)
    x[1, 2], x[2, 0], x[2, 3] = float("nan"), float("inf"), float("-inf")
    said = _nonfinite_section({"x": x, "ok": torch.ones(5), "n": torch.arange(4)})
    assert said == "The inputs are not all finite: `x` holds 1 NaN and 2 infinite of 12 values (the first at [1, 2]).\n\n"
    assert _nonfinite_section({"ok": torch.ones(5), "n": torch.arange(4)}) == ""


def test_whose_bug_names_the_portable_kernels_only_where_their_script_reproduced_alone() -> None:
    """A delegate that took none of the program's ops: the bug is the portable kernels' only
    where the script without the delegate reproduced it; one that said FIXED or could not run
    names nobody."""
    from minimize.emit.report import _whose_bug
    from oracles.out_folder import emitted_names

    script = emitted_names("executorch:portable")[0]
    for status, says in (("REPRODUCED", True), ("FIXED", False), ("SKIPPED", False), ("CHANGED", False)):
        summary = {"undelegated": "executorch:portable", "emitted_alone": {script: {"status": status, "exit": 1}}}
        said = _whose_bug(summary, "executorch:xnnpack")
        assert said.startswith("**Whose bug:** executorch:portable's") == says and (says or said == ""), (status, said)
    assert _whose_bug({"undelegated": "executorch:portable"}, "executorch:xnnpack") == ""  # not run (--no-verify)


def test_the_diagnosis_says_the_shape_was_kept_only_where_no_size_shrank() -> None:
    from minimize.emit.report import _diagnosis_lines

    kept = _diagnosis_lines({"generated_values": ["x"]})
    assert "of the same shape, dtype and scale" in kept and "Nor their sizes" not in kept
    shrunk = _diagnosis_lines({"generated_values": ["x"], "shrunk_shapes": {"x": [[8, 6], [2, 2]]}})
    assert "shape" not in shrunk.split("Nor their sizes")[0], shrunk  # its shape is not the same: said next
    assert "Nor their sizes: the script makes them smaller, `x` (8, 6) → (2, 2)." in shrunk, shrunk
    # only sliced values: no "Nor" with nothing before it (a review)
    sliced = _diagnosis_lines({"generated_values": {}, "sliced_values": ["b"], "shrunk_shapes": {"b": [[16], [2]]}})
    assert "- The bug does not need all the values of `b`: the script keeps their first ones, `b` (16,) → (2,)." \
        in sliced and "Nor" not in sliced, sliced


def test_the_report_names_the_tensors_file_the_script_reads() -> None:
    """Reproduce: repro.py that loads repro_inputs.pt needs it beside it, and the report says
    so; one that makes or writes all its tensors names no file."""
    from minimize.emit.report import _beside
    from minimize.emit.script import INPUTS_FILE, tensors_source
    from oracles.backends import resolve

    backend = resolve("inductor")
    init, make_inputs, big = tensors_source({"x": torch.randn(2)}, {"w": torch.randn(64, 64)})
    assert set(big) == {"w"}
    assert f"`{INPUTS_FILE}` (the larger tensors)" in _beside(init + make_inputs, backend)
    init, make_inputs, big = tensors_source({"x": torch.randn(2)}, {"w": torch.randn(2, 2)})
    assert not big and _beside(init + make_inputs, backend) == ""


def test_an_input_named_as_the_snippets_own_variables_gets_no_snippet() -> None:
    """The snippet assigns the inputs at its top level beside its own names: an input `f`
    became the graph's F() (ExecuTorch's: "Expected a value of type 'Tensor' ... found type
    'F'"), one named `tensors` the file's dict, one named `nan` the header's float. Given
    such names, snippet_source writes none (report.md's renames them first: the next test);
    a name the backend's call lines bind (TensorRT's `engine`) counts too."""
    forward = """def forward(self, NAME):
    mul = torch.ops.aten.mul.Tensor(NAME, 2)
    return (mul,)"""
    inductor = BUILTIN["inductor"]("inductor", {})
    for name in ("f", "tensors", "nan", "out"):
        tensors = {name: ("torch.ones(3)", True)}
        assert snippet_source(forward.replace("NAME", name), tensors, None, "cpu", "x",
                              inductor.snippet_call([name]), (name,)) is None, name
    text = snippet_source(forward.replace("NAME", "x"), {"x": ("torch.ones(3)", True)}, None, "cpu", "x",
                          inductor.snippet_call(["x"]), ("x",))
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - the snippet as report.md shows it
    assert torch.equal(ns["out"][0], torch.full((3,), 2.0))
    from oracles.verdict import Verdict
    trt = BUILTIN["tensorrt"]("tensorrt", {}).snippet_call(["engine"], Verdict("mismatch", output=0, max_abs=1.0))
    assert trt is not None and "engine" in bound_names((*trt.imports, *trt.setup, trt.last))
    assert snippet_source(forward.replace("NAME", "engine"), {"engine": ("torch.ones(3)", True)}, None, "cuda", "x",
                          trt, ("engine",)) is None


def test_an_input_named_as_the_snippets_own_variables_is_renamed_and_the_snippet_runs() -> None:
    """report.md's snippet of a program whose inputs are named `f`, `tensors` and `out` and
    whose weight is `F` (the snippet's own names: its graph, its file's dict, eager's result,
    torch.nn.functional) gets them as `f_`, ..., and runs, through real Inductor: its
    compare line passes, as Inductor agrees with eager on this program."""
    from minimize.emit.report import report_snippet
    from oracles.verdict import Verdict
    from tests.helpers import cpu_program, repro_info

    class Named(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("F", torch.full((3,), 2.0))

        def forward(self, f, tensors, out):
            return (f * self.F + tensors) * out

    program = cpu_program(Named().eval(), torch.ones(3), torch.full((3,), 3.0), torch.full((3,), 0.5))
    piece = program.materialize(program.all_kept())
    inputs = dict(zip(piece.input_names, program.inputs_for(piece, {})))
    constants = piece.weights(program.values)  # by attribute, as the emitters get them
    assert set(inputs) == {"f", "tensors", "out"} and set(constants) == {"F"}, (inputs, constants)
    verdict = Verdict("mismatch", output=0, max_abs=0.5)
    text = report_snippet(repro_info(verdict), piece.gm, inputs, constants, BUILTIN["inductor"]("inductor", {}))
    assert text is not None
    assert "f_ = " in text and "tensors_ = " in text and "out_ = " in text and "F_ = " in text \
        and "f_, tensors_, out_)" in text, text
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - the snippet as report.md shows it
    assert torch.equal(ns["out"][0], torch.full((3,), 2.5)) and torch.equal(ns["got"][0], ns["out"][0]), text


def test_renaming_apart_leaves_attributes_keywords_strings_and_fxs_own_globals() -> None:
    """renamed_apart renames a variable and a weight read (`self.f`), not another object's
    attribute, a keyword (also one that starts a continued line), a string or a comment. An
    input named as a global fx's code reads (`inf`, `torch`) cannot be told from that global
    (fx writes `inf_1 = inf` and `-inf`): left as it is, and such a program gets no snippet
    (a review found `-inf` renamed into the input)."""
    from minimize.emit.report import report_snippet
    from minimize.emit.snippet import renamed_apart
    from oracles.verdict import Verdict
    from tests.helpers import cpu_program, repro_info

    forward = """def forward(self, f, inf):
    w = self.f
    c = foo(f, x.f, 'f',  # f
            f=f)
    d = torch.ops.aten.where.ScalarOther(c, w, -inf)
    return (c,)"""
    text, renames = renamed_apart(forward, ["f", "inf"], OWN_NAMES)
    assert renames == {"f": "f_"}
    assert "def forward(self, f_, inf):" in text and "w = self.f_" in text and "foo(f_, x.f, 'f',  # f" in text
    assert "f=f_)" in text and "-inf)" in text and "torch.ops" in text, text

    class InfNamed(torch.nn.Module):
        def forward(self, inf, x):
            return torch.where(x > 0, x, float("-inf")) + inf

    program = cpu_program(InfNamed().eval(), torch.ones(3), torch.tensor([1.0, -1.0, 2.0]))
    piece = program.materialize(program.all_kept())
    inputs = dict(zip(piece.input_names, program.inputs_for(piece, {})))
    assert report_snippet(repro_info(Verdict("mismatch", output=0, max_abs=0.5)), piece.gm, inputs, {},
                          BUILTIN["inductor"]("inductor", {})) is None


def test_a_script_line_with_a_bar_stays_in_its_table_cell():
    """TensorRT joins its errors with " | ": unescaped in report.md's table of the --emit
    scripts, the cell ended at the first one (a TensorRT user's hunt)."""
    from minimize.emit.report import _emitted_line

    line = "REPRODUCED: TensorRTError: In node 0 with name: node_view | Reshape fails"
    said = _emitted_line({"emitted": ["tensorrt"], "emitted_alone": {
        "repro_tensorrt.py": {"status": "REPRODUCED", "exit": 1, "line": line}}})
    row = next(r for r in said.splitlines() if r.startswith("| `repro_tensorrt.py`"))
    assert row.endswith("| `REPRODUCED: TensorRTError: In node 0 with name: node_view \\| Reshape fails` |"), row
    assert len(re.findall(r"(?<!\\)\|", row)) == 4, row  # three cells
