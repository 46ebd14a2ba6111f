"""Graph preparation shared by the export-based backends, and the ONNX export.

Candidates read the program's weights as attributes (get_attr), not inputs, as in the
user's model (minimize/program/model.py), so exporters see them as weights.

* `script_source`: a function's source, pasted into repro scripts, so a script runs
  the same helper code the backend ran.
* `export_onnx`: `torch.onnx.export(..., dynamo=True)` of the candidate, used by the
  tensorrt and onnxruntime backends. The ONNX graph's inputs are the runtime inputs
  only (weights become initializers); `OnnxExport` says which
  candidate input feeds which ONNX input, and the mapping is also stored in the
  model's metadata so a script writer can recover it from the file alone.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import logging
import re
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch
import torch.fx as fx

from oracles.dynamic import detached, export_dynamic_shapes
from oracles.errors import SettingNotHonoured

METADATA_KEY = "trtmin.placeholders"


class OnnxExportError(RuntimeError):
    """torch.onnx.export failed on the candidate: the exporter's bug, not the runtime's."""


def export_error(e: BaseException) -> OnnxExportError:
    """The exporter's failure (it raises many types) as an OnnxExportError that names it.
    Repro scripts word it the same way (script_source), so their ERROR_PATTERN, made from
    the workers' message, matches what the script sees. The exporter's own cause, not its
    boilerplate: the first line of its "## Exception summary" (No ONNX function found for
    prims.erf_inv), its terminal colours taken out."""
    import re
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    cause = text.split("## Exception summary", 1)[-1]
    lines = [re.sub(r"^<class '(?:[\w.]+\.)?(\w+)'>: ", r"\1: ", ln.strip()) for ln in cause.splitlines() if ln.strip()]
    return OnnxExportError(f"torch.onnx.export failed ({type(e).__name__}): " + (lines[0][:300] if lines else "no message"))


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


def export_statement(opset: int | None) -> str:
    """A short repro.py's export of `module` (its weights are buffers of Repro) into the
    file the backend then reads, as export_onnx makes it: static sizes, the opset asked for."""
    return ('torch.onnx.export(module.eval(), tuple(inputs), folder + "/model.onnx", dynamo=True'
            + (f", opset_version={opset}" if opset else "") + ", verbose=False)")


# The script-side copy: the same functions, for repro scripts that import only torch.

@dataclass
class OnnxExport:
    path: Path
    input_names: list[str]        # ONNX graph inputs, in order
    input_positions: list[int]    # for each, its index in the candidate's input list
    output_names: list[str]
    placeholder_names: list[str]  # the candidate's inputs, frozen ones included
    # ONNX node name -> the fx node it was made from, with its source stack (torch.onnx's
    # metadata): what a parser's or runtime's error naming `node_linear_2` was working on
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)

    def feeds(self, inputs: Sequence[Any]) -> dict[str, Any]:
        return {name: inputs[i] for name, i in zip(self.input_names, self.input_positions)}


# their warnings are the exporter's notes to itself: "torchvision is not installed", onnx_ir's
# "Skipped deduplication of initializer 'mul' as it is a graph input or output"
QUIET_LOGGERS = ("torch.onnx", "onnx_ir", "onnxscript")


def _quiet_export(module: torch.nn.Module, args: tuple[Any, ...], opset: int | None) -> Any:
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shapes = export_dynamic_shapes(args)
            return torch.onnx.export(module, args, dynamo=True, opset_version=opset, verbose=False, report=False,
                                     **({"dynamic_shapes": shapes} if shapes else {}))
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _set_training(module: torch.nn.Module, mode: bool) -> bool:
    """module.train(mode), returning the old mode. ExportedProgram.module() refuses
    train()/eval() (NotImplementedError): leave such a module as it is."""
    old = module.training
    try:
        module.train(mode)
    except NotImplementedError:
        pass
    return old


def export_onnx(gm: fx.GraphModule, inputs: Sequence[Any], path: Path, *, opset: int | None = None) -> OnnxExport:
    """Export the candidate to `path` (weights over 2 GB go to `<path>.data` beside it), with
    the inputs' dynamic dims (oracles/dynamic.py) dynamic in the ONNX graph."""
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    plain = [detached(v) for v in inputs]  # no nn.Parameter
    module, runtime_inputs, positions = gm, plain, list(range(len(plain)))
    was_training = _set_training(module, False)
    try:
        program = _quiet_export(module, tuple(runtime_inputs), opset)
    except Exception as e:  # the exporter raises many types
        raise export_error(e) from e
    finally:
        _set_training(module, was_training)
    made = program.model.opset_imports.get("") if opset is not None else None  # the IR's: no proto made per export
    if made is not None and made != opset:  # its converter failed and it kept its own
        raise SettingNotHonoured(f"--set opset={opset}: torch.onnx.export made opset {made} for this program, not "
                                 f"{opset} (its version converter cannot convert it); drop --set opset (the "
                                 "exporter's default) or pick another")
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
    origins = {node.name: (meta["pkg.torch.onnx.fx_node"], meta.get("pkg.torch.onnx.stack_trace") or "None")
               for node in program.model.graph if "pkg.torch.onnx.fx_node" in (meta := node.metadata_props)}
    for node in gm.graph.nodes:  # --set opset=N: the version converter keeps node_<fx name>, drops the metadata
        if node.op == "call_function":
            origins.setdefault(f"node_{node.name}", (node.format_node(), node.meta.get("stack_trace") or "None"))
    return OnnxExport(path, input_names, input_positions, output_names, placeholders, origins)


def upstream_onnx(folder: Path, gm: fx.GraphModule, inputs: Sequence[Any], opset: int | None,
                  settings: dict[str, Any] | None = None) -> dict[str, str]:
    """model.onnx in `folder`, as export_onnx makes it for the backend, and model_io.npz:
    what an ONNX runtime's maintainers take, without torch. The .npz holds each input under
    its ONNX input name, so `session.run(None, dict(np.load(...)))` minus the outputs feeds
    it, and eager's outputs as eager_output_0, ... (bf16 as its uint16 bits). Written in a
    hidden folder first and moved in (weights over 2 GB go to model.onnx.data); one a kill
    left behind is removed. `settings`: the backend's own (--set), said with the model.
    {file name: what it is}."""
    import os
    import shutil
    import tempfile

    import onnx

    from oracles.checks import flatten_outputs

    for stale in folder.glob(".onnx-*"):  # a run killed mid-export (this run holds the folder)
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=".onnx-", dir=folder) as tmp:
        export = export_onnx(gm, inputs, Path(tmp) / "model.onnx", opset=opset)
        with torch.no_grad():
            expected = flatten_outputs(gm(*inputs))
        feeds = {name: inputs[i] for name, i in zip(export.input_names, export.input_positions)}
        arrays = {**feeds, **{f"eager_output_{k}": v for k, v in enumerate(expected)}}
        bf16 = any(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in arrays.values())
        with open(Path(tmp) / "model_io.npz", "wb") as f:
            np.savez(f, **{k: numpy_of(v) for k, v in arrays.items()})
        model = onnx.load(str(export.path), load_external_data=False)
        written = sorted(p.name for p in Path(tmp).iterdir())
        for name in written:
            os.replace(Path(tmp) / name, folder / name)
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    ops, count = sorted({node.op_type for node in model.graph.node}), len(model.graph.node)
    ran_with = "".join(f", {k}={v}" for k, v in sorted((settings or {}).items()))
    said = {"model.onnx": f"the ONNX model the backend ran (opset {version}; {count} node{'s' if count != 1 else ''}: "
                          f"{', '.join(ops) or 'none'}{'; run with ' + ran_with[2:] if ran_with else ''})",
            "model_io.npz": "each input under its ONNX input name, and eager PyTorch's outputs as eager_output_0 onward"
                            + (" (bf16 as its uint16 bits)" if bf16 else "")}
    return said | {name: "its weights" for name in written if name not in said}


def numpy_of(value: Any) -> Any:
    """A tensor as numpy holds it (bf16 as its uint16 bits, float8 as uint8), a number as it is."""
    if not isinstance(value, torch.Tensor):
        return np.asarray(value)
    t = value.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.uint8).numpy()
    return t.numpy()


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


_ONNX_NODE_NAME = re.compile(r"\bnode_\w+")  # torch.onnx names each node after its fx node


def named_node_text(export: OnnxExport, message: str) -> str | None:
    """The first node of the exported model that a parser's or runtime's error names, in the
    words torch.fx's Interpreter uses ("While executing %softmax : ... Original traceback:
    ..."), which oracles/checks.py failing_node reads: torch.onnx keeps each node's fx node
    and source stack in its metadata (OnnxExport.origins). None when the message names no
    node of the model."""
    for name in _ONNX_NODE_NAME.findall(message):
        if name in export.origins:
            fx_node, stack = export.origins[name]
            return f"While executing {fx_node}\nOriginal traceback:\n{stack}"
    return None


@contextlib.contextmanager
def naming_the_node(export: OnnxExport) -> Iterator[None]:
    """A parser's or runtime's error names the ONNX node it failed on (TensorRT's "In node
    1 with name: node_softmax", ONNX Runtime's "... node with name 'node_mul'"): the fx node
    it was made from goes with the error, for localization to start there
    (oracles/checks.py classify_exception)."""
    try:
        yield
    except Exception as e:
        e.failing_node_text = named_node_text(export, str(e))  # type: ignore[attr-defined]
        raise


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
