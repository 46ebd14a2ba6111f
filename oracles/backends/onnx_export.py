"""Graph preparation shared by the export-based backends, and the ONNX export.

Two things every backend that re-exports a candidate needs:

* `freeze_constants`: trtmin's candidates take the program's parameters and buffers as
  graph inputs (placeholders named `p_*`, `b_*`, `c_*` by torch.export). A compiler
  sees those as runtime inputs, not weights, and behaves differently: XNNPACK does
  not fold a BatchNorm into a Linear whose weight is an input, TensorRT picks other
  kernels for a convolution with a dynamic weight. Freezing turns them back into
  constants of the module, as they were in the user's model. The same function is
  pasted into repro scripts (`FREEZE_SOURCE`), so the script freezes what was checked.
* `export_onnx`: `torch.onnx.export(..., dynamo=True)` of the frozen candidate, used by
  the tensorrt and onnxruntime backends. The ONNX graph's inputs are the runtime
  inputs only (frozen constants become initializers); `OnnxExport` says which
  candidate input feeds which ONNX input, and the mapping is also stored in the
  model's metadata so a script writer can recover it from the file alone.
"""

from __future__ import annotations

import ast
import inspect
import json
import logging
import re
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.fx as fx

# torch.export names lifted parameters p_*, buffers b_*, constant tensors c_*.
CONSTANT_PREFIXES = ("p_", "b_", "c_")
# A placeholder may carry this meta key (True/False) to override the name convention.
CONSTANT_META_KEY = "trtmin_constant"
METADATA_KEY = "trtmin.placeholders"


class OnnxExportError(RuntimeError):
    """torch.onnx.export failed on the candidate: the exporter's bug, not the runtime's."""


def is_constant_placeholder(node: fx.Node) -> bool:
    flag = node.meta.get(CONSTANT_META_KEY)
    if flag is not None:
        return bool(flag)
    return node.name.startswith(CONSTANT_PREFIXES)


def freeze_constants(gm: fx.GraphModule, inputs: Sequence[Any],
                     frozen: Sequence[str] | None = None) -> tuple[fx.GraphModule, list[Any], list[int]]:
    """Make the parameter/buffer placeholders of `gm` constants of a new module.

    Returns the new module, the inputs it still takes, and their positions in
    `inputs`. `frozen` names the placeholders to freeze (default: the p_/b_/c_
    convention, or the `trtmin_constant` meta flag where set). Only tensors are frozen.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        raise ValueError(f"the graph takes {len(placeholders)} inputs, {len(inputs)} were given")
    if frozen is None:
        to_freeze = {n.name for n, v in zip(placeholders, inputs)
                     if isinstance(v, torch.Tensor) and is_constant_placeholder(n)}
    else:
        to_freeze = set(frozen)
    if not to_freeze:
        return gm, list(inputs), list(range(len(inputs)))
    root = torch.nn.Module()
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    kept: list[int] = []
    position = {n: i for i, n in enumerate(placeholders)}
    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.name in to_freeze:
            value = inputs[position[node]]
            attr = f"frozen_{node.name}"
            tensor = value.detach().clone()
            if node.name.startswith("p_") and (tensor.is_floating_point() or tensor.is_complex()):
                root.register_parameter(attr, torch.nn.Parameter(tensor, requires_grad=False))
            else:
                root.register_buffer(attr, tensor)
            new = graph.get_attr(attr)
            new.meta = dict(node.meta)
            env[node] = new
        else:
            if node.op == "placeholder":
                kept.append(position[node])
            env[node] = graph.node_copy(node, lambda a: env[a])
    frozen_gm = fx.GraphModule(root, graph)
    frozen_gm.eval()
    return frozen_gm, [inputs[i] for i in kept], kept


class _DropAnnotations(ast.NodeTransformer):
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.returns = None
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            arg.annotation = None
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is None:
            return ast.Pass()
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def script_source(*functions: Any) -> str:
    """Module-level source of `functions` for a repro script: annotations dropped (the
    script has no `fx`, `Sequence`...), `fx.` spelled `torch.fx.`."""
    parts = []
    for fn in functions:
        tree = _DropAnnotations().visit(ast.parse(textwrap.dedent(inspect.getsource(fn))))
        parts.append(re.sub(r"(?<![\w.])fx\.", "torch.fx.", ast.unparse(ast.fix_missing_locations(tree))))
    return "\n\n\n".join(parts) + "\n"


# The script-side copy: the same functions, for repro scripts that import only torch.
FREEZE_SOURCE = (f"CONSTANT_PREFIXES = {CONSTANT_PREFIXES!r}\n"
                 f"CONSTANT_META_KEY = {CONSTANT_META_KEY!r}\n\n\n"
                 + script_source(is_constant_placeholder, freeze_constants))


@dataclass
class OnnxExport:
    path: Path
    input_names: list[str]        # ONNX graph inputs, in order
    input_positions: list[int]    # for each, its index in the candidate's input list
    output_names: list[str]
    placeholder_names: list[str]  # the candidate's inputs, frozen ones included

    def feeds(self, inputs: Sequence[Any]) -> dict[str, Any]:
        return {name: inputs[i] for name, i in zip(self.input_names, self.input_positions)}


def _quiet_export(module: torch.nn.Module, args: tuple[Any, ...], opset: int | None) -> Any:
    onnx_logger = logging.getLogger("torch.onnx")
    level = onnx_logger.level
    onnx_logger.setLevel(logging.ERROR)  # "torchvision is not installed" and the like
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.onnx.export(module, args, dynamo=True, opset_version=opset, verbose=False, report=False)
    finally:
        onnx_logger.setLevel(level)


def export_onnx(gm: fx.GraphModule, inputs: Sequence[Any], path: Path, *, opset: int | None = None,
                freeze: bool = True) -> OnnxExport:
    """Export the candidate to `path` (weights over 2 GB go to `<path>.data` beside it)."""
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    plain = [v.detach() if isinstance(v, torch.Tensor) else v for v in inputs]  # no nn.Parameter
    module, runtime_inputs, positions = freeze_constants(gm, plain) if freeze else (gm, plain, list(range(len(plain))))
    was_training = module.training
    module.eval()
    try:
        program = _quiet_export(module, tuple(runtime_inputs), opset)
    except Exception as e:  # the exporter raises many types
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        raise OnnxExportError(f"torch.onnx.export failed ({type(e).__name__}): "
                              + (lines[0][:300] if lines else "no message")) from e
    finally:
        module.train(was_training)
    runtime_names = [placeholders[i] for i in positions]
    input_names = [v.name for v in program.model.graph.inputs]
    output_names = [v.name for v in program.model.graph.outputs]
    index = {name: i for i, name in enumerate(runtime_names)}
    if all(name in index for name in input_names):
        input_positions = [positions[index[name]] for name in input_names]
    elif len(input_names) == len(runtime_names):  # renamed but complete: positional
        input_positions = list(positions)
    else:
        raise OnnxExportError(f"torch.onnx.export renamed the graph inputs ({input_names} for {runtime_names}); "
                              "cannot tell which value feeds which input")
    program.model.metadata_props[METADATA_KEY] = json.dumps(
        {"placeholders": placeholders, "input_positions": input_positions})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))
    return OnnxExport(path, input_names, input_positions, output_names, placeholders)


def read_onnx_io(path: Path) -> tuple[list[str], list[str], dict[str, Any]]:
    """(input names, output names, trtmin metadata) of a saved model, without its weights."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    meta: dict[str, Any] = {}
    for prop in model.metadata_props:
        if prop.key == METADATA_KEY:
            meta = json.loads(prop.value)
    return inputs, outputs, meta


def external_data_files(path: Path) -> list[Path]:
    """The external-data files a saved model refers to (relative to it)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    names: set[str] = set()
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                names.add(entry.value)
    return [Path(path).parent / n for n in sorted(names)]
