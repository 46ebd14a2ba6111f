"""Dynamic sizes: the dimensions a program was exported with as dynamic (torch.export.Dim)
stay dynamic in every candidate's compile.

A compiler that fails only on a symbolic size (a converter that cannot take a dynamic
sequence length) is never seen if each candidate is compiled at the example's sizes. The
dims travel with the input tensors: Dynamo's own mark (`maybe_mark_dynamic`), which
torch.compile backends read, and the tensor's `_trtmin_dynamic`, which exporting backends turn into
`dynamic_shapes` (`Dim.AUTO`: dynamic where the candidate's ops allow it, static where they
fix the size, never an export error) and Torch-TensorRT into min/opt/max input shapes.

The functions below are copied by source into repro.py (script_source): torch only.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch


def mark_dynamic(t: Any, bounds: dict[int, Any]) -> Any:
    """t with the dims of `bounds` ({dim: (min, max or None)}: the export's) marked dynamic,
    for torch.compile and for the exporters; a dim of size 0 or 1 stays static, as torch
    specializes it."""
    if not isinstance(t, torch.Tensor) or not bounds:
        return t
    dims = {int(d): tuple(b) for d, b in bounds.items() if int(d) < t.dim() and t.shape[int(d)] > 1}
    if dims:
        setattr(t, "_trtmin_dynamic", dims)
        for d in dims:
            torch._dynamo.maybe_mark_dynamic(t, d)
    return t


def clone_marked(values: Sequence[Any]) -> list[Any]:
    """Clones of `values`, their dynamic dims kept (a clone loses Dynamo's marks)."""
    return [mark_dynamic(v.clone(), getattr(v, "_trtmin_dynamic", {})) if isinstance(v, torch.Tensor) else v
            for v in values]


def detached(v: Any) -> Any:
    """v.detach() (exporters and runtimes refuse nn.Parameter), its dynamic dims kept."""
    return mark_dynamic(v.detach(), getattr(v, "_trtmin_dynamic", {})) if isinstance(v, torch.Tensor) else v


def export_dynamic_shapes(inputs: Sequence[Any], bounded: bool = False) -> Any:
    """torch.export's dynamic_shapes for `inputs`: Dim.AUTO on each marked dim, within the
    export's bounds widened to the example's size (ExecuTorch plans memory to the max); None
    when no input has one (a static export, as before). bounded: an unbounded dim gets the
    example's size as its max, as a TensorRT profile needs one."""
    from torch.export import Dim

    def dim(size, lo, hi):
        limits = {}
        if min(lo, size) >= 2:  # below 2, torch's own default
            limits["min"] = min(lo, size)
        if hi is not None or bounded:
            limits["max"] = size if hi is None else max(hi, size)
        try:
            return Dim.AUTO(**limits) if limits else Dim.AUTO
        except TypeError:  # an older torch, whose Dim.AUTO takes no bounds
            return Dim.AUTO

    specs = [{d: dim(x.shape[d], lo, hi) for d, (lo, hi) in getattr(x, "_trtmin_dynamic", {}).items()} or None
             if isinstance(x, torch.Tensor) else None for x in inputs]
    return tuple(specs) if any(specs) else None


def tensorrt_inputs(ep: Any, inputs: Sequence[Any]) -> list[Any]:
    """Torch-TensorRT's arg_inputs for `ep`, exported from `inputs`: an input whose dims stayed
    symbolic in the export (Dim.AUTO keeps static what the ops fix) as torch_tensorrt.Input
    over the export's range for them (opt: the example's size), the others as they are."""
    import torch_tensorrt

    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    vals = {n.name: n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"}
    out = []
    for name, t in zip(names, inputs):
        val = vals.get(name)
        ranges = {d: ep.range_constraints.get(size.node.expr) for d, size in enumerate(getattr(val, "shape", ()))
                  if isinstance(size, torch.SymInt)} if isinstance(t, torch.Tensor) else {}
        ranges = {d: r for d, r in ranges.items() if r is not None}
        if not ranges:
            out.append(t)
            continue
        opt = list(t.shape)
        low, high = list(opt), list(opt)
        for d, r in ranges.items():
            low[d] = max(1, min(int(r.lower), opt[d]))
            high[d] = max(int(r.upper), opt[d]) if r.upper.is_Integer else opt[d]
        out.append(torch_tensorrt.Input(min_shape=low, opt_shape=opt, max_shape=high, dtype=t.dtype))
    return out
