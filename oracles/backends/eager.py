"""The reference: eager PyTorch runs the graph as written."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart


class EagerBackend(Backend):
    name = "eager"

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        return gm

    def script_part(self) -> ScriptPart:
        return ScriptPart(compile_body="return module")
