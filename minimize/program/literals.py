"""Small values as Python source: what repro.py writes inline (minimize/emit/script.py) and
what a shrunk small tensor is made by (minimize/search/passes/shapes.py)."""

from __future__ import annotations

import math
import struct
from typing import Any

import torch

from oracles.checks import shortest


def odd_nans(t: torch.Tensor) -> bool:
    """Whether a float tensor holds a NaN other than the one `nan` writes (a sign bit, a
    payload): a literal would lose it, and a compiler may read those bits."""
    if not t.is_floating_point() or t.layout != torch.strided:
        return False
    values = t.detach().cpu()
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    plain = torch.tensor(float("nan"), dtype=t.dtype).view(bits)
    return bool((values[values.isnan()].view(bits) != plain).any())


def tensor_literal(v: Any) -> str:
    """A small value as Python: a tensor as the nested lists of its shape (a 0-d one as its
    number: torch.tensor(80), not torch.tensor([80]).reshape(())), as a maintainer reads it.
    A float NaN of another sign or payload than `nan`'s, as its bits."""
    if isinstance(v, float) and math.isnan(v) and struct.pack("<d", v) != struct.pack("<d", float("nan")):
        return f"torch.tensor({struct.unpack('<q', struct.pack('<d', v))[0]}).view(torch.float64).item()"
    if not isinstance(v, torch.Tensor):
        return repr(v)
    if not v.numel():  # no values: only the shape says anything
        return f"torch.empty({tuple(v.shape)!r}, dtype={v.dtype})"
    values = v.detach().cpu().reshape(-1).tolist()
    if v.is_floating_point():  # a float32 0.1 as 0.1, not the 0.10000000149011612 it is as a double
        values = [shortest(x, v.dtype) for x in values]

    def nested(flat: list[Any], shape: tuple[int, ...]) -> str:
        if not shape:
            return repr(flat[0])
        step = len(flat) // shape[0]
        return "[" + ", ".join(nested(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"
    return f"torch.tensor({nested(values, tuple(v.shape))}, dtype={v.dtype})"
