"""--import: the libraries that register a program's custom ops (torch.library), imported
before the program is loaded, in trtmin and in every worker; repro.py imports them too."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import re
import site
import sys
from pathlib import Path
from typing import Any, Sequence

from oracles.errors import TrtminError, error_chain

_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_UNRESOLVED_OP = re.compile(r"failed to resolve torch\.ops\.(\w+)\.(\w+)")


def findable(top: str) -> bool:
    """Whether a top-level module can be found (not imported), where import_libraries would
    look: sys.path, then the folder trtmin runs in (a package, a .py, a built extension)."""
    return (importlib.util.find_spec(top) is not None
            or importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) is not None)


def checked_imports(names: list[str] | None) -> list[str]:
    """--import's names, each a module name whose package can be found (the CLI's check,
    before anything is imported: a typo is named in a second, not after torch has loaded)."""
    names = list(names or [])
    for name in names:
        if not _MODULE.fullmatch(name):
            raise TrtminError(f"--import {name!r} is not a module name; pass what you would write after "
                              "`import` (natten, mypkg.ops)")
        top = name.split(".")[0]  # its package only: finding mypkg.ops would import mypkg
        if not findable(top):
            raise TrtminError(f"--import {name}: it cannot be imported (ModuleNotFoundError: No module named "
                              f"'{top}'); install it, or run trtmin where it is importable")
    return names


def import_libraries(names: list[str]) -> None:
    """Import each, as `import NAME` would where trtmin was started (its folder included)."""
    for name in names:
        try:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError:
                if os.getcwd() in sys.path:
                    raise
                sys.path.append(os.getcwd())  # the `trtmin` script's path does not hold the folder it runs in
                importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any failure of a user's library is one line
            raise TrtminError(f"--import {name}: it cannot be imported ({type(e).__name__}: {e}); install it, "
                              "or run trtmin where it is importable") from None
        except SystemExit as e:  # trtmin would exit with its code, unsaid (exit 1 reads as "it fails")
            raise TrtminError(f"--import {name}: it exits as it is imported (sys.exit({e.code!r})); pass a module "
                              "that registers the ops and returns, e.g. one a script's `if __name__ == "
                              "'__main__':` guards") from None


IMPORT_COPY_PREFIX = "repro_import_"  # the copy beside repro.py of an --import module of the user's own folder


def import_copies(names: Sequence[str]) -> dict[str, Path]:
    """{copy's name beside repro.py: file} of the --import modules that are one .py file of
    the user's own (the folder trtmin ran in, a PYTHONPATH folder; not an installed package):
    repro.py, run from its folder, finds no such module, and said SKIPPED for ever; with the
    modules of its folder it imports (its helpers, theirs in turn), as a plugin's go. A
    package folder or a built extension must be installed where repro.py runs."""
    from oracles.backend_names import plugin_own_modules
    copies: dict[str, Path] = {}
    names = [n for n in names if "." not in n]  # a module of a package: the package must be installed
    installed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *site.getsitepackages())} if names else set()
    for name in names:
        spec = importlib.util.find_spec(name) or importlib.machinery.PathFinder.find_spec(name, [os.getcwd()])
        origin = getattr(spec, "origin", None)
        if spec is None or spec.submodule_search_locations is not None or not str(origin).endswith(".py"):
            continue
        file = Path(os.path.realpath(str(origin)))
        if not any(file.is_relative_to(root) for root in installed):
            copies[f"{IMPORT_COPY_PREFIX}{name}.py"] = file
            copies |= {f"{IMPORT_COPY_PREFIX}{helper}.py": f for helper, f in plugin_own_modules(file).items()}
    return copies


def uses_custom_ops(graph: Any) -> bool:
    """Whether an fx graph calls an op outside ATen's (which only an --import registers),
    itself or through a higher-order op (auto_functionalized's mutating custom op)."""
    import torch.fx as fx
    core = (None, "aten", "prims", "higher_order")

    def custom(target: Any) -> bool:
        return callable(target) and getattr(target, "namespace", None) not in core

    def ops_among(args: Any) -> list[Any]:
        found: list[Any] = []
        fx.node.map_aggregate(args, lambda a: found.append(a) if hasattr(a, "namespace") else None)
        return found

    return any(n.op == "call_function" and (custom(n.target) or any(map(custom, ops_among((n.args, n.kwargs)))))
               for n in graph.nodes)


def unresolved_op(error: BaseException, logged: str = "") -> str | None:
    """The custom op torch.export.load could not find (ns::name), from its error chain or
    what it logged before raising."""
    texts = [logged, *map(str, error_chain(error))]
    m = next((m for t in texts if (m := _UNRESOLVED_OP.search(t))), None)
    return f"{m.group(1)}::{m.group(2)}" if m else None
