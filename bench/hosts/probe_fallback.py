"""What torch_executed_ops does on the video policy (GPU, Torch-TensorRT): the error with
no op forced, with every op type of the exported program forced to PyTorch, and the
engines and op types the compiled module holds in each case."""

from __future__ import annotations

import collections

import torch
import torch_tensorrt

from bench.hosts import video_policy
from oracles.backends.torch_tensorrt import partition_report

model, (x,) = video_policy.build()
model, x = model.cuda(), x.cuda()
ep = torch.export.export(model, (x,))
types = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})
with torch.no_grad():
    ref = model(x)
for forced in (set(), {"torch.ops." + t for t in types}):
    gm = torch_tensorrt.dynamo.compile(ep, arg_inputs=[x], min_block_size=1, torch_executed_ops=forced)
    err = (gm(x) - ref).abs().max().item()
    ops = collections.Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
    inner = collections.Counter()
    for name, sub in gm.named_children():
        if isinstance(sub, torch.fx.GraphModule):
            inner.update(str(n.target) for n in sub.graph.nodes if n.op == "call_function")
    print(f"forced {len(forced)} op types: max abs err {err:.4g}; {partition_report(gm)}")
    print("  top-level ops:", dict(ops.most_common(12)))
    print("  in PyTorch blocks:", dict(inner.most_common(25)))
print("exported op types:", types)
