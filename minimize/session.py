"""One oracle session: a prepared program, its worker pool, and verdicts for candidates.

Shared by `trtmin check` and `trtmin reduce`.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minimize.inputs import load_inputs, make_inputs, prepare, to_device
from minimize.localize import split_mark_all
from minimize.program import Program, load_exported
from minimize.steps import StepClock
from minimize.worker_side import save_state
from oracles.backends import resolve
from oracles.backends.plugin import PluginBackend
from oracles.errors import TrtminError
from oracles.verdict import ORACLES, Verdict
from oracles.worker import WorkerConfig, WorkerPool


@dataclass
class Options:
    model: Path
    oracle: str
    backend: str = "inductor"
    inputs: Path | None = None
    match: str | None = None
    any_failure: bool = False
    atol: float = 1e-3
    rtol: float = 1e-3
    timeout: float = 300.0
    device: str = "cpu"
    jobs: int = 1
    settings: dict[str, Any] = field(default_factory=dict)
    memory_limit_mb: int | None = None
    emit: list[str] = field(default_factory=list)  # extra scripts for other backends
    repeat: int = 1                 # runs per candidate, for flaky compilers
    min_failures: int | None = None  # of `repeat` runs; default: as many as the original
    localize: bool = True           # guess the bug's place from one run with every value an output


def gpu_env(jobs: int, device: str) -> list[dict[str, str]]:
    """One worker per GPU, each pinned with CUDA_VISIBLE_DEVICES (not for an explicit cuda:N)."""
    if device != "cuda":
        return [{} for _ in range(jobs)]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(_gpu_count())]
    return [{"CUDA_VISIBLE_DEVICES": ids[i % len(ids)]} if ids else {} for i in range(jobs)]


def _gpu_count() -> int:
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class Session:
    def __init__(self, opts: Options):
        if opts.oracle not in ORACLES:
            raise TrtminError(f"unknown oracle {opts.oracle!r}; use one of {', '.join(ORACLES)}")
        self.opts = opts
        self.backend = resolve(opts.backend, opts.settings)
        kind = opts.device.split(":")[0]
        if kind not in self.backend.devices:
            raise TrtminError(f"backend {opts.backend} runs with --device {' or '.join(self.backend.devices)}, "
                              f"not {opts.device}; pass --device {self.backend.devices[0]}")
        if isinstance(self.backend, PluginBackend):
            self.backend.validate()  # a missing file or function is a one-line error, here
        self._state = tempfile.TemporaryDirectory(prefix="trtmin-state-")
        cfg = WorkerConfig(
            setup="minimize.worker_side:worker_setup",
            setup_kwargs={"state": self._state.name, "backend": opts.backend, "settings": opts.settings,
                          "atol": opts.atol, "rtol": opts.rtol, "device": opts.device},
            timeout_s=opts.timeout,
            memory_limit_bytes=opts.memory_limit_mb * 2**20 if opts.memory_limit_mb else None,
        )
        self.pool = WorkerPool(cfg, opts.jobs, gpu_env(opts.jobs, opts.device))
        self.pool.start()  # the workers' start overlaps loading the model (they wait for the state)
        clock = StepClock()
        self.load_phases = clock.seconds  # for summary.json timing.load
        try:
            ep = load_exported(opts.model)
            user_inputs = load_inputs(opts.inputs, ep) if opts.inputs else make_inputs(ep)
            clock.step("load_model")
            self.ep = prepare(ep, opts.device)
            clock.step("prepare")
            self.program = Program(self.ep, to_device(user_inputs, opts.device), device=opts.device)
            self.user_inputs = user_inputs
            clock.step("eager_values")
            save_state(self.program, Path(self._state.name))
            clock.step("save_state")
        except BaseException:
            self.close()
            raise

    def evaluate(self, keys: list[tuple[tuple[int, ...], tuple[tuple[str, str], ...]]]) -> list[list[Verdict]]:
        """Each (candidate, settings)'s runs (--repeat of them), each in a fresh compile."""
        n = self.opts.repeat
        jobs = []
        for c, s in keys:
            real, mark_all = split_mark_all(s)
            jobs += [{"kept": list(c), "settings": dict(real), **({"mark_all": True} if mark_all else {})}] * n
        results = self.pool.run(jobs)
        verdicts = [Verdict.from_dict({k: v for k, v in r.items() if k != "restart"}) for r in results]
        return [verdicts[i * n:(i + 1) * n] for i in range(len(keys))]

    def partitions(self, key: tuple[tuple[int, ...], tuple[tuple[str, str], ...]]) -> list[list[str]]:
        """The backend's compiled partitions (engines) of a candidate, as node names; []
        when the backend does not report them."""
        if not self.backend.reports_partitions:
            return []
        result = self.pool.run([{"kept": list(key[0]), "settings": dict(key[1]), "partitions": True}])[0]
        return result.get("partitions", []) if isinstance(result, dict) else []

    def close(self) -> None:
        self.pool.close()
        self._state.cleanup()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
