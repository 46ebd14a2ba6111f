"""The TensorRT-only repro script: `repro_tensorrt.py` (TensorRT or TensorRT-RTX + numpy +
cuda-python, no torch) beside the candidate's `model.onnx` and an `.npz` of its inputs and
eager's reference outputs. Without a GPU it still parses and builds, so a parser or builder
bug is judged on any machine; a bug that needs the engine run says SKIPPED there.

The script carries the source of `build_plan` (oracles/backends/tensorrt.py), so it
builds what trtmin checked, and of only the parts its bug needs (its run and main are the
tagged functions of oracles/backends/tensorrt_script_run.py). With
TRTMIN_BACKEND=onnxruntime (or eager, the word the suite's control uses) it runs the same
ONNX file on ONNX Runtime, which validates the reference half where TensorRT is absent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from oracles.backends.onnx_export import external_data_files, numpy_of, read_onnx_io, script_source
from oracles.backends.onnxruntime import ort_session, run_onnxruntime
from oracles.backends.tensorrt import (ONNX_NAME, TensorRTError, build_plan, engine_io, import_tensorrt, load_plan,
                                       tensorrt_name, tensorrt_said)
from oracles.errors import TrtminError
from oracles.out_folder import replace_from_temporary
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
        arrays[f"input_{k}"] = numpy_of(t)
        meta["inputs"].append({"name": name, "dtype": str(t.dtype).removeprefix("torch.")})
    for i, value in enumerate(expected):
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value)
        arrays[f"expected_{i}"] = numpy_of(t)
        meta["expected"].append({"dtype": str(t.dtype).removeprefix("torch.")})
    arrays["meta"] = np.array(json.dumps(meta))
    replace_from_temporary(path, lambda tmp: np.savez(tmp, **arrays), ".tmp.npz")


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
    """The .npz back as torch tensors with their dtypes (the tests read what trtmin wrote)."""
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
    worst, nan = None, ""
    for i, (e, a) in enumerate(zip(expected, actual)):
        e64, a64 = as_float64(e, dtypes[i]), as_float64(a, dtypes[i])
        if e64.shape != a64.shape:
            if oracle == "mismatch":
                return True, f"output {i} has shape {a64.shape}, eager {e64.shape}"
            continue
        e_finite, a_finite = np.isfinite(e64), np.isfinite(a64)
        lost = e_finite & ~a_finite
        if lost.any() and oracle == "nan":
            return True, f"output {i} has {int(lost.sum())} non-finite values where eager is finite"
        if lost.any() and oracle == "mismatch":  # a nan to trtmin: another failure, where no output is off
            nan = nan or f"output {i} has {int(lost.sum())} non-finite values where eager is finite"
            continue
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
        r64 = np.asarray(exact[i]) if exact is not None and i < len(exact) else None  # [float64]
        if bad.any() and floating and r64 is not None and r64.shape == e64.shape:  # [float64] another shape: eager alone
            ratio = error_ratio_np(e64, a64, r64)  # [float64]
            if ratio is not None and ratio <= error_ratio:  # [float64]
                continue  # [float64] no further from the float64 run than eager's own rounding
            if ratio is not None:  # [float64]
                note = (", where eager matches the float64 run" if ratio == float("inf")  # [float64]
                        else f", {ratio:.3g}x eager's own error from float64")  # [float64]
        if bad.any() and (worst is None or float(diff.max()) > worst[1]):
            worst = (i, float(diff.max()), int(bad.sum()), note)
    if oracle == "nan":
        return False, "no non-finite values where eager is finite"
    if oracle != "mismatch":
        return False, "built and ran without error"
    if worst is None and nan:
        return None, nan
    if worst is None:
        within = f" (or is off it by at most {error_ratio:g}x eager's own error from float64)" if exact is not None else ""
        return False, f"the backend matches eager PyTorch{within}"
    i, err, n, note = worst
    return True, f"output {i} differs from eager by max abs {err:.4g} ({n} values off{note})"


SCRIPT = '''"""{header}

TensorRT-only repro: needs TensorRT (module tensorrt, or tensorrt_rtx for TensorRT-RTX) and
numpy, no torch. {needs}
Files beside it: {onnx_files}, {npz} (inputs and eager PyTorch's outputs).

Run:      python {script}
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package),
          3 = fails differently now
Control:  TRTMIN_BACKEND=onnxruntime python {script}   (or =eager, as for repro.py)
          runs the same ONNX file on onnxruntime (CPU) in place of TensorRT; it must print FIXED
          (SKIPPED where ONNX Runtime cannot run the model: no kernel for a bf16 op)
"""

{imports}

HERE = pathlib.Path(__file__).resolve().parent
ONNX_FILE = HERE / {onnx!r}
ONNX_FILES = [HERE / name for name in {onnx_names!r}]  # the model and its external data
NPZ_FILE = HERE / {npz!r}
OUTPUT_NAMES = {output_names!r}  # the ONNX model's, in order
TRT_SETTINGS = {settings!r}
CONTROL = ("onnxruntime", "eager")  # TRTMIN_BACKEND values that run ONNX Runtime in place of TensorRT
{constants}'''

# what the child's functions (oracles/script_child.py) read beside ERROR_PATTERN
CHILD_CONSTANTS = '''CHILD_TIMEOUT_S = {timeout!r}
HANG_VERDICT = ((f"REPRODUCED: no result within {{CHILD_TIMEOUT_S:g}} s (hang)", 1) if ORACLE == "hang"
                else ("CHANGED: hangs now", 3))
DEATH_PATTERN = (ERROR_PATTERN or ".") if ORACLE == "crash" else "$^"  # how the reduced bug ended the process'''


def write_tensorrt_script(out_dir: Path, onnx_path: Path, inputs: Sequence[Any] | Mapping[str, Any],
                          expected: Sequence[Any], oracle: str, atol: float, rtol: float, header: str, *,
                          error_pattern: str = "", timeout: float = 600.0,
                          settings: Mapping[str, Any] | None = None, exact: Sequence[Any] | None = None,
                          build_time: bool = False, child: bool) -> Path:
    """Write repro_tensorrt.py, model.onnx (+ its external data) and repro_tensorrt.npz.

    inputs: the candidate's inputs in placeholder order (the ONNX file's trtmin metadata
    says which feed the model), or a list in ONNX input order, or {ONNX input name: value}.
    expected: eager PyTorch's flattened outputs. settings: the tensorrt backend's parsed
    build settings (TensorRTBackend.build_settings), so the script builds the same way.
    error_pattern: regex for crash/oom (oracles.script_checks.error_pattern). exact: the
    float64 run's outputs, with --reference float64 (oracles/reference.py). build_time: the
    bug is a parser or builder failure, which the script judges without a GPU too. child:
    the bug ends or hangs the process (ReproInfo.needs_subprocess), so the script runs it
    in a child.
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
    dtypes = [str(getattr(v, "dtype", "")) for v in (*named.values(), *expected)]
    on = {name for name, wanted in {
        "build": build_time, "run": not build_time, "values": oracle in ("mismatch", "nan"),
        "failure": oracle in ("crash", "oom"), "float64": exact is not None,
        "child": child,
        "bf16": "torch.bfloat16" in dtypes}.items() if wanted}
    text = _script_text(on, header=header, onnx_files=copied, oracle=oracle, atol=atol, rtol=rtol,
                        error_pattern=error_pattern, timeout=timeout, settings=dict(settings or {}),
                        output_names=output_names)
    script = out_dir / SCRIPT_NAME
    replace_from_temporary(script, lambda tmp: tmp.write_text(text))
    return script


def _script_text(on: set[str], *, header: str, onnx_files: list[str], oracle: str, atol: float, rtol: float,
                 error_pattern: str, timeout: float, settings: dict[str, Any], output_names: list[str]) -> str:
    """repro_tensorrt.py with only the parts its bug needs (`on`: the tags of
    oracles/backends/tensorrt_script_run.py): no engine run for a parser or builder bug, no
    comparison for a crash, no child process unless the bug ends or hangs the process. Its
    run() comes first, after the constants: what it builds, runs and judges, in 30 lines."""
    from oracles.backends import tensorrt_script_run as main_part
    from oracles.script_checks import tagged_source

    pasted = [tagged_source(main_part.run, on),  # first: the top of the script shows the whole flow
              script_source(TensorRTError, import_tensorrt, tensorrt_name, tensorrt_said).rstrip() + "\n\n\n"
              + tagged_source(build_plan, {k for k, v in settings.items() if v is not None})]
    if "run" in on:
        pasted.append(script_source(load_plan, engine_io))
    pasted.append(script_source(load_npz))
    if "values" in on:
        pasted.append(script_source(as_float64, *([error_ratio_np] if "float64" in on else [])).rstrip() + "\n\n\n"
                      + tagged_source(compare_outputs_np, on))
    if "child" in on:
        pasted.append(CHILD_SOURCE)
    pasted.append(script_source(main_part.find_cudart, main_part.cuda_check, main_part.gpu_missing,
                                main_part.driver_gpu_missing))
    if "run" in on:
        pasted.append(script_source(main_part.run_tensorrt))
    if "bf16" in on:
        pasted.append(script_source(ort_session, run_onnxruntime))
    pasted.append(tagged_source(main_part.run_reference, on))
    if "failure" in on:
        pasted.append(script_source(main_part.exception_text))
    pasted += [tagged_source(fn, on) for fn in (main_part.missing_requirements, main_part.main)]
    imports = ["json", "os", "pathlib", "sys", *(["re"] if on & {"failure", "child"} else []),
               *(["subprocess"] if "child" in on else [])]
    constants = [
        *([f"ORACLE = {oracle!r}"] if on & {"values", "child"} else []),  # what compare_outputs_np and the child read
        *([f"ATOL, RTOL = {atol!r}, {rtol!r}", f"ERROR_RATIO = {ERROR_RATIO!r}  # with a float64 run in the .npz: "
           "how far past eager's own error from it is a bug"] if "values" in on else []),
        *([f"ERROR_PATTERN = {error_pattern!r}  # the failure's text, as a regex"] if on & {"failure", "child"} else []),
        *([CHILD_CONSTANTS.format(timeout=timeout)] if "child" in on else [])]
    needs = ("A parser or builder bug: it builds and stops there (TensorRT-RTX builds without a GPU; NVIDIA's "
             "TensorRT needs one)." if "build" in on else
             "Running the engine needs cuda-python and an NVIDIA GPU.")
    head = SCRIPT.format(header=header.replace('"""', "'''").strip(), needs=needs, script=SCRIPT_NAME,
                         onnx_files=", ".join(onnx_files), onnx_names=onnx_files, npz=NPZ_NAME, onnx=ONNX_NAME,
                         imports="\n".join(f"import {m}" for m in sorted(imports)), output_names=output_names,
                         settings=settings, oracle=oracle, constants="\n".join(constants))
    body = "\n\n\n".join(part.strip() for part in pasted)
    return head.rstrip() + "\n\n\n" + body + '\n\n\nif __name__ == "__main__":\n    sys.exit(main())\n'


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
    replace_from_temporary(dst, lambda tmp: shutil.copyfile(src, tmp))
