"""The part of repro_tensorrt.py that builds and runs the engine and says the verdict, as
real functions copied by source into each script (oracles/backends/tensorrt_script.py).

Lines tagged `# [feature]` go into a script only where its bug needs them
(oracles/script_checks.tagged_source): `build` (a parser or builder bug: the script builds
and stops there, with or without a GPU), `run` (any other: the engine runs), `values` (a
mismatch or NaN, judged against eager's outputs in the .npz), `failure` (a crash or OOM,
judged by its words), `child` (the bug ends or hangs the process: run in a child),
`bf16` (a bfloat16 input or output, which numpy and a plain ONNX Runtime call lack). The
names the script defines itself are set here to stand-ins, so this module is plain,
importable Python; the functions carry no annotations for the same reason.
"""

import os
import re

from oracles.backends.onnxruntime import ort_session, run_onnxruntime
from oracles.backends.tensorrt import TensorRTError, build_plan, engine_io, import_tensorrt, load_plan, tensorrt_name

# What each script defines for itself: its files, the question and the checks.
ONNX_FILE = NPZ_FILE = ORACLE = ERROR_PATTERN = ""
ONNX_FILES: list = []
ATOL = RTOL = ERROR_RATIO = 0.0
TRT_SETTINGS: dict = {}
OUTPUT_NAMES: list = []
CONTROL: tuple = ()
load_npz = compare_outputs_np = announce_call = run_in_child = None


def find_cudart():
    try:
        from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
    except ImportError:
        from cuda import cudart  # older cuda-python
    return cudart


def cuda_check(result):
    err, rest = result[0], result[1:]
    if int(err) != 0:
        raise TensorRTError(f"CUDA runtime error {err}")
    return rest[0] if len(rest) == 1 else rest


def gpu_missing(cuda_python=True):
    """Why the engine cannot run here (no GPU, no cuda-python), or None. Without cuda-python
    the CUDA driver's own library is asked whether there is a GPU; a build needs no
    cuda-python (cuda_python=False)."""
    try:
        cudart = find_cudart()
    except ImportError:  # the GPU first: on a laptop without one, cuda-python would not help
        return driver_gpu_missing() or ("cuda-python is not installed (pip install cuda-python)" if cuda_python else None)
    try:
        count = cuda_check(cudart.cudaGetDeviceCount())
    except Exception as e:  # no driver, no device
        return f"no CUDA GPU is visible here ({e})"
    return None if count else "no CUDA GPU is visible here"


def driver_gpu_missing():
    """Why the CUDA driver sees no GPU here, or None: asked of its library, which TensorRT
    loads too (no cuda-python, no torch)."""
    import ctypes

    try:
        driver = ctypes.CDLL("nvcuda.dll" if os.name == "nt" else "libcuda.so.1")
    except OSError:
        return "no CUDA driver is installed here"
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "no CUDA GPU is visible here"
    return None


def run_tensorrt(trt, plan, inputs, meta):
    """Load the built engine and run it on the .npz inputs; numpy outputs in the ONNX
    model's output order (bf16 as uint16 bits)."""
    import numpy as np

    cudart = find_cudart()
    built = load_plan(trt, plan)
    engine, log = built["engine"], built["log"]
    context = engine.create_execution_context()
    if context is None:
        raise TensorRTError("creating an execution context failed: " + " | ".join(log.errors or ["no message"]))
    stream = cuda_check(cudart.cudaStreamCreate())
    allocations, host_outputs = [], {}
    try:
        io = engine_io(trt, engine)
        for name, is_input, dtype_name in io:
            if not is_input:
                continue
            if name not in inputs:
                raise TensorRTError(f"the engine has an input {name!r} that the .npz does not hold")
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
                raise TensorRTError(f"output {name!r} has a data-dependent shape {shape}; this script has no "
                                    "output allocator")
            np_dtype = {"BF16": np.uint16, "FP8": np.uint8}.get(dtype_name)
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
        raise TensorRTError(f"the engine has no output {missing[0]!r} of the ONNX model")
    return [host_outputs[n][0] for n in meta["output_names"]]


def run_reference(inputs, meta):
    """The control: the same ONNX file and inputs on ONNX Runtime's CPU provider."""
    import onnxruntime  # [!bf16]
    session = onnxruntime.InferenceSession(str(ONNX_FILE), providers=["CPUExecutionProvider"])  # [!bf16]
    return session.run(None, inputs)  # [!bf16]
    bf16 = {item["name"] for item in meta["inputs"] if item["dtype"] == "bfloat16"}  # [bf16]
    return run_onnxruntime(ort_session(ONNX_FILE, {}), inputs, bf16)[0]  # [bf16] numpy has no bfloat16


def exception_text(e):
    parts = []
    while e is not None and len(parts) < 8:
        parts.append(f"{type(e).__name__}: {e}")
        e = e.__cause__
    return "\n".join(parts)


def run():
    """The verdict's exit code, its line printed."""
    try:
        inputs, expected, meta = load_npz(NPZ_FILE)
    except Exception as e:  # the .npz is gone or unreadable: no news about the bug
        print(f"SKIPPED: cannot run: {type(e).__name__}: {e}")
        return 2
    gone = [path.name for path in ONNX_FILES if not path.is_file()]
    if gone:  # not the parser's failure: no news about the bug
        print(f"SKIPPED: cannot run: {', '.join(gone)} must sit beside this script")
        return 2
    meta["output_names"] = OUTPUT_NAMES
    announce_call()  # [child]
    try:
        if os.environ.get("TRTMIN_BACKEND") in CONTROL:
            actual = run_reference(inputs, meta)  # [values]
            run_reference(inputs, meta)  # [!values]
        else:
            trt = import_tensorrt()
            cannot = gpu_missing(cuda_python=False)  # [build]
            cannot = gpu_missing()  # [run]
            if cannot and not trt.__name__.startswith("tensorrt_rtx"):  # only TensorRT-RTX builds without a GPU
                print(f"SKIPPED: {tensorrt_name(trt)} needs a GPU: {cannot}")
                return 2
            build_plan(trt, ONNX_FILE, TRT_SETTINGS)  # [build] TensorRT-RTX parses and builds without a GPU
            print(f"FIXED: {tensorrt_name(trt)} parsed and built the engine without the error")  # [build]
            plan = build_plan(trt, ONNX_FILE, TRT_SETTINGS)  # [run] TensorRT-RTX parses and builds without a GPU
            return 0  # [build] the bug is in the parser or builder: a build that passes is the bug gone
            if cannot:  # [run]
                print(f"SKIPPED: {tensorrt_name(trt)} built the engine; running it needs a GPU: {cannot}")  # [run]
                return 2  # [run]
            actual = run_tensorrt(trt, plan, inputs, meta)  # [run,values]
            run_tensorrt(trt, plan, inputs, meta)  # [run,!values]
    except Exception as e:  # TensorRT failed: is it the same failure?
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        if os.environ.get("TRTMIN_BACKEND") in CONTROL:  # ONNX Runtime cannot run the model (no bf16 Conv): no news
            print(f"SKIPPED: ONNX Runtime, the control, cannot run the model here: {type(e).__name__}: {first}")
            return 2
        if not ERROR_PATTERN or re.search(ERROR_PATTERN, exception_text(e)):  # [failure]
            print(f"REPRODUCED: {type(e).__name__}: {first}")  # [failure]
            return 1  # [failure]
        if isinstance(e, ImportError):  # installed, yet it fails to import: it cannot run here, no news of the bug
            print(f"SKIPPED: cannot run: {type(e).__name__}: {first}")
            return 2
        print(f"CHANGED: fails differently now: {type(e).__name__}: {first}")
        return 3
    dtypes = [item["dtype"] for item in meta["expected"]]  # [values]
    reproduced, message = compare_outputs_np(expected, actual, dtypes, ORACLE, ATOL, RTOL, meta["exact_arrays"],  # [values]
                                             ERROR_RATIO)  # [values]
    if reproduced is None:  # [values]
        print(f"CHANGED: fails differently now: {message}")  # [values]
        return 3  # [values]
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)  # [values]
    return 1 if reproduced else 0  # [values]
    print("FIXED: ran without error")  # [!values]
    return 0  # [!values]


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
    if os.environ.get("TRTMIN_BACKEND", "") not in ("", *CONTROL):  # a typo of the control must not run TensorRT
        print(f"SKIPPED: TRTMIN_BACKEND takes {' or '.join(CONTROL)} alone (ONNX Runtime in place of TensorRT)")
        return 2
    reason = missing_requirements()
    if reason:
        print(f"SKIPPED: {reason}")
        return 2
    if os.environ.get("TRTMIN_CHILD"):  # [child]
        return run()  # [child]
    return run_in_child()  # [child] TensorRT may abort, segfault or hang
    return run()  # [!child]
