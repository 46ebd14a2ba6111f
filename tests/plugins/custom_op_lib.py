"""A library that registers a custom op, as NATTEN or a user's own kernels do: programs
using it load only where it is imported (trtmin --import tests.plugins.custom_op_lib)."""

from __future__ import annotations

import torch


@torch.library.custom_op("trtmin_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("trtmin_test::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, s: float) -> None:
    """A custom op that mutates its input: the exported program calls it through
    auto_functionalized, which takes the op as an argument."""
    x.mul_(s)
