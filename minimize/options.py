"""What one trtmin run was asked to do. Imports nothing heavy: the CLI builds it before
torch is imported, to start the workers first (minimize/run/workers.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Options:
    model: Path
    oracle: str
    backend: str = "inductor"
    inputs: Path | None = None
    match: str | None = None
    any_failure: bool = False
    atol: float = 1e-3
    rtol: float = 1e-3
    reference: str = "eager"        # "float64": a mismatch is judged against eager's own error (oracles/reference.py)
    timeout: float = 300.0
    device: str = "cpu"
    jobs: int = 1
    settings: dict[str, Any] = field(default_factory=dict)
    memory_limit_mb: int | None = None
    emit: list[str] = field(default_factory=list)  # extra scripts for other backends
    repeat: int = 1                 # runs per candidate, for flaky compilers
    min_failures: int | None = None  # of `repeat` runs; default: minimize/search/problem.py establish_original
    localize: bool = True           # guess the bug's place from one run with every value an output
    generate_values: bool = True    # try seeded random tensors for the large inputs and weights (minimize/search/passes/values.py)
    verify: bool = True             # run repro.py alone at the end, as a maintainer will (minimize/emit/verify.py)
    imports: list[str] = field(default_factory=list)  # libraries registering custom ops (minimize/program/libraries.py)
