"""The backend names trtmin knows, torch-free: the CLI checks a --backend before any worker
starts or torch is imported (outside oracles/backends/, whose package imports every
backend), and the registry (oracles/backends/__init__.py) refuses an
unknown one with the same words."""

from __future__ import annotations

from oracles.errors import TrtminError

EXECUTORCH_VARIANTS = ("xnnpack", "portable", "cuda", "tensorrt")
BUILTIN_NAMES = ("eager", "inductor", "torch_tensorrt", "tensorrt", "onnxruntime",
                 *(f"executorch:{v}" for v in EXECUTORCH_VARIANTS))
COMMAND_PREFIX = "cmd:"


def check_backend_name(spec: str) -> None:
    """A one-line error for a --backend that is neither a built-in name, an external
    command, nor a plugin spec (path/to/file.py:function or package.module:function)."""
    if spec in BUILTIN_NAMES or spec.startswith(COMMAND_PREFIX):
        return
    if spec.startswith("executorch:"):
        raise TrtminError(f"unknown backend {spec!r}; ExecuTorch backends are "
                          + ", ".join(f"executorch:{v}" for v in EXECUTORCH_VARIANTS))
    if ":" not in spec:  # a plugin spec has one: file.py:fn or module:fn
        raise TrtminError(f"unknown backend {spec!r}; use one of {', '.join(sorted(BUILTIN_NAMES))}, a plugin "
                          "path/to/file.py:function, or an external command 'cmd:... {model} ...'")
