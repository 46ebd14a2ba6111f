"""executorch:xnnpack mismatch on cpu: batch_norm.default, linear.default

MISMATCH: output 0 differs from eager by max abs 2.187 (max rel 113.4) (40 of 50 values off, dtype float32)
Emitted for tensorrt by trtmin; the reduction was checked on cpu with another backend.

TensorRT-only repro: needs TensorRT (module tensorrt, or tensorrt_rtx for TensorRT-RTX) and
numpy, no torch. Running the engine needs cuda-python and an NVIDIA GPU.
Files beside it: model.onnx, repro_tensorrt.npz (inputs and eager PyTorch's outputs).

Run:      python repro_tensorrt.py
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package),
          3 = fails differently now
Control:  TRTMIN_BACKEND=onnxruntime python repro_tensorrt.py   (or =eager, as for repro.py)
          runs the same ONNX file on onnxruntime (CPU) in place of TensorRT; it must print FIXED
"""

import json
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ONNX_FILE = HERE / 'model.onnx'
NPZ_FILE = HERE / 'repro_tensorrt.npz'
OUTPUT_NAMES = ['getitem']  # the ONNX model's, in order
TRT_SETTINGS = {}
CONTROL = ("onnxruntime", "eager")  # TRTMIN_BACKEND values that run ONNX Runtime in place of TensorRT
ORACLE = 'mismatch'
ATOL, RTOL = 0.001, 0.001
ERROR_RATIO = 2.0  # with a float64 run in the .npz: how far past eager's own error from it is a bug


def run():
    """The verdict's exit code, its line printed."""
    try:
        inputs, expected, meta = load_npz(NPZ_FILE)
    except Exception as e:  # the .npz is gone or unreadable: no news about the bug
        print(f"SKIPPED: cannot run: {type(e).__name__}: {e}")
        return 2
    meta["output_names"] = OUTPUT_NAMES
    try:
        if os.environ.get("TRTMIN_BACKEND") in CONTROL:
            actual = run_reference(inputs, meta)
        else:
            trt = import_tensorrt()
            cannot = gpu_missing()
            if cannot and not trt.__name__.startswith("tensorrt_rtx"):  # only TensorRT-RTX builds without a GPU
                print(f"SKIPPED: {tensorrt_name(trt)} needs a GPU: {cannot}")
                return 2
            plan = build_plan(trt, ONNX_FILE, TRT_SETTINGS)  # TensorRT-RTX parses and builds without a GPU
            if cannot:
                print(f"SKIPPED: {tensorrt_name(trt)} built the engine; running it needs a GPU: {cannot}")
                return 2
            actual = run_tensorrt(trt, plan, inputs, meta)
    except Exception as e:  # TensorRT failed: is it the same failure?
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        print(f"CHANGED: fails differently now: {type(e).__name__}: {first}")
        return 3
    dtypes = [item["dtype"] for item in meta["expected"]]
    reproduced, message = compare_outputs_np(expected, actual, dtypes, ORACLE, ATOL, RTOL, meta["exact_arrays"],
                                             ERROR_RATIO)
    if reproduced is None:
        print(f"CHANGED: fails differently now: {message}")
        return 3
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


class TensorRTError(RuntimeError):
    """TensorRT refused the model: parsing, building, or running the engine failed."""


def import_tensorrt():
    """NVIDIA's TensorRT (module tensorrt) where it is installed, else TensorRT-RTX (module
    tensorrt_rtx, the same Python API)."""
    try:
        import tensorrt as trt
    except ImportError:
        import tensorrt_rtx as trt
    return trt


def tensorrt_name(trt):
    """"TensorRT 10.13.0" or "TensorRT-RTX 1.4.0.76": which TensorRT a module is."""
    return ('TensorRT-RTX ' if trt.__name__.startswith('tensorrt_rtx') else 'TensorRT ') + str(trt.__version__)


def tensorrt_said(parser_errors, logged):
    """TensorRT's words as one line: each parser error's first line and every "Error Code"
    line of the log, once, not the node dumps; a logged error with no such line, by its
    first line. catchCudaError's line ("CUDA failed under the builder", which every build
    logs where there is no GPU) and the parser's node dumps only where nothing else was said."""
    lines = []
    for text, first in [(t, True) for t in parser_errors] + [(t, False) for t in logged]:
        rows = [row.strip() for row in str(text).splitlines() if row.strip()]
        coded = [row for row in rows if 'Error Code' in row]
        for row in (rows[:1] if first else []) + (coded if coded else rows[:1]):
            if row not in lines:
                lines.append(row)
    noise = ('catchCudaError', 'ModelImporter.cpp')
    shown = [row for row in lines if not any((n in row for n in noise))] or lines
    return ' | '.join(shown) or 'no message'



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
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, log)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [parser.get_error(i) for i in range(parser.num_errors)]
        raise TensorRTError("the ONNX parser failed: " + tensorrt_said(errors, log.errors))
    config = builder.create_builder_config()
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise TensorRTError("building the engine failed: " + tensorrt_said([], log.errors))
    return {"plan": plan, "log": log}


def load_plan(trt, built):
    """build_plan's result -> {"engine", "runtime", "log"}: the engine loaded on the GPU
    (TensorRT-RTX compiles its kernels here). Raises TensorRTError with TensorRT's words."""
    log = built['log']
    runtime = trt.Runtime(log)
    engine = runtime.deserialize_cuda_engine(built['plan'])
    if engine is None:
        raise TensorRTError('deserializing the engine failed: ' + ' | '.join(log.errors or ['no message']))
    return {'engine': engine, 'runtime': runtime, 'log': log}


def engine_io(trt, engine):
    """[(name, is_input, dtype name)] of an engine's I/O tensors, in engine order."""
    io = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        io.append((name, is_input, engine.get_tensor_dtype(name).name))
    return io


def load_npz(path):
    """numpy only: ({input name: array}, [expected arrays], meta). bf16 arrays hold uint16 bits.
    The float64 run's outputs, where saved, are in meta["exact_arrays"]."""
    import numpy as np
    with np.load(str(path), allow_pickle=False) as data:
        meta = json.loads(str(data['meta']))
        inputs = {item['name']: data[f'input_{k}'] for k, item in enumerate(meta['inputs'])}
        expected = [data[f'expected_{i}'] for i in range(len(meta['expected']))]
        meta['exact_arrays'] = [data[f'exact_{i}'] for i in range(meta.get('exact', 0))] or None
    return (inputs, expected, meta)


def as_float64(a, dtype):
    """An array as float64 for comparison (bf16 bits widened)."""
    import numpy as np
    if dtype == 'bfloat16':
        return (np.asarray(a).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.float64)
    if np.iscomplexobj(a):
        return a.astype(np.complex128)
    return a.astype(np.float64)



def compare_outputs_np(expected, actual, dtypes, oracle, atol, rtol, exact=None, error_ratio=ERROR_RATIO):
    """(reproduced, message) for one run, as trtmin's mismatch / nan checks decide it
    (reproduced None: a mismatch bug that now fails as a nan, CHANGED). exact:
    the float64 run's outputs (--reference float64): then an output no further from them
    than error_ratio x eager's own error (error_ratio_np) is no error."""
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
        lost = e_finite & ~a_finite
        if lost.any() and oracle in ("nan", "mismatch"):  # a nan to trtmin: for a mismatch, another failure
            return (True if oracle == "nan" else None,
                    f"output {i} has {int(lost.sum())} non-finite values where eager is finite")
        if oracle == "nan":
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(e64 - a64)
        same = (e64 == a64) | (np.isnan(e64) & np.isnan(a64))
        diff = np.where(same, 0.0, np.where(e_finite & a_finite, diff, np.inf))
        floating = dtypes[i].startswith(("float", "bfloat", "complex"))
        limit = atol + (rtol if floating else 0.0) * np.nan_to_num(np.abs(e64), nan=0.0, posinf=0.0, neginf=0.0)
        bad = diff > limit
        note = ""
        if bad.any() and (worst is None or float(diff.max()) > worst[1]):
            worst = (i, float(diff.max()), int(bad.sum()), note)
    if oracle == "nan":
        return False, "no non-finite values where eager is finite"
    if oracle != "mismatch":
        return False, "built and ran without error"
    if worst is None:
        within = f" (or is off it by at most {error_ratio:g}x eager's own error from float64)" if exact is not None else ""
        return False, f"the backend matches eager PyTorch{within}"
    i, err, n, note = worst
    return True, f"output {i} differs from eager by max abs {err:.4g} ({n} values off{note})"


def find_cudart():
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        from cuda import cudart
    return cudart


def cuda_check(result):
    err, rest = (result[0], result[1:])
    if int(err) != 0:
        raise TensorRTError(f'CUDA runtime error {err}')
    return rest[0] if len(rest) == 1 else rest


def gpu_missing():
    """Why the engine cannot run here (no cuda-python, no GPU), or None."""
    try:
        cudart = find_cudart()
    except ImportError:
        return 'cuda-python is not installed (pip install cuda-python)'
    try:
        count = cuda_check(cudart.cudaGetDeviceCount())
    except Exception as e:
        return f'no CUDA GPU is visible here ({e})'
    return None if count else 'no CUDA GPU is visible here'


def run_tensorrt(trt, plan, inputs, meta):
    """Load the built engine and run it on the .npz inputs; numpy outputs in the ONNX
    model's output order (bf16 as uint16 bits)."""
    import numpy as np
    cudart = find_cudart()
    built = load_plan(trt, plan)
    engine, log = (built['engine'], built['log'])
    context = engine.create_execution_context()
    if context is None:
        raise TensorRTError('creating an execution context failed: ' + ' | '.join(log.errors or ['no message']))
    stream = cuda_check(cudart.cudaStreamCreate())
    allocations, host_outputs = ([], {})
    try:
        io = engine_io(trt, engine)
        for name, is_input, dtype_name in io:
            if not is_input:
                continue
            if name not in inputs:
                raise TensorRTError(f'the engine has an input {name!r} that the .npz does not hold')
            host = np.asarray(inputs[name], order='C')
            if dtype_name not in ('BF16', 'FP8'):
                host = np.asarray(host.astype(trt.nptype(engine.get_tensor_dtype(name)), copy=False), order='C')
            context.set_input_shape(name, host.shape)
            if engine.is_shape_inference_io(name):
                allocations.append(host)
                context.set_tensor_address(name, host.ctypes.data)
                continue
            device = cuda_check(cudart.cudaMalloc(max(host.nbytes, 1)))
            allocations.append(device)
            if host.nbytes:
                cuda_check(cudart.cudaMemcpy(device, host.ctypes.data, host.nbytes, cudart.cudaMemcpyKind.cudaMemcpyHostToDevice))
            context.set_tensor_address(name, device)
        for name, is_input, dtype_name in io:
            if is_input:
                continue
            shape = tuple(context.get_tensor_shape(name))
            if any((d < 0 for d in shape)):
                raise TensorRTError(f'output {name!r} has a data-dependent shape {shape}; this script has no output allocator')
            np_dtype = {'BF16': np.uint16, 'FP8': np.uint8}.get(dtype_name)
            host = np.empty(shape, dtype=np_dtype or trt.nptype(engine.get_tensor_dtype(name)))
            device = cuda_check(cudart.cudaMalloc(max(host.nbytes, 1)))
            allocations.append(device)
            context.set_tensor_address(name, device)
            host_outputs[name] = (host, device)
        if not context.execute_async_v3(int(stream)):
            raise TensorRTError('execute_async_v3 failed: ' + ' | '.join(log.errors or ['no message']))
        cuda_check(cudart.cudaStreamSynchronize(stream))
        for host, device in host_outputs.values():
            if host.nbytes:
                cuda_check(cudart.cudaMemcpy(host.ctypes.data, device, host.nbytes, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost))
    finally:
        for a in allocations:
            if not hasattr(a, 'ctypes'):
                cudart.cudaFree(a)
        cudart.cudaStreamDestroy(stream)
    missing = [n for n in meta['output_names'] if n not in host_outputs]
    if missing:
        raise TensorRTError(f'the engine has no output {missing[0]!r} of the ONNX model')
    return [host_outputs[n][0] for n in meta['output_names']]


def run_reference(inputs, meta):
    """The control: the same ONNX file and inputs on ONNX Runtime's CPU provider."""
    import onnxruntime
    session = onnxruntime.InferenceSession(str(ONNX_FILE), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def missing_requirements():
    """Why this cannot run here, or None (the GPU is asked for after the build)."""
    import importlib.util

    reference = os.environ.get("TRTMIN_BACKEND") in CONTROL
    needed = ["numpy"] + (["onnxruntime"] if reference else ["tensorrt|tensorrt_rtx"])
    for name in needed:
        if not any(importlib.util.find_spec(n) for n in name.split("|")):
            return f"{name.replace('|', ' or ')} is not installed"
    return None


def main():
    reason = missing_requirements()
    if reason:
        print(f"SKIPPED: {reason}")
        return 2
    return run()


if __name__ == "__main__":
    sys.exit(main())
