"""A bytecode cache for installs that keep none.

uv installs packages without compiling them, and many container images set
PYTHONDONTWRITEBYTECODE=1: then every Python process compiles torch's sources again
(most of the seconds `import torch` takes there), and trtmin starts a process per worker and per restart after a crash.
When torch has no bytecode next to it, trtmin keeps its own under
$XDG_CACHE_HOME/trtmin/pycache (sys.pycache_prefix: the installed packages are not
written to), for itself and its workers. An install with bytecode is left alone, as is
a PYTHONPYCACHEPREFIX the user set; TRTMIN_NO_BYTECODE_CACHE=1 turns this off.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ENV = "TRTMIN_BYTECODE_CACHE"  # the folder, passed to workers (spawn starts them with -B)
PROBE = "torch"  # the package whose bytecode decides


def _has_bytecode() -> bool:
    spec = importlib.util.find_spec(PROBE)
    if spec is None or not spec.origin:
        return True  # nothing to help
    return os.path.exists(importlib.util.cache_from_source(spec.origin))


def enable() -> str | None:
    """Use trtmin's bytecode cache in this process (and, through ENV, in the workers it
    starts) when Python would otherwise compile torch anew; returns the folder used."""
    if os.environ.get("TRTMIN_NO_BYTECODE_CACHE") == "1" or sys.pycache_prefix:
        return None
    folder = os.environ.get(ENV)
    if not folder:
        if _has_bytecode():
            return None
        folder = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trtmin" / "pycache")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    sys.pycache_prefix, sys.dont_write_bytecode = folder, False
    os.environ[ENV] = folder
    return folder
