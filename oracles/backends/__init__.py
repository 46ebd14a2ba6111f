"""Backend registry: a `--backend` string to a Backend object."""

from __future__ import annotations

from typing import Any

from oracles.backends.base import Backend, ScriptPart
from oracles.backends.eager import EagerBackend
from oracles.backends.inductor import InductorBackend
from oracles.backends.plugin import PluginBackend, is_plugin_spec
from oracles.errors import TrtminError

BUILTIN: dict[str, type[Backend]] = {
    "eager": EagerBackend,
    "inductor": InductorBackend,
}

__all__ = ["Backend", "ScriptPart", "resolve", "BUILTIN"]


def resolve(spec: str, settings: dict[str, Any] | None = None) -> Backend:
    if spec in BUILTIN:
        return BUILTIN[spec](spec, settings)
    if is_plugin_spec(spec):
        return PluginBackend(spec, settings)
    names = ", ".join(sorted(BUILTIN))
    raise TrtminError(f"unknown backend {spec!r}; use one of {names}, or a plugin path/to/file.py:function")
