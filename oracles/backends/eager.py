"""The reference: eager PyTorch runs the graph as written."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart
from oracles.errors import TrtminError


class EagerBackend(Backend):
    name = "eager"

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        if self.settings:
            raise TrtminError(f"--set {next(iter(self.settings))}: backend eager takes no settings")

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        return gm

    def script_part(self) -> ScriptPart:
        return ScriptPart(compile_body="return module")
