"""Fully-masked query row in float32 attention returns NaN instead of 0.

User-documented Torch-TensorRT discrepancy: in float32 SDPA, a query row whose keys are all
masked out gets softmax over an all -inf row = 0/0 = NaN in the engine, while PyTorch (torch
2.13 CPU, both bool and -inf float masks) returns 0 for that row. Padded-sequence encoders
that mask padding *queries* as well as padding keys hit this on every padded position, and
the NaN then leaks into valid positions through the next layer's ``attn @ v`` (0 * NaN).

Planted mechanism: for every SDPA-family node with an explicit mask, rows whose mask is
entirely False (bool) or entirely -inf (float) are set to NaN in the output.

Core under cut-to-input: 1 node (the SDPA; the padding mask is fed as an input).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "nan"
MATCH = None
CORE = 1

VOCAB, DIM, HEADS, LAYERS, CLASSES = 50, 32, 4, 2, 3


class EncoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.ff = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, -1).permute(2, 0, 3, 1, 4).unbind(0)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = self.ln1(x + self.proj(o.transpose(1, 2).reshape(b, t, DIM)))
        return self.ln2(x + self.ff(x))


class PaddedTextClassifier(nn.Module):
    """Post-LN encoder over right-padded token ids (pad = 0), masked-mean pooled."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(1, 16, DIM) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer() for _ in range(LAYERS))
        self.cls = nn.Linear(DIM, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # [B, T] int64
        valid = tokens != 0
        mask = (valid[:, None, :, None] & valid[:, None, None, :])  # pad queries see nothing
        x = self.emb(tokens) + self.pos[:, : tokens.shape[1]]
        for layer in self.layers:
            x = layer(x, mask)
        w = valid.unsqueeze(-1).float()
        return self.cls((x * w).sum(1) / w.sum(1))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    tokens = torch.randint(1, VOCAB, (3, 12))
    for row, length in enumerate((12, 9, 5)):
        tokens[row, length:] = 0
    return PaddedTextClassifier().eval(), (tokens,)


# ---------------------------------------------------------------- planted-bug plugin
def _is_sdpa(target: Any) -> bool:
    name = getattr(target, "__name__", "")
    return isinstance(target, torch._ops.OpOverload) and "scaled_dot_product" in name and "backward" not in name


class _MaskedRowNaNInterpreter(Interpreter):
    def run_node(self, n: Node) -> Any:
        if n.op != "call_function" or not _is_sdpa(n.target):
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        names = [a.name for a in n.target._schema.arguments]
        kw = {**dict(zip(names, args)), **kwargs}
        mask, out = kw.get("attn_mask", kw.get("attn_bias")), super().run_node(n)
        if not isinstance(mask, torch.Tensor):
            return out
        dead = ~mask.any(-1) if mask.dtype == torch.bool else (mask == float("-inf")).all(-1)
        first = out[0] if isinstance(out, tuple) else out
        first = first.masked_fill(dead.unsqueeze(-1), float("nan"))  # the bug: 0/0 per dead row
        return (first, *out[1:]) if isinstance(out, tuple) else first


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    has_sdpa = any(n.op == "call_function" and _is_sdpa(n.target) for n in gm.graph.nodes)
    interp = _MaskedRowNaNInterpreter if has_sdpa else Interpreter
    return lambda *args: interp(gm).run(*args)
