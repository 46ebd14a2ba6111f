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
get_tensor_name/mode/dtype, set_input_shape, set_tensor_address, execute_async_v3).
Not run here: no GPU and no TensorRT on this machine.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart, scratch_folder
from oracles.backends.onnx_export import OnnxExportError, export_error, export_onnx, script_source
from oracles.backends.onnxruntime import check_onnx_export
from oracles.errors import MissingPackageError, TrtminError

ONNX_NAME = "model.onnx"

FLAG_SETTINGS = {"fp16": "FP16", "bf16": "BF16", "int8": "INT8", "fp8": "FP8", "tf32": "TF32",
                 "strict_nans": "STRICT_NANS"}
SETTINGS = (*FLAG_SETTINGS, "flags", "strongly_typed", "optimization_level", "workspace", "opset")


def parse_trt_settings(settings: dict[str, Any] | None, backend: str = "tensorrt") -> dict[str, Any]:
    """--set strings -> {"builder_flags": {NAME: bool}, "strongly_typed", "optimization_level",
    "workspace", "opset"}: the form build_engine takes."""
    from oracles.backends.torch_tensorrt import _bool, _int, unknown_key_error

    parsed: dict[str, Any] = {}
    flags: dict[str, bool] = {}
    for key, value in (settings or {}).items():
        text = str(value)
        if key not in SETTINGS:
            raise unknown_key_error(key, SETTINGS, backend)
        if key in FLAG_SETTINGS:
            flags[FLAG_SETTINGS[key]] = _bool(key, text) if isinstance(value, str) else bool(value)
        elif key == "flags":
            items = value if isinstance(value, (list, tuple)) else text.split(",")
            for name in (str(n).strip().upper() for n in items):
                if name:
                    flags[name] = True
        elif key == "strongly_typed":
            parsed[key] = _bool(key, text) if isinstance(value, str) else bool(value)
        else:
            parsed[key] = _int(key, text) if isinstance(value, str) else int(value)
    if flags:
        parsed["builder_flags"] = flags
    return parsed


# ---- shared with the scripts (pasted in by source) -------------------------------------


class TensorRTError(RuntimeError):
    """TensorRT refused the model: parsing, building, or running the engine failed."""


def build_engine(trt, onnx_path, settings):
    """ONNX file -> {"engine", "runtime", "log"}. Raises TensorRTError with TensorRT's words.

    settings: builder_flags {NAME: bool}, strongly_typed, optimization_level, workspace."""

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
    if settings.get("strongly_typed"):
        flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
        if flag is None:
            raise TensorRTError(f"TensorRT {trt.__version__} has no NetworkDefinitionCreationFlag.STRONGLY_TYPED")
        flags |= 1 << int(flag)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, log)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise TensorRTError("the ONNX parser failed: " + " | ".join(errors or log.errors or ["no message"]))
    config = builder.create_builder_config()
    for name, on in sorted(settings.get("builder_flags", {}).items()):
        flag = getattr(trt.BuilderFlag, name, None)
        if flag is None:
            raise TensorRTError(f"TensorRT {trt.__version__} has no BuilderFlag.{name}")
        if on:
            config.set_flag(flag)
        else:
            config.clear_flag(flag)
    if settings.get("optimization_level") is not None:
        config.builder_optimization_level = int(settings["optimization_level"])
    if settings.get("workspace") is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(settings["workspace"]))
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise TensorRTError("building the engine failed: " + " | ".join(log.errors or ["no message"]))
    runtime = trt.Runtime(log)
    engine = runtime.deserialize_cuda_engine(plan)
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
    if importlib.util.find_spec("tensorrt") is None:
        raise MissingPackageError(f"backend {spec} needs the tensorrt package, which is not installed here; "
                                  "install it with pip install tensorrt (needs an NVIDIA GPU and CUDA)")
    check_onnx_export(spec)
    if not torch.cuda.is_available():
        raise TrtminError(f"backend {spec} needs an NVIDIA GPU, and torch {torch.__version__} sees none here; "
                          "run trtmin on a machine with a CUDA GPU and a CUDA build of torch")


class TensorRTBackend(Backend):
    name = "tensorrt"
    devices = ("cpu", "cuda")  # the ONNX export is device-free; buffers are copied to the GPU

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        self.options = parse_trt_settings(self.settings, spec)

    @property
    def build_settings(self) -> dict[str, Any]:
        return {k: v for k, v in self.options.items() if k != "opset"}

    @staticmethod
    def check_available(spec: str = "tensorrt") -> None:
        check_tensorrt(spec)

    keeps_dynamic = False  # build_engine makes no optimization profile: static shapes

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        import tensorrt as trt

        with scratch_folder("trtmin-trt-") as tmp:
            export = export_onnx(gm, example_inputs, Path(tmp) / ONNX_NAME, opset=self.options.get("opset"))
            built = build_engine(trt, export.path, self.build_settings)

        def run(*args: Any) -> list[torch.Tensor]:
            feeds = {name: (v if isinstance(v, torch.Tensor) else torch.tensor(v)) for name, v in export.feeds(args).items()}
            return run_engine_torch(trt, built, feeds, export.output_names)

        return run

    def script_part(self) -> ScriptPart:
        """For repro.py (torch + tensorrt): the same export, build_engine and runner."""
        body = textwrap.dedent(f"""\
            if not torch.cuda.is_available():  # the program may be on the CPU; TensorRT is not
                print("SKIPPED: TensorRT needs a CUDA GPU, and none is visible here")
                sys.exit(2)
            import atexit, shutil, tempfile
            import tensorrt as trt
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
            built = build_engine(trt, path, {self.build_settings!r})

            def run(*args):
                runtime = [args[i] for i in positions]
                return run_engine_torch(trt, built, {{n: runtime[i] for n, i in zip(names, index)}}, out_names)
            return run""")
        from oracles.backends.torch_tensorrt import _indent_body

        shared = script_source(TensorRTError, OnnxExportError, export_error, build_engine, engine_io)
        runner = f"TRT_TO_TORCH = {{{', '.join(f'{k!r}: {v}' for k, v in TRT_TO_TORCH.items())}}}\n\n\n" + \
            script_source(run_engine_torch)
        return ScriptPart(imports=[shared, runner], requires=["tensorrt", "onnxscript", "onnx"],
                          compile_body=_indent_body(body))

    def describe(self) -> str:
        return self.spec + "".join(f" {k}={v}" for k, v in self.options.items())
