"""Backend registry: a `--backend` string to a Backend object.

Backends whose packages may be missing (torch_tensorrt, tensorrt, onnxruntime,
executorch) import them only when they compile; `resolve()` checks they are installed
(importlib.util.find_spec, no import) and raises MissingPackageError with the install
line, so `trtmin --help` and the other backends work without them.
"""

from __future__ import annotations

from typing import Any

from oracles.backends.base import Backend, ScriptPart
from oracles.backends.command import PREFIX as COMMAND_PREFIX
from oracles.backends.command import CommandBackend
from oracles.backends.eager import EagerBackend
from oracles.backends.executorch import VARIANTS as EXECUTORCH_VARIANTS
from oracles.backends.executorch import ExecuTorchBackend
from oracles.backends.inductor import InductorBackend
from oracles.backends.onnxruntime import OnnxRuntimeBackend
from oracles.backends.plugin import PluginBackend, is_plugin_spec
from oracles.backends.tensorrt import TensorRTBackend
from oracles.backends.torch_tensorrt import TorchTensorRTBackend
from oracles.errors import TrtminError

BUILTIN: dict[str, type[Backend]] = {
    "eager": EagerBackend,
    "inductor": InductorBackend,
    "torch_tensorrt": TorchTensorRTBackend,
    "tensorrt": TensorRTBackend,
    "onnxruntime": OnnxRuntimeBackend,
    **{f"executorch:{v}": ExecuTorchBackend for v in EXECUTORCH_VARIANTS},
}

__all__ = ["Backend", "ScriptPart", "resolve", "BUILTIN"]


def resolve(spec: str, settings: dict[str, Any] | None = None) -> Backend:
    # Built-in names first: "executorch:xnnpack" has a ':' like a plugin spec.
    if spec in BUILTIN:
        cls = BUILTIN[spec]
        check = getattr(cls, "check_available", None)
        if check is not None:
            check(spec)  # MissingPackageError / TrtminError, one line
        return cls(spec, settings)
    if spec.startswith("executorch:"):
        raise TrtminError(f"unknown backend {spec!r}; ExecuTorch backends are "
                          + ", ".join(f"executorch:{v}" for v in EXECUTORCH_VARIANTS))
    if spec.startswith(COMMAND_PREFIX):  # before plugins: a command line may hold a ':'
        return CommandBackend(spec, settings)
    if is_plugin_spec(spec):
        return PluginBackend(spec, settings)
    names = ", ".join(sorted(BUILTIN))
    raise TrtminError(f"unknown backend {spec!r}; use one of {names}, a plugin path/to/file.py:function, or "
                      "an external command 'cmd:... {model} ...'")
