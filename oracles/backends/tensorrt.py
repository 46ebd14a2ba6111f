"""TensorRT alone, `--backend tensorrt`: the candidate exported to ONNX with torch.onnx
(oracles/backends/onnx_export.py), parsed by `trt.OnnxParser`, built into an engine,
and run on device buffers (torch CUDA tensors here).

`build_engine` is the one piece of code that turns an ONNX file into an engine: the
backend calls it, and both repro scripts carry its source, so what a script builds is
what trtmin checked. The TensorRT-only script (`repro_tensorrt.py`: tensorrt + numpy +
cuda-python, no torch) is written by oracles/backends/tensorrt_script.py.

Settings (`--set`):
  fp16, bf16, int8, fp8, tf32, strict_nans=true|false   set or clear that BuilderFlag
  flags=NAME,NAME        more BuilderFlag names to set (as spelled in trt.BuilderFlag)
  strongly_typed=true    NetworkDefinitionCreationFlag.STRONGLY_TYPED (TensorRT >= 9)
  optimization_level=N   IBuilderConfig.builder_optimization_level (0-5)
  workspace=BYTES        memory pool limit of MemoryPoolType.WORKSPACE
  opset=N                ONNX opset of the export
TensorRT 11 removed BuilderFlag.FP16/INT8/BF16 (networks are always strongly typed);
asking for a flag the installed TensorRT lacks fails the build with that message.

Written against the TensorRT 10/11 Python API (named-tensor I/O: num_io_tensors,
get_tensor_name/mode/dtype, set_input_shape, set_tensor_address, execute_async_v3), which
TensorRT-RTX shares under the module name `tensorrt_rtx`: `import_tensorrt` takes NVIDIA's
`tensorrt` where it is installed, else `tensorrt_rtx`, and `describe()` names the one that ran.

Without a GPU the parser and builder still run: a candidate is parsed and built into a plan,
and not run (`NotRunHere`), so `crash` and `hang` judge parser and builder failures, and the
value oracles are refused in one line (`oracle_problem`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart, SnippetCall, args_tuple, scratch_folder
from oracles.backends.onnx_export import (OnnxExportError, export_error, export_onnx, export_statement,
                                          naming_the_node, script_source, upstream_onnx)
from oracles.backend_setup import (FLAG_SETTINGS, JUDGED_WITHOUT_GPU, check_packages, no_gpu_for_engine,
                                   parse_trt_settings, tensorrt_module_name)
from oracles.errors import NotRunHere, TrtminError
from oracles.script_checks import message_pattern
from oracles.verdict import Verdict, normalize_message

ONNX_NAME = "model.onnx"
SNIPPET_ONNX = "repro.onnx"  # report.md's snippet writes its export here, in the folder it runs in
# A crash whose message starts so happened in the parser or the builder: it needs no GPU.
BUILD_FAILURES = ("the ONNX parser failed", "building the engine failed")

# ---- shared with the scripts (pasted in by source) -------------------------------------


class TensorRTError(RuntimeError):
    """TensorRT refused the model: parsing, building, or running the engine failed."""


@contextlib.contextmanager
def native_stderr_off() -> Iterator[None]:
    """File descriptor 2 to /dev/null while TensorRT builds in trtmin's own process (the
    set-up check's one-layer networks): a native line ("Internal Error: MyelinCheckException
    ...") came before trtmin's one-line refusal of the setting (a TensorRT user's hunt)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorrt():
    """NVIDIA's TensorRT (module tensorrt) where it is installed, else TensorRT-RTX (module
    tensorrt_rtx, the same Python API)."""
    try:
        import tensorrt as trt
    except ImportError:
        import tensorrt_rtx as trt
    return trt


# import_tensorrt's body as a short script writes it, in its compile_backend
IMPORT_TENSORRT_LINES = ("try:", "    import tensorrt as trt", "except ImportError:  # TensorRT-RTX: the same Python API",
                         "    import tensorrt_rtx as trt")


def tensorrt_name(trt):
    """"TensorRT 10.13.0" or "TensorRT-RTX 1.4.0.76": which TensorRT a module is."""
    return ("TensorRT-RTX " if trt.__name__.startswith("tensorrt_rtx") else "TensorRT ") + str(trt.__version__)


def tensorrt_said(parser_errors, logged):
    """TensorRT's words as one line: each parser error's first line and every "Error Code"
    line of the log, once, not the node dumps; a logged error with no such line, by its
    first line. catchCudaError's line ("CUDA failed under the builder", which every build
    logs where there is no GPU) and the parser's node dumps only where nothing else was said;
    no "In node -1 with name:  and operator:  (parseGraph): ", said of a graph-wide error
    twice in one line, whose 300 characters then held no cause (a maintainer's hunt)."""
    lines = []
    for text, first in [(t, True) for t in parser_errors] + [(t, False) for t in logged]:
        text = str(text).replace("In node -1 with name:  and operator:  (parseGraph): ", "")  # no node: no news
        rows = [row.strip() for row in text.splitlines() if row.strip()]
        coded = [row for row in rows if "Error Code" in row]
        for row in (rows[:1] if first else []) + (coded if coded else rows[:1]):
            if row not in lines:
                lines.append(row)
    noise = ("catchCudaError", "ModelImporter.cpp")  # the parser's node dumps say where, the others said what
    shown = [row for row in lines if not any(n in row for n in noise)] or lines
    return " | ".join(shown) or "no message"


def said_pattern(message: str) -> str:
    """ERROR_PATTERN of repro.py's short form of a parser or builder failure, which quotes
    all TensorRT said (the parser's errors, then every logged error) where trtmin's words
    keep some lines of it (tensorrt_said): the same prefix, then the lines trtmin kept, in
    their order, with anything between."""
    prefix, _, said = normalize_message(message).partition(": ")
    rows = [message_pattern(row) for row in said.split(" | ")]
    # each row's earliest match after the one before, held: a lookahead, then its text by
    # backreference (an atomic group in any Python), so that a changed error fails at once, not
    # after backtracking through every way a row's counters could match a long log
    return message_pattern(prefix + ":") + "".join(rf"(?=([\s\S]*?{row}))\{i}" for i, row in enumerate(rows, 1))


def build_plan(trt, onnx_path, settings):
    """ONNX file -> {"plan", "log"}: parse and build a serialized engine, which needs no GPU.
    Raises TensorRTError with TensorRT's words. settings: builder_flags {NAME: bool},
    strongly_typed, optimization_level, workspace (a script holds the lines of those it sets)."""

    class Log(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.errors = []

        def log(self, severity, msg):
            if severity in (trt.ILogger.Severity.INTERNAL_ERROR, trt.ILogger.Severity.ERROR):
                self.errors.append(str(msg))

    log = Log()
    builder = trt.Builder(log)
    flags = 0
    if settings.get("strongly_typed"):  # [strongly_typed]
        flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)  # [strongly_typed]
        if flag is None:  # [strongly_typed]
            raise TensorRTError(f"{tensorrt_name(trt)} has no NetworkDefinitionCreationFlag.STRONGLY_TYPED")  # [strongly_typed]
        flags |= 1 << int(flag)  # [strongly_typed]
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, log)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [parser.get_error(i) for i in range(parser.num_errors)]
        raise TensorRTError("the ONNX parser failed: " + tensorrt_said(errors, log.errors))
    config = builder.create_builder_config()
    for name, on in sorted(settings.get("builder_flags", {}).items()):  # [builder_flags]
        flag = getattr(trt.BuilderFlag, name, None)  # [builder_flags]
        if flag is None:  # [builder_flags]
            raise TensorRTError(f"{tensorrt_name(trt)} has no BuilderFlag.{name}")  # [builder_flags]
        (config.set_flag if on else config.clear_flag)(flag)  # [builder_flags]
    if settings.get("optimization_level") is not None:  # [optimization_level]
        config.builder_optimization_level = int(settings["optimization_level"])  # [optimization_level]
    if settings.get("workspace") is not None:  # [workspace]
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(settings["workspace"]))  # [workspace]
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise TensorRTError("building the engine failed: " + tensorrt_said([], log.errors))
    return {"plan": plan, "log": log}


def load_plan(trt, built):
    """build_plan's result -> {"engine", "runtime", "log"}: the engine loaded on the GPU
    (TensorRT-RTX compiles its kernels here). Raises TensorRTError with TensorRT's words."""
    log = built["log"]
    runtime = trt.Runtime(log)
    engine = runtime.deserialize_cuda_engine(built["plan"])
    if engine is None:
        raise TensorRTError("deserializing the engine failed: " + " | ".join(log.errors or ["no message"]))
    return {"engine": engine, "runtime": runtime, "log": log}


def engine_io(trt, engine):
    """[(name, is_input, dtype name)] of an engine's I/O tensors, in engine order."""
    io = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        io.append((name, is_input, engine.get_tensor_dtype(name).name))
    return io


# ---- the backend: buffers are torch CUDA tensors ---------------------------------------

TRT_TO_TORCH = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "INT8": torch.int8,
                "INT32": torch.int32, "INT64": torch.int64, "BOOL": torch.bool, "UINT8": torch.uint8,
                "FP8": torch.float8_e4m3fn}


def run_engine_torch(trt, built, feeds, output_names):
    """Run a built engine on torch tensors ({ONNX input name: tensor}); returns the
    outputs named output_names, as CUDA tensors."""
    engine, log = built["engine"], built["log"]
    context = engine.create_execution_context()
    if context is None:
        raise TensorRTError("creating an execution context failed: " + " | ".join(log.errors or ["no message"]))
    keep, outputs = [], {}
    io = engine_io(trt, engine)
    for name, is_input, dtype_name in io:
        if not is_input:
            continue
        if name not in feeds:
            raise TensorRTError(f"the engine has an input {name!r} that the ONNX model does not list")
        dtype = TRT_TO_TORCH.get(dtype_name)
        if dtype is None:
            raise TensorRTError(f"input {name!r} has TensorRT type {dtype_name}, which this runner cannot feed")
        value = feeds[name]
        if engine.is_shape_inference_io(name):  # shape tensors live in host memory
            tensor = value.to(device="cpu", dtype=dtype).contiguous()
        else:
            tensor = value.to(device="cuda", dtype=dtype).contiguous()
        buffer = tensor if tensor.numel() else torch.empty(1, dtype=dtype, device=tensor.device)  # needs an address
        context.set_input_shape(name, tuple(tensor.shape))
        context.set_tensor_address(name, buffer.data_ptr())
        keep.append(buffer)
    for name, is_input, dtype_name in io:
        if is_input:
            continue
        dtype = TRT_TO_TORCH.get(dtype_name)
        if dtype is None:
            raise TensorRTError(f"output {name!r} has TensorRT type {dtype_name}, which this runner cannot read")
        shape = tuple(context.get_tensor_shape(name))
        if any(d < 0 for d in shape):
            raise TensorRTError(f"output {name!r} has a data-dependent shape {shape}; this runner has no output "
                                "allocator")
        out = torch.empty(shape, dtype=dtype, device="cuda")
        buffer = out if out.numel() else torch.empty(1, dtype=dtype, device="cuda")
        context.set_tensor_address(name, buffer.data_ptr())
        keep.append(buffer)
        outputs[name] = out
    stream = torch.cuda.current_stream()
    ok = context.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    if not ok:
        raise TensorRTError("execute_async_v3 failed: " + " | ".join(log.errors or ["no message"]))
    missing = [n for n in output_names if n not in outputs]
    if missing:
        raise TensorRTError(f"the engine has no output {missing[0]!r} of the ONNX model (outputs: {list(outputs)})")
    return [outputs[n] for n in output_names]


def check_tensorrt(spec: str) -> None:
    check_packages(spec)
    if tensorrt_module_name() != "tensorrt_rtx" and not torch.cuda.is_available():  # NVIDIA's builder needs a GPU to start
        raise TrtminError(f"backend {spec} ({installed_tensorrt_name()}) needs an NVIDIA GPU, and torch "
                          f"{torch.__version__} sees none here; run on a machine with a CUDA GPU, or install "
                          "tensorrt-rtx, whose parser and builder run without one")



def one_layer_networks(folder: Path) -> list[Path]:
    """Two ONNX files of one layer each, y = relu(x) and y = relu(x @ w) (TensorRT-RTX builds
    a MatMul through Myelin, which some settings need a GPU for): what any model holds."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])
    graphs = {"relu": ([helper.make_node("Relu", ["x"], ["y"])], []),
              "matmul": ([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], [w])}
    paths = []
    for name, (nodes, weights) in graphs.items():
        model = helper.make_model(helper.make_graph(nodes, name, [x], [y], weights),
                                  opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(model, str(folder / f"{name}.onnx"))
        paths.append(folder / f"{name}.onnx")
    return paths


# words of a TensorRT error that may be the machine's want of a GPU: CUDA (a setting that
# JIT-compiles, a build that profiles the device), a layer no runner implements (TensorRT-RTX
# picks runners for the device it builds for: NonZero's "has no runners" without one, a hunt)
NO_GPU_WORDS = ("cuda", "no runners")


def may_be_no_gpu(error: str) -> bool:
    """Whether a TensorRT error may be this machine's want of a GPU, not a bug: it says one
    of NO_GPU_WORDS, and no GPU is visible."""
    return any(word in error.lower() for word in NO_GPU_WORDS) and not torch.cuda.is_available()


def build_failure(verdict: Verdict | None) -> bool:
    """Whether the bug is a crash of the parser or the builder (no GPU needed to see it)."""
    return verdict is not None and verdict.kind == "crash" and verdict.message.startswith(BUILD_FAILURES)


def died_building(verdict: Verdict | None) -> bool:
    """Whether the bug killed the process inside build_plan (TensorRT's builder segfaulting):
    after the export, before any engine ran. Its report's snippet builds and stops there."""
    return (verdict is not None and verdict.kind == "crash" and verdict.exc_type == "Signal"
            and f" in {build_plan.__name__} " in f"{verdict.message} ")


class TensorRTBackend(Backend):
    name = "tensorrt"
    devices = ("cpu", "cuda")  # the ONNX export is device-free; buffers are copied to the GPU

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        self.options = parse_trt_settings(self.settings, spec)
        self._check_flag_names()

    def _check_flag_names(self) -> None:
        """A --set flags=NAME that this TensorRT has no BuilderFlag for, refused before any
        call: a model that fails in the parser never reaches the flags, and would be reduced
        with it. Not where TensorRT is not installed (writing a script needs none)."""
        lacking = [n for n in self.options.get("builder_flags", {}) if n not in FLAG_SETTINGS.values()]
        if not lacking or tensorrt_module_name() is None:
            return
        trt = import_tensorrt()
        unknown = [n for n in lacking if not hasattr(trt.BuilderFlag, n)]
        if unknown:
            raise TrtminError(f"--set flags: {tensorrt_name(trt)} has no BuilderFlag.{unknown[0]}; its flags: "
                              f"{', '.join(sorted(trt.BuilderFlag.__members__))}")

    @property
    def build_settings(self) -> dict[str, Any]:
        return {k: v for k, v in self.options.items() if k != "opset"}

    @staticmethod
    def check_available(spec: str = "tensorrt") -> None:
        check_tensorrt(spec)

    keeps_dynamic = False  # build_engine makes no optimization profile: static shapes

    def oracle_problem(self, oracle: str) -> str | None:
        if torch.cuda.is_available() or oracle in JUDGED_WITHOUT_GPU:
            return None
        return no_gpu_for_engine(oracle, f"torch {torch.__version__} sees no GPU here")

    def setup_problem(self, message: str) -> str | None:
        """Also a --set that fails a one-layer network as it failed the model: TensorRT
        refuses the setting itself (TensorRT-RTX's FP16 flag: its networks are strongly
        typed), or this machine cannot build with it (REFIT without a GPU),
        whatever the model. Asked only when the original fails, with settings given."""
        problem = super().setup_problem(message)
        if problem or not self.build_settings:
            return problem
        trt = import_tensorrt()
        failed = normalize_message(message)
        with scratch_folder("trtmin-trt-") as tmp:
            networks = one_layer_networks(Path(tmp))
            for key, value in self.settings.items():
                alone = {k: v for k, v in parse_trt_settings({key: value}, self.spec).items() if k != "opset"}
                for network in networks if alone else []:
                    try:
                        with native_stderr_off():  # Myelin prints its own line: the refusal below says it
                            build_plan(trt, network, alone)
                    except TensorRTError as e:
                        if normalize_message(str(e)) != failed:
                            continue
                        words = str(e).split(": ", 1)[-1] if str(e).startswith(BUILD_FAILURES) else str(e)
                        if may_be_no_gpu(words):  # REFIT: a JIT needing a GPU
                            return (f"--set {key}={value}: {tensorrt_name(trt)} fails a one-layer network with it the "
                                    f"same way here, and its error names CUDA ({words[:240]}): this machine has no "
                                    "GPU, which the setting may need; try it on a GPU, or drop it here")
                        return (f"--set {key}={value}: {tensorrt_name(trt)} fails a one-layer network with it the "
                                f"same way, so the setting fails, not your model ({words[:240]}); drop it "
                                "or change it")
        return None

    def note(self, verdict: Verdict | None = None) -> str | None:
        if torch.cuda.is_available():
            return None
        said = f"no GPU here: {installed_tensorrt_name()} parses and builds each candidate and does not run it; "
        if verdict is None:
            return said + ("only parser and builder failures are judged, and one that names CUDA (or a layer with no "
                           "runners) may be the GPU's absence: confirm it on a GPU")
        return said + (self.doubt(verdict) or "only its parser and builder failures were judged")

    def doubt(self, verdict: Verdict | None) -> str | None:
        if verdict is None or verdict.exc_type != TensorRTError.__name__ or not may_be_no_gpu(verdict.message):
            return None  # TensorRT's own words only (a build that profiles the device: an int8 cast's), not torch.onnx's
        what = "names CUDA" if "cuda" in verdict.message.lower() else "finds no runners for a layer"
        return f"this failure {what}, and may be the GPU's absence, not a bug: confirm it on a GPU before filing it"

    def died_after_export(self, verdict: Verdict | None) -> bool:
        return died_building(verdict)

    def exporter_control(self) -> Backend:
        from oracles.backends.onnxruntime import OnnxReference
        return OnnxReference(self.options.get("opset"))

    def upstream_files(self, folder: Path, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> dict[str, str]:
        return upstream_onnx(folder, gm, example_inputs, self.options.get("opset"),
                             {k: v for k, v in self.settings.items() if k != "opset"})

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        trt = import_tensorrt()
        with scratch_folder("trtmin-trt-") as tmp:
            export = export_onnx(gm, example_inputs, Path(tmp) / ONNX_NAME, opset=self.options.get("opset"))
            with naming_the_node(export):  # the parser names an ONNX node: which of ours, for localization
                plan = build_plan(trt, export.path, self.build_settings)
        if not torch.cuda.is_available():
            raise NotRunHere(f"{tensorrt_name(trt)} parsed and built the engine; it was not run (no GPU here)")
        built = load_plan(trt, plan)

        def run(*args: Any) -> list[torch.Tensor]:
            feeds = {name: (v if isinstance(v, torch.Tensor) else torch.tensor(v)) for name, v in export.feeds(args).items()}
            return run_engine_torch(trt, built, feeds, export.output_names)

        return run

    def snippet_call(self, args: Sequence[str], verdict: Any = None) -> SnippetCall | None:
        """The export to ONNX, then the parse and the build as build_plan makes them. For a
        bug the parser or the builder shows, the failing step is last, raising (TensorRT's
        logger having printed its words; no assert, which python -O drops); for any other,
        the engine then runs into `got` (contiguous CUDA buffers of eager's shapes and dtypes:
        static shapes), fed the tensor arguments on CUDA, as run_engine_torch feeds it (the
        export folds the others into the ONNX model)."""
        if verdict is None:
            return None
        opset = f", opset_version={self.options['opset']}" if self.options.get("opset") else ""
        typed = self._network_flags()
        if verdict.kind == "crash" and verdict.exc_type == "OnnxExportError":  # TensorRT never sees the model
            return SnippetCall(module=True, last=f"torch.onnx.export(f, {args_tuple(args)}, {SNIPPET_ONNX!r}, "
                                                 f"dynamo=True{opset})")
        at_build = build_failure(verdict) or died_building(verdict)
        setup = [f"torch.onnx.export(f, {args_tuple(args)}, {SNIPPET_ONNX!r}, dynamo=True{opset})"]
        if not at_build:  # read the inputs before the names below are taken (an input called context)
            setup.append(f"feed = [t.cuda().contiguous() for t in {args_tuple(args)} if isinstance(t, torch.Tensor)]"
                         "  # the engine's inputs")
        setup += ["logger = trt.Logger(trt.Logger.ERROR)", "builder = trt.Builder(logger)",
                  f"network = builder.create_network({typed})", "parser = trt.OnnxParser(network, logger)"]
        parse = f"if not parser.parse_from_file({SNIPPET_ONNX!r}):  # not an assert: python -O drops those\n" \
                "    raise RuntimeError(parser.get_error(0))"
        imports = (f"import {tensorrt_module_name() or 'tensorrt'} as trt",)
        if at_build and verdict.message.startswith(BUILD_FAILURES[0]):
            return SnippetCall(imports=imports, module=True, setup=tuple(setup), last=parse)
        setup += [parse, *self._config_lines()]
        if at_build:
            return SnippetCall(imports=imports, module=True, setup=tuple(setup),
                               last="if not builder.build_serialized_network(network, config):\n"
                                    '    raise RuntimeError("building the engine failed")')
        setup += ["runtime = trt.Runtime(logger)",
                  "engine = runtime.deserialize_cuda_engine(builder.build_serialized_network(network, config))",
                  "context = engine.create_execution_context()",
                  'got = [torch.empty(o.shape, dtype=o.dtype, device="cuda") for o in out]  # the engine writes here',
                  "for i, t in enumerate(feed + got):  # the engine's inputs, then its outputs",
                  "    context.set_tensor_address(engine.get_tensor_name(i), t.data_ptr())"]
        return SnippetCall(imports=imports, module=True, setup=tuple(setup),
                           last="context.execute_async_v3(torch.cuda.current_stream().cuda_stream)")

    def _network_flags(self) -> str:
        """create_network's argument, as the snippet and the short script write it."""
        typed = self.options.get("strongly_typed")
        return "1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)" if typed else ""

    def _config_lines(self) -> list[str]:
        """The builder config with the --set options, in the statements build_plan runs."""
        return ["config = builder.create_builder_config()"] + [
            f"config.{'set' if on else 'clear'}_flag(trt.BuilderFlag.{name})"
            for name, on in sorted(self.options.get("builder_flags", {}).items())] + (
            [f"config.builder_optimization_level = {int(self.options['optimization_level'])}"]
            if self.options.get("optimization_level") is not None else []) + (
            [f"config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, {int(self.options['workspace'])})"]
            if self.options.get("workspace") is not None else [])

    def script_part(self) -> ScriptPart:
        return self.script_part_for(None)

    def _short_script_part(self, verdict: Verdict) -> ScriptPart | None:
        """repro.py's compile for a static program, in a few lines, where its bug allows:
        * a parser or builder failure: export, then build_plan's steps written out, raising
          with all TensorRT logged (said_pattern finds trtmin's words in it); a build that
          passes is the bug gone, with or without a GPU;
        * a mismatch or NaN: export, parse, build and run the engine on CUDA tensors by
          tensor name, as the snippet does, without the general runner's shape tensors and
          data-dependent shapes (a static ONNX graph has neither); SKIPPED at once without
          a GPU (a reduction on --device cpu runs its eager half anywhere).
        None for any other bug (a crash in the engine's run, OOM, hang): the general form."""
        from oracles.backends.torch_tensorrt import _indent_body

        export = export_statement(self.options.get("opset"))
        folder = "with tempfile.TemporaryDirectory() as folder:  # TensorRT reads the file (and its weights) now"
        if build_failure(verdict):  # build_plan's steps, written out: all TensorRT says goes in the error
            config, *settings = self._config_lines()
            body = "\n".join([
                "try:",
                "    import tempfile, tensorrt as trt",
                *IMPORT_TENSORRT_LINES[2:],
                'if not torch.cuda.is_available() and not trt.__name__.startswith("tensorrt_rtx"):  '
                '# only TensorRT-RTX builds without one',
                '    sys.exit(print(f"SKIPPED: {trt.__name__} {trt.__version__} needs a CUDA GPU, and none is visible here") or 2)',
                "",
                "class Log(trt.ILogger):  # TensorRT's error messages, for the verdict",
                "    errors = []",
                "",
                "    def log(self, severity, msg):",
                "        self.errors += [msg] if severity in (trt.ILogger.Severity.INTERNAL_ERROR, trt.ILogger.Severity.ERROR) else []",
                "",
                "def fail(failed, first=()):  # raise all TensorRT said, in one line: the parser's errors, then the log's",
                '    raise type("TensorRTError", (RuntimeError,), {})(f"{failed}: " + (" | ".join([*map(str, first), '
                '*log.errors]) or "no message").replace("\\n", " | "))',
                "builder = trt.Builder(log := Log())",
                f"parser = trt.OnnxParser(network := builder.create_network({self._network_flags()}), log)",
                folder, "    " + export,
                '    if not parser.parse_from_file(folder + "/model.onnx"):',
                '        fail("the ONNX parser failed", map(parser.get_error, range(parser.num_errors)))',
                *([config, *settings] if settings else []),
                "if builder.build_serialized_network(network, {}) is None:  # no GPU needed".format(
                    "config" if settings else config.partition(" = ")[2]),
                '    fail("building the engine failed")',
                'sys.exit(print(f"FIXED: {trt.__name__} {trt.__version__} parsed and built the engine without the error") '
                'or 0)'])
            return ScriptPart(requires=["tensorrt|tensorrt_rtx", "onnxscript", "onnx"],
                              compile_body=_indent_body(body), error_pattern=said_pattern(verdict.message),
                              raises_own_error=True, exits_when_fixed=True)
        if verdict is None or verdict.kind not in ("mismatch", "nan"):
            return None
        config, *settings = self._config_lines()
        body = "\n".join([
            "if not torch.cuda.is_available():  # the engine runs on a CUDA GPU (DEVICE may be the CPU's)",
            '    sys.exit(print("SKIPPED: running the TensorRT engine needs a CUDA GPU, and none is visible here") or 2)',
            "import inspect, tempfile",
            *IMPORT_TENSORRT_LINES,
            "builder = trt.Builder(logger := trt.Logger(trt.Logger.ERROR))",
            f"parser = trt.OnnxParser(network := builder.create_network({self._network_flags()}), logger)",
            folder, "    onnx_program = " + export,
            '    if not parser.parse_from_file(folder + "/model.onnx"):  # not an assert: python -O drops those',
            "        raise RuntimeError(parser.get_error(0))",
            *([config, *settings] if settings else []),
            "plan = builder.build_serialized_network(network, {})".format(
                "config" if settings else config.partition(" = ")[2]),
            'assert plan, "building the engine failed"',
            "engine = trt.Runtime(logger).deserialize_cuda_engine(plan)",
            "context, params = engine.create_execution_context(), list(inspect.signature(module.forward).parameters)",
            f"dtypes = {{n: getattr(torch, {script_dtype_names()}.get(t := engine.get_tensor_dtype(n).name, t.lower()))",
            "          for n in map(engine.get_tensor_name, range(engine.num_io_tensors))}  # the ONNX inputs bear their names",
            "",
            "def run(*args):  # inputs on the GPU in the engine's dtypes; outputs into buffers of its shapes",
            '    buffers = {n: args[params.index(n)].to("cuda", dtype).contiguous() if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT',
            '               else torch.empty(tuple(engine.get_tensor_shape(n)), dtype=dtype, device="cuda") for n, dtype in dtypes.items()}',
            '    held = [t if t.numel() else torch.empty(1, device="cuda") for t in buffers.values()]  # an address each',
            "    for n, t in zip(buffers, held):",
            "        context.set_tensor_address(n, t.data_ptr())",
            "    if not context.execute_async_v3(torch.cuda.current_stream().cuda_stream):",
            '        raise RuntimeError("execute_async_v3 failed")',
            "    return [buffers[v.name] for v in onnx_program.model.graph.outputs]",
            "return run"])
        return ScriptPart(requires=["tensorrt|tensorrt_rtx", "onnxscript", "onnx"], compile_body=_indent_body(body))

    def script_part_for(self, verdict: Verdict | None, dynamic: bool = True,
                        io_dtypes: frozenset[Any] | None = None) -> ScriptPart:
        """For repro.py (torch + TensorRT or TensorRT-RTX): the same export, build and runner.
        Without a GPU the script still parses and builds: a bug in the parser or builder
        (`verdict`) is judged there, any other says SKIPPED."""
        if not dynamic and verdict is not None:
            short = self._short_script_part(verdict)
            if short is not None:
                return short
        at_build = build_failure(verdict)
        no_gpu = ('print(f"FIXED: {tensorrt_name(trt)} parsed and built the engine without the error (not run: no '
                  'CUDA GPU here)")\n    sys.exit(0)' if at_build else
                  'print(f"SKIPPED: {tensorrt_name(trt)} built the engine; running it needs a CUDA GPU, and none is '
                  'visible here")\n    sys.exit(2)')  # placed after the dedent: its indent is its own
        body = textwrap.dedent(f"""\
            import atexit, shutil, tempfile
            trt = import_tensorrt()
            if not torch.cuda.is_available() and not trt.__name__.startswith("tensorrt_rtx"):  # only TensorRT-RTX builds without one
                print(f"SKIPPED: {{tensorrt_name(trt)}} needs a CUDA GPU, and none is visible here")
                sys.exit(2)
            gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
            folder = tempfile.mkdtemp(prefix="repro-trt-")
            atexit.register(shutil.rmtree, folder, True)  # the .onnx goes when the script ends
            path = folder + "/model.onnx"
            try:
                onnx_program = torch.onnx.export(gm.eval(), tuple(runtime_inputs), dynamo=True, verbose=False, opset_version={self.options.get("opset")!r})
            except Exception as e:  # worded as trtmin's workers word it, so ERROR_PATTERN matches
                raise export_error(e) from e
            onnx_program.save(path)
            names = [v.name for v in onnx_program.model.graph.inputs]
            out_names = [v.name for v in onnx_program.model.graph.outputs]
            placeholders = list(__import__("inspect").signature(module.forward).parameters)
            index = [placeholders.index(n) for n in names]
            plan = build_plan(trt, path, {self.build_settings!r})  # parse and build: no GPU needed
            if not torch.cuda.is_available():
                NO_GPU
            built = load_plan(trt, plan)

            def run(*args):
                runtime = [args[i] for i in positions]
                return run_engine_torch(trt, built, {{n: runtime[i] for n, i in zip(names, index)}}, out_names)
            return run""").replace("NO_GPU", no_gpu)
        from oracles.backends.torch_tensorrt import _indent_body

        shared = script_source(TensorRTError, OnnxExportError, export_error, import_tensorrt, tensorrt_name,
                               tensorrt_said, build_plan, load_plan, engine_io)
        runner = trt_to_torch_source() + "\n\n\n" + script_source(run_engine_torch)
        return ScriptPart(imports=[shared, runner], requires=["tensorrt|tensorrt_rtx", "onnxscript", "onnx"],
                          compile_body=_indent_body(body))

    def failure_words(self, verdict: Verdict | None) -> str | None:
        if not build_failure(verdict):
            return super().failure_words(verdict)
        return "parser failure" if verdict.message.startswith(BUILD_FAILURES[0]) else "build failure"

    def describe(self) -> str:
        return f"{self.spec} ({installed_tensorrt_name()})" + "".join(f" {k}={v}" for k, v in self.settings.items())


def trt_to_torch_source() -> str:
    """TRT_TO_TORCH as a script's line."""
    return f"TRT_TO_TORCH = {{{', '.join(f'{k!r}: {v}' for k, v in TRT_TO_TORCH.items())}}}\n"


def script_dtype_names() -> str:
    """TRT_TO_TORCH's entries whose names are not torch's in lower case (INT32 is torch.int32,
    HALF torch.half), as a short script's dict literal of names."""
    return repr({k: str(v).removeprefix("torch.") for k, v in TRT_TO_TORCH.items()
                 if getattr(torch, k.lower(), None) != v})


def installed_tensorrt_name() -> str:
    """tensorrt_name of the module import_tensorrt would take, from metadata (no import)."""
    from oracles.environment import package_version

    module = tensorrt_module_name()
    if module is None:
        return "TensorRT: not installed"
    return ("TensorRT-RTX " if module == "tensorrt_rtx" else "TensorRT ") + package_version(module)
