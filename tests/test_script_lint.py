"""Every script form trtmin can write, and every saved one, is lint-clean: pyflakes finds
no undefined name (a branch not taken that calls a function the script lacks) and no
unused import; a written script's standard-library imports are sorted. Upstream
maintainers read these scripts first; a linter's complaint is the first thing they see."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minimize.program.model import Program
from minimize.emit.script import ReproInfo, render_script
from oracles.backends import BUILTIN
from oracles.backends.command import CommandBackend
from oracles.backends.plugin import PluginBackend
from oracles.verdict import Signature, Verdict
from tests.conftest import PLUGINS, Host
from tests.helpers import write_repro

pyflakes_api = pytest.importorskip("pyflakes.api")
from pyflakes.reporter import Reporter  # noqa: E402 - after the importorskip

ROOT = Path(__file__).resolve().parent.parent
VERDICTS = {
    "crash": Verdict("crash", "RuntimeError", "planted failure 12"),
    "crash_signal": Verdict("crash", "Signal", "SIGSEGV"),
    "crash_export": Verdict("crash", "OnnxExportError", "torch.onnx.export failed (ConversionError): no conversion"),
    "crash_wrapped": Verdict("crash", "Exception", "An error occurred when running the 'P' pass: ValueError: x"),
    "crash_logged": Verdict("crash", "RuntimeError", "Failed to load method forward, error: 0x:1",
                            extra={"native_errors": ["[XNNCompiler.cpp:664] Failed to define tensor 0"]}),
    "hang": Verdict("hang", message="no result within 5 s"),
    "nan": Verdict("nan", output=0),
    "mismatch": Verdict("mismatch", output=0, max_abs=1.0),
    "oom": Verdict("oom", "RuntimeError", "CUDA out of memory"),
}


def lint(text: str, name: str) -> list[str]:
    import io
    out, err = io.StringIO(), io.StringIO()
    pyflakes_api.check(text, name, Reporter(out, err))
    return [line for line in (out.getvalue() + err.getvalue()).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def piece():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    program = Program(torch.export.export(Host().eval(), (x,)).run_decompositions({}), [x])
    kept = program.all_kept()
    sliced = program.materialize(kept)
    values = dict(zip(sliced.input_names, program.inputs_for(sliced)))
    values.update({n: program.values[n] for n in sliced.constant_names if n in program.values})
    return sliced, values


def backends() -> list:
    made = [BUILTIN[name](name, {}) for name in ("eager", "inductor", "torch_tensorrt", "tensorrt", "onnxruntime",
                                                 "executorch:xnnpack", "executorch:tensorrt")]
    plugin = PluginBackend(f"{PLUGINS}:crash_on_linear", {})
    plugin.validate()
    return made + [plugin, CommandBackend("cmd:python run.py {model} {inputs} {outputs}", {})]


@pytest.mark.parametrize("kind", sorted(VERDICTS))
def test_every_emitted_form_is_lint_clean(piece, kind: str) -> None:
    sliced, values = piece
    verdict = VERDICTS[kind]
    problems = []
    for backend, float64, limit, dynamic in itertools.product(
            backends(), (False, True), (None, 512), (False, True)):
        if float64 and kind != "mismatch":
            continue
        info = ReproInfo(
            title="lint", source_model="model.pt2", original_nodes=18, final_nodes=len(sliced.gm.graph.nodes),
            oracle_calls=3, oracle="crash" if kind == "crash_signal" else kind, verdict=verdict,
            signature=Signature.of(verdict), match=None, atol=1e-3, rtol=1e-3, device="cpu",
            needs_subprocess=kind in ("crash_signal", "hang"), timeout=5.0,
            reference="float64" if float64 else "eager", memory_limit_mb=limit,
            dynamic={sliced.input_names[0]: {0: (2, 64)}} if dynamic else {})
        inputs = {n: values[n] for n in sliced.input_names}
        constants = sliced.weights(values)
        script, _ = render_script(info, sliced.gm, inputs, constants, backend)
        compile(script, "repro.py", "exec")
        if kind in ("mismatch", "nan"):  # another count of outputs: trtmin's check calls it a mismatch
            said = re.findall(r'else \("(REPRODUCED|CHANGED: fails differently now)", f"the backend returns', script)
            assert said == ["CHANGED: fails differently now" if kind == "nan" else "REPRODUCED"], (kind, said)
        stdlib = re.findall(r"^import (\w+)$", script.split("\ntry:", 1)[0], flags=re.M)  # before torch's
        problems += [f"{backend.describe()} float64={float64} limit={limit} dynamic={dynamic}: {p}"
                     for p in lint(script, "repro.py") + ([f"imports not sorted: {stdlib}"]
                                                          if stdlib != sorted(stdlib) else [])]
    assert not problems, "\n".join(problems[:20])


def test_the_tensorrt_only_script_is_lint_clean_and_holds_what_its_bug_needs(piece, tmp_path: Path) -> None:
    """repro_tensorrt.py in each form: lint-clean, and with only its bug's parts. A parser
    or builder bug builds and stops (no engine run, no comparison); a crash in the run is
    judged by its words (no comparison); a value bug compares (the float64 helper only with a
    float64 run); a child process only where the caller says the bug ends or hangs the process."""
    pytest.importorskip("onnxscript")
    from oracles.backends.onnx_export import export_onnx
    from oracles.backends.tensorrt_script import write_tensorrt_script
    from oracles.checks import flatten_outputs

    sliced, values = piece
    inputs = [values[n] for n in sliced.input_names]
    onnx = export_onnx(sliced.gm, inputs, tmp_path / "m" / "model.onnx")
    expected = flatten_outputs(sliced.gm(*inputs))
    parts = ("def run_tensorrt", "def compare_outputs_np", "def error_ratio_np", "def run_in_child",
             "def exception_text")
    forms = {  # name: (oracle, keywords, the parts it holds)
        "build": ("crash", {"build_time": True, "error_pattern": "Error Code 10", "child": False}, {"def exception_text"}),
        "run_crash": ("crash", {"error_pattern": "execute_async_v3 failed", "child": False}, {"def run_tensorrt", "def exception_text"}),
        "segfault": ("crash", {"error_pattern": "SIGSEGV", "child": True},
                     {"def run_tensorrt", "def exception_text", "def run_in_child"}),
        "hang": ("hang", {"child": True}, {"def run_tensorrt", "def run_in_child"}),
        "mismatch": ("mismatch", {"child": False}, {"def run_tensorrt", "def compare_outputs_np"}),
        "float64": ("mismatch", {"exact": [e.double() for e in expected], "child": False},
                    {"def run_tensorrt", "def compare_outputs_np", "def error_ratio_np"}),
    }
    for name, (oracle, keywords, held) in forms.items():
        script = write_tensorrt_script(tmp_path / name, onnx.path, inputs, expected, oracle, 1e-3, 1e-3, "lint",
                                       **keywords)
        text = script.read_text()
        assert not lint(text, str(script)), name
        assert "\n\n\n\n" not in text, name  # two blank lines between functions (pycodestyle's E303: a hunt)
        assert {part for part in parts if part in text} == held, name


@pytest.mark.parametrize("script", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "repros" / "suite").glob("*/*.py")))
def test_saved_scripts_are_lint_clean(script: str) -> None:
    assert not lint((ROOT / script).read_text(), script)


class _MissingPackageBackend(BUILTIN["eager"]):
    """A backend whose package is not installed anywhere: its compile imports it."""

    def script_part(self):
        from oracles.backends.base import ScriptPart
        return ScriptPart(requires=["trtmin_no_such_package"],
                          compile_body="import trtmin_no_such_package\n    return trtmin_no_such_package.compile(module)")


class _MissingPackageUnderDynamo(BUILTIN["eager"]):
    """The same, its import inside a torch.compile backend: Dynamo raises BackendCompilerFailed,
    whose inner_exception (not __cause__) is the ImportError."""

    def script_part(self):
        from oracles.backends.base import ScriptPart
        body = ("def backend(gm, example_inputs):\n        import trtmin_no_such_package\n        return gm\n"
                "    return torch.compile(module, backend=backend)")
        return ScriptPart(requires=["trtmin_no_such_package"], compile_body=body)


def write_cpu_script(piece, kind: str, backend, folder: Path) -> str:
    """repro.py of the piece for `kind` on `backend` at device cpu, written to `folder`."""
    sliced, values = piece
    return write_repro(folder, sliced.gm, {n: values[n] for n in sliced.input_names},
                       sliced.weights(values), VERDICTS[kind], backend)


def run_script(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_a_script_run_through_a_link_reads_its_tensors_beside_the_real_file(piece, tmp_path: Path) -> None:
    """A maintainer who links repro.py into a folder of their own (`ln -s`) got SKIPPED: the
    tensors file was looked for beside the link (the scripts trial). The eager control says
    FIXED through the link as in place."""
    script = write_cpu_script(piece, "mismatch", BUILTIN["eager"]("eager", {}), tmp_path)
    assert "tensors = torch.load(" in script  # the piece's (4, 8) input is in the file
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "repro.py").symlink_to(tmp_path / "repro.py")
    linked = run_script(tmp_path / "elsewhere")
    assert (linked.returncode, linked.stdout.split(":")[0]) == (0, "FIXED"), linked.stdout + linked.stderr[-2000:]


@pytest.mark.parametrize("kind", ["crash", "mismatch"])
def test_a_script_whose_backend_package_is_missing_says_skipped(piece, kind: str, tmp_path: Path) -> None:
    """Not CHANGED ("fails differently"): the import the backend needs fails, which is no news
    of the bug. The eager control needs no such package and prints FIXED. A crash form asks
    its error pattern first, so a bug that is itself an ImportError still reproduces."""
    script = write_cpu_script(piece, kind, _MissingPackageBackend("eager", {}), tmp_path)
    assert "REQUIRES = ['trtmin_no_such_package']" in script and not lint(script, "repro.py")
    plain, control = run_script(tmp_path), run_script(tmp_path, TRTMIN_BACKEND="eager")
    assert (plain.returncode, plain.stdout.strip()) == (
        2, "SKIPPED: ModuleNotFoundError: No module named 'trtmin_no_such_package'"), plain.stdout + plain.stderr
    if kind == "mismatch":  # the import under torch.compile: wrapped by Dynamo, still SKIPPED
        dynamo = tmp_path / "dynamo"
        dynamo.mkdir()
        write_cpu_script(piece, kind, _MissingPackageUnderDynamo("eager", {}), dynamo)
        wrapped = run_script(dynamo)
        assert (wrapped.returncode, wrapped.stdout.strip()) == (
            2, "SKIPPED: ModuleNotFoundError: No module named 'trtmin_no_such_package'"), wrapped.stdout + wrapped.stderr
    assert control.returncode == 0 and control.stdout.startswith("FIXED"), control.stdout + control.stderr
    if kind == "crash":  # the same script, for a bug whose failure is that import
        (tmp_path / "repro.py").write_text(re.sub(r"^ERROR_PATTERN = .*$", "ERROR_PATTERN = 'No module named'",
                                                  script, flags=re.M))
        again = run_script(tmp_path)
        assert again.returncode == 1 and again.stdout.startswith("REPRODUCED: ModuleNotFoundError"), again.stdout


@pytest.mark.parametrize("kind", ["mismatch", "crash_export"])
def test_an_onnx_script_whose_exporter_package_is_missing_says_skipped(piece, kind: str, tmp_path: Path) -> None:
    """torch.onnx.export imports onnxscript when called. A script for a bug of the exporter
    words its failure as trtmin's workers do (an OnnxExportError raised from it), and the
    ImportError is its cause; any other script sees the exporter's own error. Both: SKIPPED,
    not CHANGED."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    script = write_cpu_script(piece, kind, BUILTIN["onnxruntime"]("onnxruntime", {}), tmp_path)
    assert ("raise export_error(e) from e" in script) is (kind == "crash_export")
    hidden = tmp_path / "hide" / "onnxscript"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'onnxscript'\", name='onnxscript')\n")
    r = run_script(tmp_path, PYTHONPATH=str(tmp_path / "hide"))
    assert r.returncode == 2 and r.stdout.startswith("SKIPPED: "), r.stdout + r.stderr[-2000:]
    assert "No module named 'onnxscript'" in r.stdout, r.stdout


def test_keyword_arguments_are_written_as_pep8_writes_them() -> None:
    """fx writes `_to_copy(x, dtype = torch.uint8)`; repro.py and report.md's snippet write
    `dtype=torch.uint8` (pycodestyle E251), and each statement's own `=` stays spaced."""
    from minimize.emit.script import forward_source

    class Cast(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.full((2,), 3.0, dtype=torch.float64) + (x * 2).to(torch.uint8)

    x = torch.randn(2)
    program = Program(torch.export.export(Cast(), (x,)).run_decompositions({}), [x])
    source = forward_source(program.materialize(program.all_kept()).gm)
    assert "dtype=torch.uint8" in source and "dtype=torch.float64" in source, source
    assert not re.search(r"[(,] ?\w+ = ", source), source
    assert all(re.match(r"\s+(\w+ = |return )", ln) for ln in source.splitlines()[1:] if ln.strip()), source


def test_an_onnxruntime_short_script_opens_its_session_as_the_workers_do(piece, tmp_path: Path) -> None:
    """With --set session options the short ONNX Runtime form calls ort_session, the
    workers' own, with them (pasted in); without, a plain InferenceSession. Both run."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    settings = {"graph_optimization_level": "disable", "intra_op_num_threads": "1"}
    for options, folder in (({}, tmp_path / "plain"), (settings, tmp_path / "set")):
        folder.mkdir()
        script = write_cpu_script(piece, "mismatch", BUILTIN["onnxruntime"]("onnxruntime", options), folder)
        assert ("def ort_session" in script) is bool(options) and "def run_onnxruntime" not in script, script
        assert "'graph_optimization_level': 'disable', 'intra_op_num_threads': 1" in script or not options
        assert not lint(script, "repro.py")
        r = run_script(folder)
        assert r.returncode == 0 and r.stdout.startswith("FIXED"), r.stdout + r.stderr[-2000:]


def test_a_script_waits_for_the_gpu_only_where_the_backend_returns_gpu_tensors(piece) -> None:
    """At device cuda a compiled call may return before its kernels end: the script waits
    for them (torch.cuda.synchronize) so that a kernel's error is the compiler's. ONNX
    Runtime returns host arrays: nothing to wait for, no such line. Rendering needs no GPU."""
    sliced, values = piece
    for (name, waits), dynamic in itertools.product(
            (("inductor", True), ("torch_tensorrt", True), ("onnxruntime", False)), (False, True)):
        info = ReproInfo(title="sync", source_model="model.pt2", original_nodes=18, final_nodes=5, oracle_calls=3,
                         oracle="mismatch", verdict=VERDICTS["mismatch"], signature=Signature.of(VERDICTS["mismatch"]),
                         match=None, atol=1e-3, rtol=1e-3, device="cuda", needs_subprocess=False, timeout=5.0,
                         dynamic={sliced.input_names[0]: {0: (2, 64)}} if dynamic else {})  # the general forms
        script, _ = render_script(info, sliced.gm, {n: values[n] for n in sliced.input_names},
                                  sliced.weights(values),
                                  BUILTIN[name](name, {}))
        assert ("torch.cuda.synchronize()" in script) is waits, f"{name} dynamic={dynamic}:\n{script}"


def test_the_forward_reads_its_weights_where_it_uses_them(piece, tmp_path: Path) -> None:
    """fx writes a line per weight (`l1_weight = self.l1_weight`); repro.py's forward
    reads `self.l1_weight` where it uses it, as report.md's snippet does: the same values,
    a line less per weight. A keyword, a longer name and a string are not uses."""
    from minimize.emit.script import inline_attribute_reads

    forward = ("def forward(self, x):\n    w = self.w\n    y = torch.ops.aten.linear.default(x, w, self.b)\n"
               "    z = f(y, w=w, s='w', ww=x)\n    return (z,)")
    assert inline_attribute_reads(forward) == (
        "def forward(self, x):\n    y = torch.ops.aten.linear.default(x, self.w, self.b)\n"
        "    z = f(y, w=self.w, s='w', ww=x)\n    return (z,)")
    sliced, values = piece
    script = write_cpu_script(piece, "mismatch", BUILTIN["eager"]("eager", {}), tmp_path)
    forward_body = script.split("    def forward(", 1)[1].split("\n\n", 1)[0]
    assert "self.l1_weight" in forward_body and not re.search(r"^\s+\w+ = self\.\w+$", forward_body, re.M), script
    namespace: dict = {"__name__": "repro", "__file__": str(tmp_path / "repro.py")}
    exec(compile(script, "repro.py", "exec"), namespace)
    inputs = namespace["make_inputs"]()
    torch.testing.assert_close(namespace["Repro"]()(*inputs)[0], sliced.gm(*inputs)[0], rtol=0, atol=0)


def test_small_float_tensors_are_written_in_their_dtypes_digits() -> None:
    """A float32 literal as 0.1, not 0.10000000149011612: the fewest digits that are the
    same value in the tensor's dtype (float16, bfloat16, float8 too), so the script's
    weights are the program's exactly; in the nested lists of its shape (a 0-d tensor as its
    number), as a maintainer reads a mask."""
    from minimize.program.literals import tensor_literal

    inf = float("inf")  # the literals below name it, as repro.py does where it needs it
    for t, text in ((torch.tensor([0.1, -0.8438375, -0.0], dtype=torch.float32), "[0.1, -0.8438375, -0.0]"),
                    (torch.tensor([0.1, 65504.0], dtype=torch.float16), "[0.1, 65500.0]"),
                    (torch.tensor([[0.1], [inf]], dtype=torch.bfloat16), "[[0.1], [inf]]"),
                    (torch.tensor([0.1, 448.0]).to(torch.float8_e4m3fn), "[0.1, 450.0]"),
                    (torch.tensor(0.1, dtype=torch.float64), "0.1"),
                    (torch.tensor(80), "80"),
                    (torch.tensor([[[True, False]], [[False, True]]]), "[[[True, False]], [[False, True]]]"),
                    (torch.zeros(0, 3), None)):
        written = tensor_literal(t)
        assert written == (f"torch.tensor({text}, dtype={t.dtype})" if text else f"torch.empty((0, 3), dtype={t.dtype})"), \
            written
        back = eval(written)
        assert back.dtype == t.dtype and back.shape == t.shape and torch.equal(back.float(), t.float()), written


def test_a_control_byte_or_colour_in_the_error_leaves_the_script_runnable(piece, tmp_path: Path) -> None:
    """A compiler error holding a NUL made repro.py "source code cannot contain null bytes"
    (a SyntaxError before its first line ran), and its colours were written raw."""
    sliced, values = piece
    verdict = Verdict("crash", "RuntimeError", "bad\x00byte \x1b[31mred\x1b[0m \\x \"\"\" end")
    info = ReproInfo(title="control", source_model="model.pt2", original_nodes=18, final_nodes=3, oracle_calls=3,
                     oracle="crash", verdict=verdict, signature=Signature.of(verdict), match=None, atol=1e-3,
                     rtol=1e-3, device="cpu", needs_subprocess=False, timeout=5.0)
    script, _ = render_script(info, sliced.gm, {n: values[n] for n in sliced.input_names}, sliced.weights(values),
                              BUILTIN["inductor"]("inductor", {}))
    assert "\x00" not in script and "\x1b" not in script
    namespace: dict = {"__name__": "repro"}
    exec(compile(script, "repro.py", "exec"), namespace)  # noqa: S102 - it compiles and its definitions run
    assert "bad\\x00byte red \\x \"\"\" end" in namespace["__doc__"], namespace["__doc__"][:300]


def test_an_inductor_script_with_torch_compile_switched_off_says_skipped(piece, tmp_path: Path) -> None:
    """TORCH_COMPILE_DISABLE=1 or TORCHDYNAMO_DISABLE=1 makes torch.compile hand back eager
    PyTorch: the script said FIXED of a bug it never compiled. Now SKIPPED, and trtmin itself
    refuses to reduce or run the suite so (tests/test_bad_inputs.py)."""
    from oracles.backends import BUILTIN
    write_cpu_script(piece, "mismatch", BUILTIN["inductor"]("inductor", {}), tmp_path)
    plugin = tmp_path / "plugin"  # a plugin is a torch.compile backend: the same
    plugin.mkdir()
    backend = PluginBackend(f"{PLUGINS}:mismatch_mul_exp", {})
    write_cpu_script(piece, "mismatch", backend, plugin)
    for name, source in backend.script_part().files.items():  # plugin.py beside it, as trtmin writes it
        shutil.copyfile(source, plugin / name)
    for folder, variable in ((tmp_path, "TORCH_COMPILE_DISABLE"), (tmp_path, "TORCHDYNAMO_DISABLE"),
                             (plugin, "TORCHDYNAMO_DISABLE")):
        r = run_script(folder, **{variable: "1"})
        assert (r.returncode, r.stdout.strip()) == (
            2, "SKIPPED: TORCH_COMPILE_DISABLE or TORCHDYNAMO_DISABLE is 1: torch.compile is off"), r.stdout + r.stderr
    r = run_script(tmp_path, TORCH_COMPILE_DISABLE="0")  # torch's own reading: "1" alone switches it off
    assert r.returncode in (0, 1) and not r.stdout.startswith("SKIPPED"), r.stdout + r.stderr


def test_a_message_cut_short_keeps_its_ellipsis_in_the_docstring_and_the_report(piece) -> None:
    """A TensorRT message of 300+ characters is cut with "...": the report's Diagnosis took
    the dots off with the full stop ("... at /_."), and repro.py's docstring added one
    ("/_...."). Both end it once."""
    from minimize.emit.report import _diagnosis_lines

    sliced, values = piece
    long = Verdict("crash", "TensorRTError", "In replicaSymbolicDims at /_src/optimizer/api/network.cpp:306 " * 10)
    cut = long.describe()
    assert cut.endswith("..."), cut
    info = ReproInfo(title="cut", source_model="model.pt2", original_nodes=18, final_nodes=3, oracle_calls=3,
                     oracle="crash", verdict=long, signature=Signature.of(long), match=None, atol=1e-3, rtol=1e-3,
                     device="cpu", needs_subprocess=False, timeout=5.0)
    script, _ = render_script(info, sliced.gm, {n: values[n] for n in sliced.input_names}, sliced.weights(values),
                              BUILTIN["inductor"]("inductor", {}))
    docstring = " ".join(script.split('"""')[1].split())
    assert f"{' '.join(cut.split())} trtmin" in docstring and "...." not in docstring, docstring
    said = _diagnosis_lines({"original_verdict": cut, "final_verdict": "CRASH: another", "notes": {}})
    assert f"- The original program failed as {cut}\n" in said, said


def test_an_emitted_script_names_its_backend_only_where_the_reduction_ran_what_it_runs(piece, tmp_path: Path) -> None:
    """--emit torch_tensorrt beside a TensorRT parser bug: the script's title said
    "torch_tensorrt parser failure", a bug that backend never showed (a robotics user's hunt).
    Its title names no backend then, and a crash script says whose words its pattern holds;
    where the reduction ran what the script runs (XNNPACK's delegate took none of the ops:
    the portable kernels'; the backend itself), the title names it."""
    from minimize.emit.outputs import write_extra_script
    from tests.helpers import repro_info

    sliced, values = piece
    crash = Verdict("crash", "TensorRTError", "the ONNX parser failed: In node 0 with name: node_mish")
    info = dataclasses.replace(repro_info(crash), title="tensorrt (TensorRT-RTX 1.4.0.76) parser failure: mish.default")
    text = write_extra_script(tmp_path, info, sliced, values, "torch_tensorrt", {},
                              reduced_with="tensorrt (TensorRT-RTX 1.4.0.76)").read_text()
    head = " ".join(text.split('"""')[1].split())
    assert head.startswith("parser failure: mish.default [Emitted for torch_tensorrt by trtmin; the reduction was "
                           "checked on cpu with tensorrt (TensorRT-RTX 1.4.0.76). Its ERROR_PATTERN holds tensorrt "
                           "(TensorRT-RTX 1.4.0.76)'s words: where torch_tensorrt fails in words of its own, it says "
                           "CHANGED with them. It runs the program on cuda"), head
    mismatch = Verdict("mismatch", output=0, max_abs=1.0)
    info = dataclasses.replace(repro_info(mismatch), title="executorch:xnnpack mismatch on cpu: linear.default")
    for ran_as, title in ((None, "mismatch on cpu: linear.default"),
                          ("executorch:portable", "executorch:portable mismatch on cpu: linear.default")):
        (tmp_path / str(ran_as)).mkdir()
        text = write_extra_script(tmp_path / str(ran_as), info, sliced, values, "executorch:portable", {},
                                  reduced_with="executorch:xnnpack", ran_as=ran_as).read_text()
        head = " ".join(text.split('"""')[1].split())
        assert head.startswith(title + " [Emitted for executorch:portable") and "ERROR_PATTERN" not in head, head
    # --emit tensorrt beside --backend tensorrt: the torch-free script of the same backend keeps its
    # title, and its pattern is its own words (a review)
    (tmp_path / "same").mkdir()
    info = dataclasses.replace(repro_info(crash), title="tensorrt (TensorRT-RTX 1.4.0.76) parser failure: mish.default")
    script = write_extra_script(tmp_path / "same", info, sliced, values, "tensorrt", {},
                                reduced_with="tensorrt (TensorRT-RTX 1.4.0.76)", ran_as="tensorrt (TensorRT-RTX 1.4.0.76)")
    head = " ".join(script.read_text().split('"""')[1].split())
    assert head.startswith("tensorrt (TensorRT-RTX 1.4.0.76) parser failure: mish.default") and "ERROR_PATTERN" not in head
    assert "checked on cpu with this backend." in head, head
    # --emit executorch:xnnpack beside --backend executorch:portable, its delegate taking none of the ops:
    # the script runs the portable kernels the reduction ran, and says so (a hunt's left item)
    from minimize.reduce import _ran_as
    took_none = {"emitted_undelegated": {"executorch:xnnpack": ["aten.linear.default"]}}
    assert _ran_as("executorch:xnnpack", "executorch:portable", "executorch:portable", took_none) == "executorch:portable"
    assert _ran_as("executorch:xnnpack", "executorch:portable", "executorch:portable", {}) is None
    assert _ran_as("executorch:portable", "executorch:xnnpack", "executorch:xnnpack",
                   {"undelegated": "executorch:portable"}) == "executorch:portable"
    assert _ran_as("inductor", "executorch:portable", "executorch:portable", took_none) is None
    (tmp_path / "portable").mkdir()
    info = dataclasses.replace(repro_info(crash), title="executorch:portable crash on cpu: mish.default")
    text = write_extra_script(tmp_path / "portable", info, sliced, values, "executorch:xnnpack", {},
                              reduced_with="executorch:portable", ran_as="executorch:portable").read_text()
    head = " ".join(text.split('"""')[1].split())
    assert head.startswith("executorch:portable crash on cpu: mish.default [Emitted for executorch:xnnpack by trtmin; "
                           "the reduction was checked on cpu with executorch:portable, whose kernels this script runs: "
                           "executorch:xnnpack's delegate takes none of its ops.") and "ERROR_PATTERN" not in head, head
