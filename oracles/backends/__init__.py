"""Backend registry: a `--backend` string to a Backend object.

Backends whose packages may be missing (torch_tensorrt, tensorrt, onnxruntime,
executorch) import them only when they compile; `resolve()` checks they are installed
(importlib.util.find_spec, no import) and raises MissingPackageError with the install
line, so `trtmin --help` and the other backends work without them.
"""

from __future__ import annotations

from typing import Any

from oracles.backends.base import Backend, ScriptPart
from oracles.backends.command import CommandBackend
from oracles.backends.eager import EagerBackend
from oracles.backends.executorch import ExecuTorchBackend
from oracles.backends.inductor import InductorBackend
from oracles.backends.onnxruntime import OnnxRuntimeBackend
from oracles.backend_names import BUILTIN_NAMES, EXECUTORCH_VARIANTS, parse_backend
from oracles.backends.plugin import PluginBackend
from oracles.backends.tensorrt import TensorRTBackend
from oracles.backends.torch_tensorrt import TorchTensorRTBackend

BUILTIN: dict[str, type[Backend]] = {
    "eager": EagerBackend,
    "inductor": InductorBackend,
    "torch_tensorrt": TorchTensorRTBackend,
    "tensorrt": TensorRTBackend,
    "onnxruntime": OnnxRuntimeBackend,
    **{f"executorch:{v}": ExecuTorchBackend for v in EXECUTORCH_VARIANTS},
}
assert tuple(BUILTIN) == BUILTIN_NAMES  # the torch-free list the CLI checks with

__all__ = ["Backend", "ScriptPart", "resolve", "BUILTIN"]


def resolve(spec: str, settings: dict[str, Any] | None = None) -> Backend:
    # Built-in names first: "executorch:xnnpack" has a ':' like a plugin spec.
    if spec in BUILTIN:
        cls = BUILTIN[spec]
        check = getattr(cls, "check_available", None)
        if check is not None:
            check(spec)  # MissingPackageError / TrtminError, one line
        return cls(spec, settings)
    # An unknown name is refused as the CLI refuses it before anything starts; a command
    # line may hold a ':' and is no plugin.
    if parse_backend(spec).kind == "command":
        return CommandBackend(spec, settings)
    return PluginBackend(spec, settings)
