"""TensorRT alone, `--backend tensorrt`: the candidate exported to ONNX with torch.onnx
(oracles/backends/onnx_export.py), parsed by `trt.OnnxParser`, built into an engine,
and run on device buffers (torch CUDA tensors here).

`build_engine` is the one piece of code that turns an ONNX file into an engine: the
backend calls it, and both repro scripts carry its source, so what a script builds is
what trtmin checked. `write_tensorrt_script` writes the TensorRT-only script
(`repro_tensorrt.py`: tensorrt + numpy + cuda-python, no torch) beside the `.onnx` and
an `.npz` of inputs and eager reference outputs.

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
import json
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart
from oracles.backends.onnx_export import (export_onnx, external_data_files, read_onnx_io,
                                          script_source)
from oracles.backends.onnxruntime import check_onnx_export, ort_session, run_onnxruntime
from oracles.errors import MissingPackageError, TrtminError

SCRIPT_NAME = "repro_tensorrt.py"
ONNX_NAME = "model.onnx"
NPZ_NAME = "repro_tensorrt.npz"

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

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        import tensorrt as trt

        with tempfile.TemporaryDirectory(prefix="trtmin-trt-") as tmp:
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
            import tempfile
            import tensorrt as trt
            gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
            path = tempfile.mkdtemp(prefix="repro-trt-") + "/model.onnx"
            onnx_program = torch.onnx.export(gm.eval(), tuple(runtime_inputs), dynamo=True, verbose=False, opset_version={self.options.get("opset")!r})
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

        shared = script_source(TensorRTError, build_engine, engine_io)
        runner = f"TRT_TO_TORCH = {{{', '.join(f'{k!r}: {v}' for k, v in TRT_TO_TORCH.items())}}}\n\n\n" + \
            script_source(run_engine_torch)
        return ScriptPart(imports=[shared, runner], requires=["tensorrt", "onnxscript", "onnx"],
                          compile_body=_indent_body(body))

    def describe(self) -> str:
        return self.spec + "".join(f" {k}={v}" for k, v in self.options.items())


# ---- the TensorRT-only script ----------------------------------------------------------


def save_npz(path: Path, inputs: Mapping[str, torch.Tensor], expected: Sequence[Any]) -> None:
    """Inputs by ONNX input name and eager's outputs, numpy only. bf16 is stored as its
    uint16 bits and named in the "meta" entry (JSON), so numpy alone can read it."""
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"inputs": [], "expected": []}
    for k, (name, value) in enumerate(inputs.items()):
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value)
        arrays[f"input_{k}"] = _np(t)
        meta["inputs"].append({"name": name, "dtype": str(t.dtype).removeprefix("torch.")})
    for i, value in enumerate(expected):
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value)
        arrays[f"expected_{i}"] = _np(t)
        meta["expected"].append({"dtype": str(t.dtype).removeprefix("torch.")})
    arrays["meta"] = np.array(json.dumps(meta))
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.uint8).numpy()
    return t.numpy()


def load_npz(path):
    """numpy only: ({input name: array}, [expected arrays], meta). bf16 arrays hold uint16 bits."""
    import numpy as np

    with np.load(str(path), allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        inputs = {item["name"]: data[f"input_{k}"] for k, item in enumerate(meta["inputs"])}
        expected = [data[f"expected_{i}"] for i in range(len(meta["expected"]))]
    return inputs, expected, meta


def load_npz_torch(path: Path) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """The .npz back as torch tensors with their dtypes (for tests and trtmin itself)."""
    inputs, expected, meta = load_npz(path)

    def back(a: np.ndarray, dtype: str) -> torch.Tensor:
        t = torch.from_numpy(np.asarray(a, order="C"))
        if dtype == "bfloat16":
            return t.view(torch.int16).view(torch.bfloat16)
        if dtype.startswith("float8"):
            return t.view(getattr(torch, dtype))
        return t

    ins = {name: back(a, item["dtype"]) for (name, a), item in zip(inputs.items(), meta["inputs"])}
    outs = [back(a, item["dtype"]) for a, item in zip(expected, meta["expected"])]
    return ins, outs


def as_float64(a, dtype):
    """An array as float64 for comparison (bf16 bits widened)."""
    import numpy as np

    if dtype == "bfloat16":
        return (np.asarray(a).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.float64)
    if np.iscomplexobj(a):
        return a.astype(np.complex128)
    return a.astype(np.float64)


def compare_outputs_np(expected, actual, dtypes, oracle, atol, rtol):
    """(reproduced, message) for one run, as trtmin's mismatch / nan checks decide it."""
    import numpy as np

    if len(expected) != len(actual):
        return True, f"eager returns {len(expected)} outputs, the backend {len(actual)}"
    worst = None
    for i, (e, a) in enumerate(zip(expected, actual)):
        e64, a64 = as_float64(e, dtypes[i]), as_float64(a, dtypes[i])
        if e64.shape != a64.shape:
            if oracle == "mismatch":
                return True, f"output {i} has shape {a64.shape}, eager {e64.shape}"
            continue
        e_finite, a_finite = np.isfinite(e64), np.isfinite(a64)
        if oracle == "nan":
            bad = e_finite & ~a_finite
            if bad.any():
                return True, f"output {i} has {int(bad.sum())} non-finite values where eager is finite"
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(e64 - a64)
        same = (e64 == a64) | (np.isnan(e64) & np.isnan(a64))
        diff = np.where(same, 0.0, np.where(e_finite & a_finite, diff, np.inf))
        floating = dtypes[i].startswith(("float", "bfloat", "complex"))
        limit = atol + (rtol if floating else 0.0) * np.nan_to_num(np.abs(e64), nan=0.0, posinf=0.0, neginf=0.0)
        bad = diff > limit
        if bad.any() and (worst is None or float(diff.max()) > worst[1]):
            worst = (i, float(diff.max()), int(bad.sum()))
    if oracle == "nan":
        return False, "no non-finite values where eager is finite"
    if oracle != "mismatch":
        return False, "built and ran without error"
    if worst is None:
        return False, "the backend matches eager PyTorch"
    i, err, n = worst
    return True, f"output {i} differs from eager by max abs {err:.4g} ({n} values off)"


SCRIPT = '''#!/usr/bin/env python3
"""{header}

TensorRT-only repro: needs tensorrt, numpy, cuda-python and an NVIDIA GPU; no torch.
Files beside it: {onnx_files}, {npz} (inputs and eager PyTorch's outputs).

Run:      python {script}
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package),
          3 = fails differently now
Control:  TRTMIN_BACKEND=onnxruntime python {script}
          runs the same ONNX file on onnxruntime (CPU) in place of TensorRT; it must print FIXED
"""

import importlib.util
import json
import os
import pathlib
import re
import signal
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ONNX_FILE = HERE / {onnx!r}
NPZ_FILE = HERE / {npz!r}
ORACLE = {oracle!r}
ATOL, RTOL = {atol!r}, {rtol!r}
ERROR_PATTERN = {error_pattern!r}  # regex the failure text must match (crash / oom oracles)
TIMEOUT_S = {timeout!r}
TRT_SETTINGS = {settings!r}
ORT_SETTINGS = {{}}


{shared}

def find_cudart():
    try:
        from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
    except ImportError:
        from cuda import cudart  # older cuda-python
    return cudart


def cuda_check(result):
    err, rest = result[0], result[1:]
    if int(err) != 0:
        raise TensorRTError(f"CUDA runtime error {{err}}")
    return rest[0] if len(rest) == 1 else rest


def run_tensorrt(inputs, meta):
    """Build the engine from the ONNX file and run it on the .npz inputs; numpy outputs
    in the ONNX model's output order (bf16 as uint16 bits)."""
    import numpy as np
    import tensorrt as trt

    cudart = find_cudart()
    built = build_engine(trt, ONNX_FILE, TRT_SETTINGS)
    engine, log = built["engine"], built["log"]
    context = engine.create_execution_context()
    if context is None:
        raise TensorRTError("creating an execution context failed: " + " | ".join(log.errors or ["no message"]))
    stream = cuda_check(cudart.cudaStreamCreate())
    allocations, host_outputs = [], {{}}
    try:
        io = engine_io(trt, engine)
        for name, is_input, dtype_name in io:
            if not is_input:
                continue
            if name not in inputs:
                raise TensorRTError(f"the engine has an input {{name!r}} that the .npz does not hold")
            host = np.asarray(inputs[name], order="C")
            if dtype_name not in ("BF16", "FP8"):  # numpy knows the type: make it the engine's
                host = np.asarray(host.astype(trt.nptype(engine.get_tensor_dtype(name)), copy=False), order="C")
            context.set_input_shape(name, host.shape)
            if engine.is_shape_inference_io(name):  # shape tensors live in host memory
                allocations.append(host)
                context.set_tensor_address(name, host.ctypes.data)
                continue
            device = cuda_check(cudart.cudaMalloc(max(host.nbytes, 1)))
            allocations.append(device)
            if host.nbytes:
                cuda_check(cudart.cudaMemcpy(device, host.ctypes.data, host.nbytes,
                                             cudart.cudaMemcpyKind.cudaMemcpyHostToDevice))
            context.set_tensor_address(name, device)
        for name, is_input, dtype_name in io:
            if is_input:
                continue
            shape = tuple(context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise TensorRTError(f"output {{name!r}} has a data-dependent shape {{shape}}; this script has no "
                                    "output allocator")
            np_dtype = {{"BF16": np.uint16, "FP8": np.uint8}}.get(dtype_name)
            host = np.empty(shape, dtype=np_dtype or trt.nptype(engine.get_tensor_dtype(name)))
            device = cuda_check(cudart.cudaMalloc(max(host.nbytes, 1)))
            allocations.append(device)
            context.set_tensor_address(name, device)
            host_outputs[name] = (host, device)
        if not context.execute_async_v3(int(stream)):
            raise TensorRTError("execute_async_v3 failed: " + " | ".join(log.errors or ["no message"]))
        cuda_check(cudart.cudaStreamSynchronize(stream))
        for host, device in host_outputs.values():
            if host.nbytes:
                cuda_check(cudart.cudaMemcpy(host.ctypes.data, device, host.nbytes,
                                             cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost))
    finally:
        for a in allocations:
            if not hasattr(a, "ctypes"):
                cudart.cudaFree(a)
        cudart.cudaStreamDestroy(stream)
    missing = [n for n in meta["output_names"] if n not in host_outputs]
    if missing:
        raise TensorRTError(f"the engine has no output {{missing[0]!r}} of the ONNX model")
    return [host_outputs[n][0] for n in meta["output_names"]]


def run_reference(inputs, meta):
    bf16 = {{item["name"] for item in meta["inputs"] if item["dtype"] == "bfloat16"}}
    outputs, _ = run_onnxruntime(ort_session(ONNX_FILE, ORT_SETTINGS), inputs, bf16)
    return outputs


def exception_text(e):
    parts = []
    while e is not None and len(parts) < 8:
        parts.append(f"{{type(e).__name__}}: {{e}}")
        e = e.__cause__
    return "\\n".join(parts)


def run():
    inputs, expected, meta = load_npz(NPZ_FILE)
    meta["output_names"] = {output_names!r}
    dtypes = [item["dtype"] for item in meta["expected"]]
    try:
        if os.environ.get("TRTMIN_BACKEND") == "onnxruntime":
            actual = run_reference(inputs, meta)
        else:
            actual = run_tensorrt(inputs, meta)
    except Exception as e:  # TensorRT failed: is it the same failure?
        text = exception_text(e)
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        if ORACLE in ("crash", "oom") and (not ERROR_PATTERN or re.search(ERROR_PATTERN, text)):
            print(f"REPRODUCED: {{type(e).__name__}}: {{first}}")
            return 1
        print(f"CHANGED: fails differently now: {{type(e).__name__}}: {{first}}")
        return 3
    reproduced, message = compare_outputs_np(expected, actual, dtypes, ORACLE, ATOL, RTOL)
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


def missing_requirements():
    """Why this cannot run here, or None."""
    reference = os.environ.get("TRTMIN_BACKEND") == "onnxruntime"
    needed = ["numpy"] + (["onnxruntime"] if reference else ["tensorrt"])
    for name in needed:
        if importlib.util.find_spec(name) is None:
            return f"{{name}} is not installed"
    if reference:
        return None
    try:
        cudart = find_cudart()
    except ImportError:
        return "cuda-python is not installed (pip install cuda-python)"
    try:
        count = cuda_check(cudart.cudaGetDeviceCount())
    except Exception as e:  # no driver, no device
        return f"no CUDA GPU is visible here ({{e}})"
    if not count:
        return "no CUDA GPU is visible here"
    return None


def main():
    reason = missing_requirements()
    if reason:
        print(f"SKIPPED: {{reason}}")
        return 2
    if os.environ.get("TRTMIN_CHILD"):
        return run()
    # TensorRT may abort, segfault or hang: run in a child and read how it ended.
    try:
        child = subprocess.run([sys.executable, __file__], env={{**os.environ, "TRTMIN_CHILD": "1"}},
                               capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"REPRODUCED: no result within {{TIMEOUT_S:g}} s (hang)" if ORACLE == "hang" else "CHANGED: hangs now")
        return 1 if ORACLE == "hang" else 3
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        same = ORACLE == "crash" and (not ERROR_PATTERN or re.search(ERROR_PATTERN, name))
        print(f"{{'REPRODUCED' if same else 'CHANGED'}}: the process was killed by {{name}}")
        return 1 if same else 3
    sys.stdout.write(child.stdout)
    if child.returncode not in (0, 1, 2, 3):
        sys.stdout.write(child.stderr[-2000:])
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
'''


def write_tensorrt_script(out_dir: Path, onnx_path: Path, inputs: Sequence[Any] | Mapping[str, Any],
                          expected: Sequence[Any], oracle: str, atol: float, rtol: float, header: str, *,
                          error_pattern: str = "", timeout: float = 600.0,
                          settings: Mapping[str, Any] | None = None) -> Path:
    """Write repro_tensorrt.py, model.onnx (+ its external data) and repro_tensorrt.npz.

    inputs: the candidate's inputs in placeholder order (the ONNX file's trtmin metadata
    says which feed the model), or a list in ONNX input order, or {ONNX input name: value}.
    expected: eager PyTorch's flattened outputs. settings: the tensorrt backend's parsed
    build settings (TensorRTBackend.build_settings), so the script builds the same way.
    error_pattern: regex for crash/oom (oracles.script_checks.error_pattern).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = Path(onnx_path)
    names, output_names, meta = read_onnx_io(onnx_path)
    named = _name_inputs(inputs, names, meta)
    if len(expected) != len(output_names):
        raise TrtminError(f"{onnx_path.name} has {len(output_names)} outputs but {len(expected)} expected values "
                          "were given")
    target = out_dir / ONNX_NAME
    copied = [ONNX_NAME]
    if onnx_path.resolve() != target.resolve():
        _atomic_copy(onnx_path, target)
    for data_file in external_data_files(onnx_path):
        if data_file.resolve() != (out_dir / data_file.name).resolve():
            _atomic_copy(data_file, out_dir / data_file.name)
        copied.append(data_file.name)
    save_npz(out_dir / NPZ_NAME, named, expected)
    shared = "\n\n".join([
        script_source(TensorRTError, build_engine, engine_io),
        script_source(ort_session, run_onnxruntime),
        script_source(load_npz, as_float64, compare_outputs_np),
    ])
    text = SCRIPT.format(
        header=header.replace('"""', "'''").strip(), script=SCRIPT_NAME, onnx=ONNX_NAME, npz=NPZ_NAME,
        onnx_files=", ".join(copied), oracle=oracle, atol=atol, rtol=rtol, error_pattern=error_pattern,
        timeout=timeout, settings=dict(settings or {}), shared=shared, output_names=output_names)
    script = out_dir / SCRIPT_NAME
    tmp = out_dir / f".{SCRIPT_NAME}.tmp"
    tmp.write_text(text)
    tmp.replace(script)
    return script


def _name_inputs(inputs: Sequence[Any] | Mapping[str, Any], names: list[str],
                 meta: dict[str, Any]) -> dict[str, Any]:
    if isinstance(inputs, Mapping):
        missing = [n for n in names if n not in inputs]
        if missing:
            raise TrtminError(f"no value for ONNX input {missing[0]!r}")
        return {n: inputs[n] for n in names}
    inputs = list(inputs)
    placeholders = meta.get("placeholders")
    if placeholders and len(inputs) == len(placeholders):
        return {n: inputs[i] for n, i in zip(names, meta["input_positions"])}
    if len(inputs) == len(names):
        return dict(zip(names, inputs))
    raise TrtminError(f"{len(inputs)} inputs given; the ONNX model takes {len(names)} ({', '.join(names)})")


def _atomic_copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)
