"""Test helpers: run the CLI and repro scripts in fresh processes, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "minimize.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def run_repro(folder: Path, backend: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Runs repro.py alone, in a new process, from a clean environment (no trtmin on the path)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRTMIN_BACKEND")}
    if backend:
        env["TRTMIN_BACKEND"] = backend
    return subprocess.run([sys.executable, str(folder / "repro.py")], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=folder)
