"""The TensorRT-only repro script: `repro_tensorrt.py` (TensorRT or TensorRT-RTX + numpy +
cuda-python, no torch) beside the candidate's `model.onnx` and an `.npz` of its inputs and
eager's reference outputs. Without a GPU it still parses and builds, so a parser or builder
bug is judged on any machine; a bug that needs the engine run says SKIPPED there.

The script carries the source of `build_plan` (oracles/backends/tensorrt.py), so it
builds what trtmin checked. With TRTMIN_BACKEND=onnxruntime it runs the same ONNX file
on ONNX Runtime, which validates the reference half where TensorRT is absent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from oracles.backends.onnx_export import external_data_files, read_onnx_io, script_source
from oracles.backends.onnxruntime import ort_session, run_onnxruntime
from oracles.backends.tensorrt import (ONNX_NAME, TensorRTError, build_plan, engine_io, import_tensorrt, load_plan,
                                       tensorrt_name, tensorrt_said)
from oracles.errors import TrtminError
from oracles.reference import ERROR_RATIO
from oracles.script_child import CHILD_SOURCE

SCRIPT_NAME = "repro_tensorrt.py"
NPZ_NAME = "repro_tensorrt.npz"


def save_npz(path: Path, inputs: Mapping[str, torch.Tensor], expected: Sequence[Any],
             exact: Sequence[Any] | None = None) -> None:
    """Inputs by ONNX input name and eager's outputs, numpy only. bf16 is stored as its
    uint16 bits and named in the "meta" entry (JSON), so numpy alone can read it. exact:
    the float64 run's outputs (--reference float64), stored as float64 or complex128."""
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"inputs": [], "expected": [], "exact": 0 if exact is None else len(exact)}
    for i, value in enumerate(exact or []):
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value)
        arrays[f"exact_{i}"] = t.detach().cpu().to(torch.complex128 if t.is_complex() else torch.float64).numpy()
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
    """numpy only: ({input name: array}, [expected arrays], meta). bf16 arrays hold uint16 bits.
    The float64 run's outputs, where saved, are in meta["exact_arrays"]."""
    import numpy as np

    with np.load(str(path), allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        inputs = {item["name"]: data[f"input_{k}"] for k, item in enumerate(meta["inputs"])}
        expected = [data[f"expected_{i}"] for i in range(len(meta["expected"]))]
        meta["exact_arrays"] = [data[f"exact_{i}"] for i in range(meta.get("exact", 0))] or None
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


def error_ratio_np(e64, a64, r64):
    """oracles/reference.py error_ratio in numpy: the backend's error from the float64 run
    over eager's (root mean square and worst value, where eager's error is finite); inf where the backend is
    infinitely off where eager is not, or eager exact and the backend not; None where eager
    is infinitely off everywhere."""
    import numpy as np

    def off(x):
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.nan_to_num(np.abs(x - r64), nan=np.inf, posinf=np.inf, neginf=np.inf)
        return np.where((x == r64) | (np.isnan(x) & np.isnan(r64)), 0.0, d)

    eager_off, backend_off = off(e64), off(a64)
    judged = np.isfinite(eager_off)
    if (~np.isfinite(backend_off) & judged).any():
        return float("inf")
    if not judged.any():
        return None
    ratios = []
    for norm in (lambda d: np.sqrt(np.mean(d ** 2)), np.max):  # the spread, and the worst value
        eager, backend = float(norm(eager_off[judged])), float(norm(backend_off[judged]))
        ratios.append((0.0 if backend == 0.0 else float("inf")) if eager == 0.0 else backend / eager)
    return max(ratios)


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
        r64 = np.asarray(exact[i]) if exact is not None and i < len(exact) else None
        if bad.any() and floating and r64 is not None and r64.shape == e64.shape:  # another shape: eager alone
            ratio = error_ratio_np(e64, a64, r64)
            if ratio is not None and ratio <= error_ratio:
                continue  # no further from the float64 run than eager's own rounding
            if ratio is not None:
                note = (", where eager matches the float64 run" if ratio == float("inf")
                        else f", {ratio:.3g}x eager's own error from float64")
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


SCRIPT = '''#!/usr/bin/env python3
"""{header}

TensorRT-only repro: needs TensorRT (module tensorrt, or tensorrt_rtx for TensorRT-RTX) and
numpy; running the engine needs cuda-python and an NVIDIA GPU; no torch.{build_words}
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
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ONNX_FILE = HERE / {onnx!r}
NPZ_FILE = HERE / {npz!r}
ORACLE = {oracle!r}
ATOL, RTOL = {atol!r}, {rtol!r}
ERROR_RATIO = {error_ratio!r}  # with the float64 run's outputs in the .npz: how far past eager's own error is a bug
ERROR_PATTERN = {error_pattern!r}  # regex the failure text must match (crash / oom oracles)
CHILD_TIMEOUT_S = {timeout!r}
HANG_VERDICT = ((f"REPRODUCED: no result within {{CHILD_TIMEOUT_S:g}} s (hang)", 1) if ORACLE == "hang"
                else ("CHANGED: hangs now", 3))
DEATH_PATTERN = (ERROR_PATTERN or ".") if ORACLE == "crash" else "$^"  # how the reduced bug ended the process
TRT_SETTINGS = {settings!r}
BUILD_TIME = {build_time!r}  # the bug is in the parser or builder: judged without a GPU too
ORT_SETTINGS = {{}}


{shared}
{child}

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


def gpu_missing():
    """Why the engine cannot run here (no cuda-python, no GPU), or None."""
    try:
        cudart = find_cudart()
    except ImportError:
        return "cuda-python is not installed (pip install cuda-python)"
    try:
        count = cuda_check(cudart.cudaGetDeviceCount())
    except Exception as e:  # no driver, no device
        return f"no CUDA GPU is visible here ({{e}})"
    return None if count else "no CUDA GPU is visible here"


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
    try:
        inputs, expected, meta = load_npz(NPZ_FILE)
    except Exception as e:  # the .npz is gone or unreadable: no news about the bug
        print(f"SKIPPED: cannot run: {{type(e).__name__}}: {{e}}")
        return 2
    meta["output_names"] = {output_names!r}
    dtypes = [item["dtype"] for item in meta["expected"]]
    announce_call()
    try:
        if os.environ.get("TRTMIN_BACKEND") == "onnxruntime":
            actual = run_reference(inputs, meta)
        else:
            trt = import_tensorrt()
            cannot = gpu_missing()
            if cannot and not trt.__name__.startswith("tensorrt_rtx"):  # only TensorRT-RTX builds without a GPU
                print(f"SKIPPED: {{tensorrt_name(trt)}} needs a GPU: {{cannot}}")
                return 2
            plan = build_plan(trt, ONNX_FILE, TRT_SETTINGS)  # TensorRT-RTX parses and builds without a GPU
            if cannot and BUILD_TIME:
                print(f"FIXED: {{tensorrt_name(trt)}} parsed and built the engine without the error (not run: {{cannot}})")
                return 0
            if cannot:
                print(f"SKIPPED: {{tensorrt_name(trt)}} built the engine; running it needs a GPU: {{cannot}}")
                return 2
            actual = run_tensorrt(trt, plan, inputs, meta)
    except Exception as e:  # TensorRT failed: is it the same failure?
        text = exception_text(e)
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        if ORACLE in ("crash", "oom") and (not ERROR_PATTERN or re.search(ERROR_PATTERN, text)):
            print(f"REPRODUCED: {{type(e).__name__}}: {{first}}")
            return 1
        print(f"CHANGED: fails differently now: {{type(e).__name__}}: {{first}}")
        return 3
    reproduced, message = compare_outputs_np(expected, actual, dtypes, ORACLE, ATOL, RTOL, meta["exact_arrays"],
                                             ERROR_RATIO)
    if reproduced is None:
        print(f"CHANGED: fails differently now: {{message}}")
        return 3
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


def missing_requirements():
    """Why this cannot run here, or None (the GPU is asked for after the build)."""
    reference = os.environ.get("TRTMIN_BACKEND") == "onnxruntime"
    needed = ["numpy"] + (["onnxruntime"] if reference else ["tensorrt|tensorrt_rtx"])
    for name in needed:
        if not any(importlib.util.find_spec(n) for n in name.split("|")):
            return f"{{name.replace('|', ' or ')}} is not installed"
    return None


def main():
    reason = missing_requirements()
    if reason:
        print(f"SKIPPED: {{reason}}")
        return 2
    if os.environ.get("TRTMIN_CHILD"):
        return run()
    return run_in_child()  # TensorRT may abort, segfault or hang


if __name__ == "__main__":
    sys.exit(main())
'''


def write_tensorrt_script(out_dir: Path, onnx_path: Path, inputs: Sequence[Any] | Mapping[str, Any],
                          expected: Sequence[Any], oracle: str, atol: float, rtol: float, header: str, *,
                          error_pattern: str = "", timeout: float = 600.0,
                          settings: Mapping[str, Any] | None = None, exact: Sequence[Any] | None = None,
                          build_time: bool = False) -> Path:
    """Write repro_tensorrt.py, model.onnx (+ its external data) and repro_tensorrt.npz.

    inputs: the candidate's inputs in placeholder order (the ONNX file's trtmin metadata
    says which feed the model), or a list in ONNX input order, or {ONNX input name: value}.
    expected: eager PyTorch's flattened outputs. settings: the tensorrt backend's parsed
    build settings (TensorRTBackend.build_settings), so the script builds the same way.
    error_pattern: regex for crash/oom (oracles.script_checks.error_pattern). exact: the
    float64 run's outputs, with --reference float64 (oracles/reference.py). build_time: the
    bug is a parser or builder failure, which the script judges without a GPU too.
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
    save_npz(out_dir / NPZ_NAME, named, expected, exact)
    shared = "\n\n".join([
        script_source(TensorRTError, import_tensorrt, tensorrt_name, tensorrt_said, build_plan, load_plan, engine_io),
        script_source(ort_session, run_onnxruntime),
        script_source(load_npz, as_float64, error_ratio_np, compare_outputs_np),
    ])
    text = SCRIPT.format(
        header=header.replace('"""', "'''").strip(), script=SCRIPT_NAME, onnx=ONNX_NAME, npz=NPZ_NAME,
        onnx_files=", ".join(copied), oracle=oracle, atol=atol, rtol=rtol, error_ratio=ERROR_RATIO,
        error_pattern=error_pattern,
        timeout=timeout, settings=dict(settings or {}), build_time=build_time, shared=shared,
        build_words=("\nThe bug is in the parser or builder: without a GPU the script still judges it."
                     if build_time else ""), child=CHILD_SOURCE, output_names=output_names)
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
