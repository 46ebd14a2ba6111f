"""Inductor through torch.compile, on CPU or CUDA."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart


class InductorBackend(Backend):
    name = "inductor"

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        torch._dynamo.reset()  # a fresh compile per candidate: no cache shared between them
        return torch.compile(gm, backend="inductor", **self._options())

    def _options(self) -> dict[str, Any]:
        opts = {k: v for k, v in self.settings.items() if k in ("mode", "dynamic", "fullgraph")}
        return opts

    def script_part(self) -> ScriptPart:
        opts = "".join(f", {k}={v!r}" for k, v in self._options().items())
        return ScriptPart(compile_body=f'return torch.compile(module, backend="inductor"{opts})')
