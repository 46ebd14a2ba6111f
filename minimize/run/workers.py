"""The oracle's worker pool and the state folder it reads, started before the main process
imports torch: a worker's start (torch, the compiler, Dynamo, CUDA) is the longer path to
the first oracle call, and the CLI's own imports would delay it. So this module imports
nothing heavy.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from minimize.options import Options
from oracles.worker import WORKERS_PREFIX, WorkerConfig, WorkerPool


@functools.lru_cache(maxsize=1)
def nvml_gpu_count() -> int | None:
    """The GPUs the NVIDIA driver lets this process see (NVML, as nvidia-smi counts them:
    a container's own), without CUDA or torch; None where NVML cannot say."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        count = ctypes.c_uint()
        return count.value if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 else None
    finally:
        nvml.nvmlShutdown()


def _listed_devices() -> list[str] | None:
    """CUDA_VISIBLE_DEVICES's entries; None when it is not set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return None if visible is None else [d.strip() for d in visible.split(",") if d.strip()]


def visible_gpu_count() -> int:
    """GPUs this process may use, without importing torch where the driver can say: the
    CUDA_VISIBLE_DEVICES entries, no more than the GPUs there are."""
    count = nvml_gpu_count()
    if count is None:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = _listed_devices()
    return count if listed is None else min(count, len(listed))


def gpu_env(jobs: int, device: str) -> list[dict[str, str]]:
    """One worker per GPU, each pinned with CUDA_VISIBLE_DEVICES (not for an explicit cuda:N)."""
    if device != "cuda":
        return [{} for _ in range(jobs)]
    count, listed = visible_gpu_count(), _listed_devices()
    ids = listed[:count] if listed else [str(i) for i in range(count)]
    return [{"CUDA_VISIBLE_DEVICES": ids[i % len(ids)]} if ids else {} for i in range(jobs)]


STATE_PREFIX = "trtmin-state-"
SCRATCH = "scratch"  # in the state folder: where backends in the workers write their files
_STATE_NAME = re.compile(rf"(?:{re.escape(STATE_PREFIX)}|{re.escape(WORKERS_PREFIX)})(\d+)-")


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs: a zombie (killed, not yet reaped by its parent: for
    seconds after a kill -9, when the next run starts at once) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (macOS): kill's answer
        return True
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")  # after "(name)", which may hold spaces


def remove_stale_state() -> list[Path]:
    """The state folders of runs that were killed (kill -9, a power cut: no cleanup ran),
    each the eager value of every node, megabytes, and their workers' log folders: removed
    at the next run's start. Only this user's, and only where the pid in the name is no
    longer running."""
    removed = []
    folders = [*Path(tempfile.gettempdir()).glob(STATE_PREFIX + "*"), *Path(tempfile.gettempdir()).glob(WORKERS_PREFIX + "*")]
    for p in folders:
        m = _STATE_NAME.match(p.name)
        try:
            if m and p.is_dir() and p.stat().st_uid == os.getuid() and not _alive(int(m.group(1))):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return removed


class Workers:
    """The started pool, and the folder where the main process leaves the program for it
    (minimize/run/worker_side.py: the workers wait for it). A context manager that stops
    them; closing twice does nothing (the session that takes them closes them too)."""

    def __init__(self, opts: Options):
        envs = gpu_env(opts.jobs, opts.device)
        remove_stale_state()
        self._state = tempfile.TemporaryDirectory(prefix=f"{STATE_PREFIX}{os.getpid()}-")
        self.state_dir = Path(self._state.name)
        scratch = self.state_dir / SCRATCH  # backends' files: go with the state, even from a killed worker
        scratch.mkdir()
        cfg = WorkerConfig(
            setup="minimize.run.worker_side:worker_setup",
            preload="minimize.run.worker_side:preload",
            prefork="minimize.run.worker_side:before_fork",
            setup_kwargs={"state": self._state.name, "scratch": str(scratch), "backend": opts.backend, "settings": opts.settings,
                          "atol": opts.atol, "rtol": opts.rtol, "reference": opts.reference, "device": opts.device,
                          "asked": opts.oracle},
            timeout_s=opts.timeout,
            memory_limit_bytes=opts.memory_limit_mb * 2**20 if opts.memory_limit_mb else None,
        )
        self.pool = WorkerPool(cfg, opts.jobs, envs)  # spawns nothing yet
        try:
            self.pool.start()
        except BaseException:  # a spawn that fails, Ctrl-C meanwhile: leave nothing behind
            self.close()
            raise

    def close(self) -> None:
        """Stop the workers and remove the state; a second call does nothing."""
        self.pool.close()
        self._state.cleanup()

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
