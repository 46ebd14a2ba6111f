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
