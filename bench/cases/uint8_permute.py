"""Shape op on a uint8 engine input fails to convert: "Could not get tensor shape".

User-documented Torch-TensorRT failure: camera frames arrive as HWC uint8; the graph stacks
and permutes them to NCHW *before* casting to float. A shape op (permute / stack / view /
...) whose operand is a uint8 network input makes the converter fail with
``RuntimeError: Could not get tensor shape.`` (uint8 is only a legal I/O type, so no shape
tensor can be taken from it). Casting first, or feeding float inputs, avoids it.

Planted mechanism: a shape op whose tensor operand is a uint8 graph input (placeholder)
raises. Under cut-to-input, a cut uint8 intermediate is also a uint8 graph input, which is
realistic: that is what a sub-engine boundary at that point would look like.

Core under cut-to-input: 1 node (the stack, or the permute with its uint8 operand as input).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "crash"
MATCH = r"Could not get tensor shape"
CORE = 1

aten = torch.ops.aten
_SHAPE_OPS = {aten.permute, aten.transpose, aten.view, aten.reshape, aten._unsafe_view, aten.expand,
              aten.stack, aten.cat, aten.unsqueeze, aten.squeeze, aten.flatten, aten.unflatten,
              aten.t, aten.unbind, aten.split, aten.movedim}


class CameraEncoder(nn.Module):
    """Two HWC uint8 camera frames -> normalized NCHW -> shared small CNN -> fused embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.cnn = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fuse = nn.Linear(2 * 16, 16)

    def forward(self, front: torch.Tensor, rear: torch.Tensor) -> torch.Tensor:
        x = torch.stack([front, rear]).permute(0, 3, 1, 2)  # [2, 3, H, W] still uint8
        x = (x.float() / 255.0 - self.mean) / self.std
        return self.fuse(self.cnn(x).reshape(1, -1))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    frames = tuple(torch.randint(0, 256, (32, 48, 3), dtype=torch.uint8) for _ in range(2))
    return CameraEncoder().eval(), frames


# ---------------------------------------------------------------- planted-bug plugin
class _ShapeOfUint8Interpreter(Interpreter):
    def __init__(self, gm: GraphModule, uint8_inputs: set[Node]) -> None:
        super().__init__(gm)
        self.uint8_inputs = uint8_inputs

    def run_node(self, n: Node) -> Any:
        packet = getattr(n.target, "overloadpacket", None)
        if n.op == "call_function" and packet in _SHAPE_OPS and set(n.all_input_nodes) & self.uint8_inputs:
            raise RuntimeError("Could not get tensor shape.")
        return super().run_node(n)


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    uint8 = {p for p, t in zip(placeholders, example_inputs) if isinstance(t, torch.Tensor) and t.dtype == torch.uint8}
    return lambda *args: _ShapeOfUint8Interpreter(gm, uint8).run(*args)
