"""A small engine-building compiler with partitions and op fallback, like Torch-TensorRT.

Every op has a "converter" except aten.relu, which splits the graph into engines (maximal
runs of converted ops, at least `min_block_size` long). `torch_executed_ops` (a comma-
separated list of op names) forces op types to PyTorch. The planted bug: the softmax
converter is wrong when the non-default `fast_softmax=True` is set. Other settings
(optimization_level, workspace_mb) change nothing. A second bug, in a lowering pass that
rewrites the whole graph before any op is converted (as Torch-TensorRT's
force_causal_efficient_attention does): with `tanh_as_sigmoid=True`, the default, every
tanh becomes a sigmoid, whether or not tanh is forced to PyTorch.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch.fx import GraphModule, Interpreter, Node

aten = torch.ops.aten
OP_FALLBACK_SETTING = "torch_executed_ops"
LOWERING_TOGGLES = (("tanh_as_sigmoid", "false"),)
NO_CONVERTER = {aten.relu.default}
SOFTMAX = {aten.softmax.int, aten._softmax.default}


def _fallback(torch_executed_ops: Any) -> set[str]:
    return {s for s in str(torch_executed_ops or "").split(",") if s}


def _converted(n: Node, fallback: set[str]) -> bool:
    return n.op == "call_function" and n.target not in NO_CONVERTER and str(n.target) not in fallback


def partitions(gm: GraphModule, example_inputs: list[Any], torch_executed_ops: Any = "", min_block_size: int = 1,
               **_: Any) -> list[list[str]]:
    fallback = _fallback(torch_executed_ops)
    engines: list[list[str]] = [[]]
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if _converted(n, fallback):
            engines[-1].append(n.name)
        elif engines[-1]:
            engines.append([])
    return [e for e in engines if len(e) >= int(min_block_size)]


def compile(gm: GraphModule, example_inputs: list[Any], torch_executed_ops: Any = "", min_block_size: int = 1,
            fast_softmax: bool = False, optimization_level: int = 3, workspace_mb: int = 1024,
            tanh_as_sigmoid: bool = True) -> Callable[..., Any]:
    fallback = _fallback(torch_executed_ops)
    if tanh_as_sigmoid:  # the lowering pass: before partitioning, so fallback cannot undo it
        gm = copy.deepcopy(gm)
        for n in gm.graph.nodes:
            if n.target == aten.tanh.default:
                n.target = aten.sigmoid.default
        gm.recompile()

    class Engine(Interpreter):
        def run_node(self, n: Node) -> Any:
            out = super().run_node(n)
            if n.target in SOFTMAX and fast_softmax and _converted(n, fallback):
                x = self.env[n.args[0]] if isinstance(n.args[0], Node) else n.args[0]
                return torch.softmax(x * 0.5, n.args[1])  # the converter's bug
            return out

    return lambda *args: Engine(gm).run(*args)
