"""A compact, fast serialization of an ATen fx.Graph for the worker processes.

torch.export.save/load of a 5,000-node program takes tens of seconds; workers only need
the nodes (name, op, target, args) and each node's source stack, so this writes exactly
that. The stack is the one piece of metadata kept: a compiler that exports the slice again
(Torch-TensorRT, torch.onnx) carries it into its error, which is how trtmin tells which of
several nodes of one op failed (minimize/search/localize.py). Targets are stored by name
(aten::add.Tensor, operator.getitem), as are ops passed as arguments: never as pickled code.
"""

from __future__ import annotations

import importlib
import pickle
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx


@dataclass(frozen=True)
class NodeRef:
    name: str


@dataclass(frozen=True)
class OpRef:
    """An op passed as an argument (auto_functionalized's mutating custom op), by name: a
    custom op's OpOverload does not pickle."""
    code: tuple[str, ...]


def _encode_arg(a: Any) -> Any:
    if isinstance(a, fx.Node):
        return NodeRef(a.name)
    if isinstance(a, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        return OpRef(_encode_target(a))
    return a


def _encode_target(target: Any) -> tuple[str, ...]:
    if isinstance(target, torch._ops.OpOverload):
        return ("op", target._schema.name, target._overloadname)
    if isinstance(target, str):
        return ("str", target)
    if isinstance(target, torch._ops.HigherOrderOperator):  # auto_functionalized, with_effects: no __qualname__
        return ("hop", target.__name__)
    return ("py", target.__module__, target.__qualname__)


def _decode_target(code: tuple[str, ...]) -> Any:
    kind = code[0]
    if kind == "str":
        return code[1]
    if kind == "hop":
        return getattr(torch.ops.higher_order, code[1])
    if kind == "op":
        ns, name = code[1].split("::")
        try:
            packet = getattr(getattr(torch.ops, ns), name)
        except AttributeError:
            raise RuntimeError(f"the program uses the custom op {code[1]}, which nothing imported in the worker "
                               "registers; pass --import MODULE with the library that defines it") from None
        return getattr(packet, code[2] or "default")
    obj: Any = importlib.import_module(code[1])
    for part in code[2].split("."):
        obj = getattr(obj, part)
    return obj


def dumps(graph: fx.Graph) -> bytes:
    records = [(n.op, n.name, _encode_target(n.target), fx.node.map_aggregate(n.args, _encode_arg),
                fx.node.map_aggregate(n.kwargs, _encode_arg), n.meta.get("stack_trace"))
               for n in graph.nodes]
    return pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> fx.Graph:
    graph = fx.Graph()
    env: dict[str, fx.Node] = {}

    def resolve(a: Any) -> Any:
        return env[a.name] if isinstance(a, NodeRef) else _decode_target(a.code) if isinstance(a, OpRef) else a

    for op, name, target, args, kwargs, stack in pickle.loads(data):  # our own file, in our temp dir
        args = fx.node.map_aggregate(args, resolve)
        kwargs = fx.node.map_aggregate(kwargs, resolve)
        node = graph.create_node(op, _decode_target(target), args, kwargs, name=name)
        node.name = name  # fx renames a builtin's name (`input` -> `input_1`); export keeps it, and so must we
        if stack:
            node.meta["stack_trace"] = stack
        env[name] = node
    return graph
