"""What a built-in backend needs checked before torch loads, torch-free: the packages it
imports, and the `--set` settings of the backends whose options are trtmin's own lists
(tensorrt, onnxruntime, ExecuTorch's xnnpack, portable and cuda). The CLI calls
check_before_torch before any worker starts, so such a mistake is answered in a second,
not after torch's import (3 s); the backends (oracles/backends/) call the same functions
when they are made. Inductor's and Torch-TensorRT's options are the installed torch's and
torch_tensorrt's own: those are checked when the backend is made.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from typing import Any, Callable, Iterable

from oracles.errors import MissingPackageError, TrtminError

TORCH_TENSORRT_HINT = "install it with pip install torch-tensorrt (needs an NVIDIA GPU and CUDA)"
TENSORRT_MODULES = ("tensorrt", "tensorrt_rtx")  # NVIDIA's full TensorRT first, then TensorRT-RTX

ORT_KEYS = ("graph_optimization_level", "intra_op_num_threads", "opset")
OPT_LEVELS = ("disable", "basic", "extended", "all")
FLAG_SETTINGS = {"fp16": "FP16", "bf16": "BF16", "int8": "INT8", "fp8": "FP8", "tf32": "TF32",
                 "strict_nans": "STRICT_NANS"}
TRT_KEYS = (*FLAG_SETTINGS, "flags", "strongly_typed", "optimization_level", "workspace", "opset")
ET_KEYS = {"xnnpack": ("per_op_mode",), "portable": (), "cuda": (), "tensorrt": None}  # None: Torch-TensorRT's
# (lowest, highest, why) of the integer settings. TensorRT's builder optimization levels:
# 9 is taken as 5 without a word, -1 with an error in its log only (TensorRT-RTX 1.4.0.76),
# so a run would not be the one asked for; the workspace limit is a size_t, which a
# negative or larger number is a TypeError of set_memory_pool_limit (a traceback, exit 1)
RANGES = {"optimization_level": (0, 5, "it would use another level than the one asked for"),
          "workspace": (0, 2**64 - 1, "bytes, as a size_t")}


def unknown_key_error(key: str, valid: Iterable[str], backend: str, source: str = "") -> TrtminError:
    valid = list(valid)
    close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else f"; valid keys: {', '.join(sorted(valid))}"
    where = f" (checked against {source})" if source else ""
    return TrtminError(f"--set {key}: backend {backend} has no setting {key!r}{where}{hint}")


def as_bool(key: str, text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise TrtminError(f"--set {key}={text}: expected true or false")


def as_int(key: str, text: str) -> int:
    try:
        n = int(text.strip().replace("_", ""), 0)
    except ValueError:
        raise TrtminError(f"--set {key}={text}: expected an integer") from None
    low, high, why = RANGES.get(key, (n, n, ""))
    if not low <= n <= high:
        raise TrtminError(f"--set {key}={text}: TensorRT takes {low} to {high} ({why})")
    return n


def checked_opset(text: str, known_here: bool = True) -> int:
    """--set opset=N as an int, refused at once where ONNX here knows no such opset: the
    exporter would write another without a word, and every candidate would run on it.
    `known_here` False: the int alone (onnx's import, 1.2 s, is not worth it before the
    workers start; the backend asks again when it is made)."""
    try:
        opset = int(str(text).strip())
    except ValueError:
        raise TrtminError(f"--set opset={text}: expected an integer") from None
    if not known_here:
        return opset
    import onnx.defs

    newest = onnx.defs.onnx_opset_version()
    if not 1 <= opset <= newest:
        raise TrtminError(f"--set opset={text}: ONNX {onnx.__version__} here knows opsets 1 to {newest}; "
                          "torch.onnx.export writes the newer ones itself and converts down to older ones where "
                          "it can: pick one of those")
    return opset


def parse_ort_settings(settings: dict[str, Any] | None, backend: str = "onnxruntime",
                       opset_known_here: bool = True) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if key not in ORT_KEYS:
            raise unknown_key_error(key, ORT_KEYS, backend)
        text = str(value).strip()
        if key == "graph_optimization_level":
            level = text.lower().removeprefix("ort_").removeprefix("enable_").removesuffix("_all")
            if level not in OPT_LEVELS:
                raise TrtminError(f"--set {key}={text}: use one of {', '.join(OPT_LEVELS)}")
            parsed[key] = level
        elif key == "opset":
            parsed[key] = checked_opset(text, opset_known_here)
        else:
            try:
                parsed[key] = int(text)
            except ValueError:
                raise TrtminError(f"--set {key}={text}: expected an integer") from None
    return parsed


def parse_trt_settings(settings: dict[str, Any] | None, backend: str = "tensorrt",
                       opset_known_here: bool = True) -> dict[str, Any]:
    """--set strings -> {"builder_flags": {NAME: bool}, "strongly_typed", "optimization_level",
    "workspace", "opset"}: the form build_engine takes."""
    parsed: dict[str, Any] = {}
    flags: dict[str, bool] = {}
    for key, value in (settings or {}).items():
        text = str(value)
        if key not in TRT_KEYS:
            raise unknown_key_error(key, TRT_KEYS, backend)
        if key in FLAG_SETTINGS:
            flags[FLAG_SETTINGS[key]] = as_bool(key, text) if isinstance(value, str) else bool(value)
        elif key == "flags":
            items = value if isinstance(value, (list, tuple)) else text.split(",")
            for name in (str(n).strip().upper() for n in items):
                if name:
                    flags[name] = True
        elif key == "strongly_typed":
            parsed[key] = as_bool(key, text) if isinstance(value, str) else bool(value)
        elif key == "opset":
            parsed[key] = checked_opset(text, opset_known_here)
        else:
            parsed[key] = as_int(key, text) if isinstance(value, str) else int(value)
    if flags:
        parsed["builder_flags"] = flags
    return parsed


def parse_et_settings(spec: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """The settings of ExecuTorch's xnnpack, portable and cuda variants (each a flag);
    executorch:tensorrt takes Torch-TensorRT's, parsed by the backend."""
    valid = ET_KEYS[spec.partition(":")[2]]
    parsed: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if key not in valid:
            if not valid:
                raise TrtminError(f"--set {key}: backend {spec} takes no settings")
            raise unknown_key_error(key, valid, spec)
        parsed[key] = as_bool(key, value) if isinstance(value, str) else bool(value)
    return parsed


def torch_tensorrt_installed() -> bool:
    return importlib.util.find_spec("torch_tensorrt") is not None


def tensorrt_module_name() -> str | None:
    """The TensorRT import_tensorrt takes here: "tensorrt" (NVIDIA's, by its metadata),
    "tensorrt_rtx", or None. Torch-TensorRT built on TensorRT-RTX makes `tensorrt` an alias
    of tensorrt_rtx once it is imported, so a `tensorrt` module alone says nothing."""
    from oracles.environment import NOT_INSTALLED, package_version

    if package_version("tensorrt") != NOT_INSTALLED and "tensorrt" not in sys.modules:
        return "tensorrt"
    if "tensorrt" in sys.modules:
        return sys.modules["tensorrt"].__name__.split(".")[0]
    return next((m for m in TENSORRT_MODULES if importlib.util.find_spec(m) is not None), None)


def pip_install(package: str) -> str:
    """`pip install 'executorch==1.4.*' (trtmin's extra executorch)`: the version trtmin's own
    extras pin (pyproject.toml; a bare `executorch` takes a release built for another torch),
    else the bare name."""
    import importlib.metadata
    try:
        requires = importlib.metadata.requires("trtmin") or []
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        requires = []
    for line in requires:
        wanted, _, extra = line.partition(";")
        name = re.split(r"[<>=!~ \[]", wanted.strip(), maxsplit=1)[0]
        if name == package and "extra ==" in extra:
            which = extra.split("==")[1].strip().strip("'\"")
            return f"pip install '{wanted.strip()}' (trtmin's pin; pip install -e '.[{which}]' in its checkout)"
    return f"pip install {package}"


JUDGED_WITHOUT_GPU = ("crash", "hang")  # what backend tensorrt judges without a GPU (its parser and builder)


def no_gpu_for_engine(oracle: str, seen: str) -> str:
    """Why backend tensorrt cannot judge `oracle` here (`seen`: "no GPU is visible here",
    where no driver shows; torch's word, where one does): the CLI's and the backend's words."""
    return (f"--oracle {oracle} needs the TensorRT engine run, and {seen}; without one, backend tensorrt only "
            "parses and builds: use --oracle crash for parser and builder failures, or run on a machine with an "
            "NVIDIA GPU")


def no_gpu_for_backend(spec: str, seen: str) -> str:
    """Why a backend that runs only on a GPU (executorch:cuda, executorch:tensorrt) cannot run here."""
    return f"backend {spec} needs an NVIDIA GPU, and {seen}; run on a GPU machine"


def check_onnx_export(spec: str) -> None:
    for module in ("onnx", "onnxscript"):
        if importlib.util.find_spec(module) is None:
            raise MissingPackageError(f"backend {spec} exports the candidate with torch.onnx, which needs the {module} "
                                      f"package, which is not installed here; install it with {pip_install(module)}")


def check_packages(spec: str) -> None:
    """MissingPackageError, one line, where a package built-in backend `spec` imports is not
    installed here (its GPU, where it needs one, is the backend's to ask: that takes torch)."""
    if spec == "torch_tensorrt" and not torch_tensorrt_installed():
        raise MissingPackageError(f"backend {spec} needs the torch_tensorrt package, which is not installed here; "
                                  f"{TORCH_TENSORRT_HINT}")
    if spec == "onnxruntime":
        if importlib.util.find_spec("onnxruntime") is None:
            raise MissingPackageError(f"backend {spec} needs the onnxruntime package, which is not installed here; "
                                      f"install it with {pip_install('onnxruntime')}")
        check_onnx_export(spec)
    if spec == "tensorrt":
        if tensorrt_module_name() is None:
            raise MissingPackageError(f"backend {spec} needs TensorRT, which is not installed here; install it with "
                                      f"pip install tensorrt (NVIDIA's TensorRT) or {pip_install('tensorrt-rtx')}")
        check_onnx_export(spec)
    if spec.startswith("executorch:"):
        if importlib.util.find_spec("executorch") is None:
            raise MissingPackageError(f"backend {spec} needs the executorch package, which is not installed here; "
                                      f"install it with {pip_install('executorch')}")
        if spec == "executorch:tensorrt" and not torch_tensorrt_installed():
            raise MissingPackageError(f"backend {spec} needs the torch_tensorrt package, which is not installed "
                                      f"here; {TORCH_TENSORRT_HINT}")
        if spec == "executorch:tensorrt" and importlib.util.find_spec("torch_tensorrt_executorch_runtime") is None:
            raise MissingPackageError(f"backend {spec} loads the .pte with Torch-TensorRT's ExecuTorch runtime, which "
                                      "is not installed here; install it with pip install "
                                      "torch-tensorrt-executorch-runtime (Torch-TensorRT >= 2.14)")


# The built-in backends whose settings are parsed here, before the workers start: (spec,
# settings) -> parsed, an opset checked as an int (its range is asked when the backend is made)
EARLY_PARSERS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "onnxruntime": lambda spec, settings: parse_ort_settings(settings, spec, opset_known_here=False),
    "tensorrt": lambda spec, settings: parse_trt_settings(settings, spec, opset_known_here=False),
    **{f"executorch:{v}": parse_et_settings for v, keys in ET_KEYS.items() if keys is not None},
}


def check_before_torch(spec: str, settings: dict[str, Any]) -> None:
    """A built-in backend's missing package, then a mistake in its settings where trtmin
    lists them: each refused as the backend itself refuses it, before torch is imported.
    Anything else (a plugin, a command, inductor's settings) is checked when it is made."""
    check_packages(spec)
    if settings and spec in EARLY_PARSERS:
        EARLY_PARSERS[spec](spec, settings)
