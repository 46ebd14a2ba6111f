"""A float64 run of the same program: how far eager PyTorch itself is from the exact answer.

A bf16 or fp16 program rounds at every op, so a backend that rounds elsewhere (fused
kernels, float32 accumulation) differs from eager by more than any fixed atol while being
no worse. Our users measure such programs as multiples of eager's own error ("0.7x to 1.8x
eager's own spread"). With `--reference float64` a mismatch counts only where the backend
is further from a float64 run of the same program than eager is, by more than ERROR_RATIO
(by root mean square, or by the worst value: a bug in a few values of a large output moves
no mean). PyTorch's accuracy minifier judges against an fp64 reference the same way, by
root mean square alone (torch._dynamo.utils.same, fp64_ref, multiplier 2).

The float64 run casts, under a TorchFunctionMode, every floating-point tensor an op reads
to float64 (complex: complex128) and every floating dtype an op is asked for, so the
program's own casts (autocast's, a `.to(torch.bfloat16)`) do not round it. The class is
written into repro.py as it is here (inspect.getsource): the script judges as trtmin did.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import torch

ERROR_RATIO = 2.0  # how many times eager's own error a backend may be off before it is a bug


class Float64(torch.overrides.TorchFunctionMode):
    """Every torch call inside runs in float64 (complex128): the floating-point tensors it
    reads and the floating dtypes it is asked for are widened; integers are left alone. A
    tensor made without a dtype (torch.full(..., 0.1), an integer's true division) is float64
    too: the default dtype is float64 inside."""

    def __enter__(self):  # noqa: ANN204
        self.default_dtype = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        return super().__enter__()

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        torch.set_default_dtype(self.default_dtype)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        def widen(x):  # noqa: ANN001, ANN202
            if isinstance(x, torch.Tensor):
                return x.to(torch.complex128) if x.is_complex() else x.to(torch.float64) if x.is_floating_point() else x
            if isinstance(x, torch.dtype):
                return torch.complex128 if x.is_complex else torch.float64 if x.is_floating_point else x
            if type(x) in (list, tuple):
                return type(x)(widen(v) for v in x)
            if type(x) is dict:
                return {k: widen(v) for k, v in x.items()}
            return x
        kwargs = kwargs or {}
        if str(func) in ("aten.view.dtype", "aten.view_copy.dtype") or (
                func is torch.Tensor.view and len(args) == 2 and isinstance(args[1], torch.dtype)):
            # reinterprets bits, which only the program's own dtypes have: an input's or a weight's
            # are as eager reads them; a value widened here has other bits and another size
            if args[0].dtype in (torch.float64, torch.complex128):
                raise NotImplementedError(f"the float64 run cannot reinterpret the bits of a widened value ({func})")
            return func(*args, **kwargs)
        return func(*widen(args), **widen(kwargs))


def float64_outputs(module: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    """What `module` returns on `inputs` when run in float64."""
    with torch.no_grad(), Float64():
        return module(*inputs)


def float64_source() -> str:
    """The class's source, for repro.py."""
    return inspect.getsource(Float64)


def error_ratio(e64: torch.Tensor, a64: torch.Tensor, r64: torch.Tensor) -> float | None:
    """The backend's error from the float64 run over eager's, by root mean square and by the
    worst value, whichever is larger (over the values where eager's error is finite). inf
    where eager is exact and the backend is not, or where the backend is infinitely off (a
    non-finite value the float64 run does not have, or a finite one where it has inf or NaN)
    and eager is not; None where eager is infinitely off everywhere."""
    def off(x):  # noqa: ANN001, ANN202 - |x - r64|: 0 where both are the same inf or both NaN, inf where one is finite
        same = (x == r64) | (x.isnan() & r64.isnan())
        d = (x - r64).abs().nan_to_num(float("inf"), float("inf"), float("inf"))
        return torch.where(same, torch.zeros_like(d), d)
    eager_off, backend_off = off(e64), off(a64)
    judged = torch.isfinite(eager_off)  # where eager overflowed and float64 did not, the backend cannot be worse
    if bool((~torch.isfinite(backend_off) & judged).any()):
        return float("inf")
    if not bool(judged.any()):
        return None
    ratios = []
    for norm in (lambda d: d.pow(2).mean().sqrt(), lambda d: d.max()):  # the spread, and the worst value
        eager, backend = float(norm(eager_off[judged])), float(norm(backend_off[judged]))
        ratios.append((0.0 if backend == 0.0 else float("inf")) if eager == 0.0 else backend / eager)
    return max(ratios)  # the worst value too: a bug in a few values of a large output moves no mean
