"""Inductor through torch.compile, on CPU or CUDA.

`--set` takes torch.compile's own mode, dynamic and fullgraph, or any Inductor config
name (`--set max_autotune=true`, `--set cpp.simdlen=8`), passed as `options`; values are
parsed by the type of the config's default, and unknown names are refused.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import CUDAGRAPH_TREES, Backend, ScriptPart, SnippetCall, compile_off_guard, reset_dynamo
from oracles.errors import TrtminError

COMPILE_KEYS = ("mode", "dynamic", "fullgraph")  # torch.compile's own arguments
# Inductor's words for a tool it needs that this machine lacks (InvalidCxxCompiler; no Triton)
SETUP_FAILURES = ("No working C++ compiler found", "Cannot find a working triton installation")


class InductorBackend(Backend):
    name = "inductor"
    warm_imports = ("torch._inductor.compile_fx", CUDAGRAPH_TREES)

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        self.compile_kwargs, self.config = parse_inductor_settings(self.settings, spec)

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        reset_dynamo()  # a fresh compile per candidate: no cache shared between them
        return torch.compile(gm, backend="inductor", **self._options())

    def setup_problem(self, message: str) -> str | None:
        """Also a C++ compiler or Triton that Inductor cannot find (none on this machine, or
        --set cpp.cxx naming one that is not there): every candidate fails alike, and the
        report would name the first op left as the bug."""
        if any(words in message for words in SETUP_FAILURES):
            return (f"Inductor cannot compile here ({message.splitlines()[0][:200]}): install what it names (a C++ "
                    "compiler such as g++, or Triton), or fix the --set that names it; no compiler's bug to reduce")
        return super().setup_problem(message)

    def _options(self) -> dict[str, Any]:
        return {**self.compile_kwargs, **({"options": self.config} if self.config else {})}

    def script_part(self) -> ScriptPart:
        return ScriptPart(compile_body=f"{compile_off_guard()}return {self._call('module')}")

    def snippet_call(self, args: Sequence[str], verdict: Any = None) -> SnippetCall:
        return SnippetCall(self._call("f"))

    def _call(self, fn: str) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self._options().items())
        return f'torch.compile({fn}, backend="inductor"{opts})'


def parse_inductor_settings(settings: dict[str, Any], backend: str = "inductor") -> tuple[dict[str, Any], dict[str, Any]]:
    """(torch.compile keyword arguments, Inductor config options), each value parsed."""
    from oracles.backend_setup import as_bool
    from torch._inductor import config as inductor_config

    defaults = {k: v for k, v in inductor_config.get_config_copy().items() if not k.startswith("_") and k.islower()}
    kwargs: dict[str, Any] = {}
    config: dict[str, Any] = {}
    for key, value in settings.items():
        text = str(value).strip()
        if key == "mode":
            modes = list(dict.fromkeys(["default", *torch._inductor.list_mode_options()]))
            if text not in modes:
                raise TrtminError(f"--set mode={text}: use one of {', '.join(modes)}")
            kwargs[key] = text
        elif key == "dynamic":
            kwargs[key] = None if text.lower() == "none" else as_bool(key, text)
        elif key == "fullgraph":
            kwargs[key] = as_bool(key, text)
        elif key in defaults:
            get_type = getattr(inductor_config, "get_type", None)  # the annotation; older torch: the default's type
            config[key] = _config_value(key, text, get_type(key) if get_type else type(defaults[key]))
        else:
            close = difflib.get_close_matches(key, [*COMPILE_KEYS, *defaults], n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}?" if close else \
                f"use {', '.join(COMPILE_KEYS)} or a torch._inductor.config name"
            raise TrtminError(f"--set {key}: backend {backend} has no setting {key!r}; {hint}")
    if "mode" in kwargs and config:
        raise TrtminError(f"--set mode={kwargs['mode']} cannot be combined with Inductor config settings "
                          f"({', '.join(config)}): torch.compile takes one or the other; set the config names only")
    return kwargs, config


def _config_value(key: str, text: str, annotated: Any) -> Any:
    """`text` as the config's annotated type (what torch.compile checks `options` against):
    bool, int, float or str, each optional ("none"); other types cannot be given as text."""
    from oracles.backend_setup import as_bool, as_int
    kinds = list(typing.get_args(annotated)) if typing.get_origin(annotated) is not None else [annotated]
    if text.lower() == "none" and type(None) in kinds:
        return None
    for kind in (bool, int, float, str):
        if kind in kinds:
            if kind is bool:
                return as_bool(key, text)
            if kind is int:
                return as_int(key, text)
            if kind is float:
                try:
                    return float(text)
                except ValueError:
                    raise TrtminError(f"--set {key}={text}: expected a number") from None
            return text
    shown = getattr(annotated, "__name__", None) or str(annotated).replace("typing.", "")
    raise TrtminError(f"--set {key}: Inductor config {key} takes {shown}, which --set cannot write; "
                      "set it in a plugin backend (torch.compile(..., options=...)) instead")
