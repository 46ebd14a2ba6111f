"""The command line's values, checked before anything starts: a one-line error that names
the problem and the fix (a TrtminError), then the Options a job runs with. Torch-free and
typer-free, so the CLI stays a thin layer of options over these and the jobs.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

from minimize.options import Options
from minimize.program.peek import check_inputs_early, check_model_file
from oracles.backend_names import (COMMAND_PREFIX, DEVICE_WORDS, check_backend_name, check_compile_on, check_emit,
                                   check_plugin_file, is_device)
from oracles.backend_setup import JUDGED_WITHOUT_GPU, check_before_torch, no_gpu_for_backend, no_gpu_for_engine
from oracles.command_line import parse_command
from oracles.errors import TrtminError
from oracles.verdict import ERROR_ORACLES



def parse_settings(pairs: Optional[list[str]]) -> dict[str, str]:
    """--set KEY=VALUE pairs; a key given twice with two values is refused (which would win?)."""
    settings: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TrtminError(f"--set {pair!r} is not KEY=VALUE; write it as --set min_block_size=1")
        key, value = key.strip(), value.strip()
        if settings.get(key, value) != value:
            raise TrtminError(f"--set {key} is given twice, as {settings[key]!r} and {value!r}; give it once")
        settings[key] = value
    return settings


def check_numbers(atol: float, rtol: float, timeout: float, repeat: int, memory_limit: Optional[int] = None) -> None:
    """Values that would run but mean nothing: a negative tolerance fails every candidate,
    a timeout of 0 makes every call a hang."""
    for name, value in (("--atol", atol), ("--rtol", rtol)):
        if not (math.isfinite(value) and value >= 0):
            raise TrtminError(f"{name} {value:g} must be a finite number >= 0, e.g. {name} 1e-3")
    check_timeout(timeout)
    if not 1 <= repeat <= MAX_REPEAT:
        raise TrtminError(f"--repeat {repeat} must be between 1 and {MAX_REPEAT} (the runs per candidate)")
    if memory_limit is not None and memory_limit < 1:
        raise TrtminError(f"--memory-limit {memory_limit} must be a positive number of MiB, e.g. --memory-limit 16384")


MAX_REPEAT = 1000  # runs per candidate
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week: beyond it a call is a hang by any measure (and past ~1e9 s, Python's waits overflow)


def check_timeout(timeout: float, example: int = 300) -> None:
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S):
        raise TrtminError(f"--timeout {timeout:g} must be a positive number of seconds up to {MAX_TIMEOUT_S:.0f} "
                          f"(a week), e.g. --timeout {example}")


def max_jobs() -> int:
    """The most processes --jobs may start (reduce's workers, `repros run`'s scripts): each
    imports torch (some 0.5 GB); 4 a core (an engine build is CPU work), 8 at least."""
    return max(8, 4 * (os.cpu_count() or 1))


def check_jobs(jobs: int, what: str = "workers") -> None:
    if not 1 <= jobs <= max_jobs():
        raise TrtminError(f"--jobs {jobs} must be between 1 and {max_jobs()} (4 {what} a CPU core here, each a "
                          f"process that imports torch), e.g. --jobs {min(4, max_jobs())}")


def default_jobs(device: str) -> int:
    from minimize.run.workers import visible_gpu_count
    return max(1, visible_gpu_count()) if device == "cuda" else 1


def jobs_note(jobs: int, device: str) -> str | None:
    """A warning where --jobs asks for more CPU workers than cores: they compete, and each
    call gets slower (bench/README.md)."""
    cores = os.cpu_count() or 1
    if device == "cpu" and jobs > cores:
        return (f"--jobs {jobs} starts more workers than this machine's {cores} CPU cores; they will compete "
                f"for them, so --jobs {cores} or fewer is usually faster with --device cpu")
    return None


def gpu_driver_seen() -> bool:
    """Whether this machine shows any sign of a GPU driver: NVIDIA's device files or its
    loaded driver, nvidia-smi or nvidia-modprobe (which makes the files on a first CUDA
    call), Jetson's /dev/nvhost-*, ROCm's /dev/kfd, WSL's /dev/dxg. Without any, --device
    cuda cannot run, and that is said before torch loads (5 s); with one, torch decides.
    True off Linux: there torch decides."""
    if not sys.platform.startswith("linux"):
        return True
    dev = Path("/dev")
    return (any(dev.glob("nvidia*")) or any(dev.glob("nvhost-*")) or (dev / "nvgpu").exists()
            or (dev / "kfd").exists() or (dev / "dxg").exists() or Path("/proc/driver/nvidia").exists()
            or any(shutil.which(tool) for tool in ("nvidia-smi", "nvidia-modprobe")))


def check_gpu_seen(backend: str, oracle: str) -> None:
    """A backend that needs a GPU for what is asked, where no GPU driver shows: refused in
    the backend's own words before torch loads (it said so after 6-7 s); where a driver
    shows, the backend asks torch."""
    if gpu_driver_seen():
        return
    if backend in ("executorch:cuda", "executorch:tensorrt"):
        raise TrtminError(no_gpu_for_backend(backend, "none is visible here"))
    if backend == "tensorrt" and oracle not in JUDGED_WITHOUT_GPU:
        raise TrtminError(no_gpu_for_engine(oracle, "no GPU is visible here"))


def build_options(model: Path, oracle: str, backend: str, inputs: Optional[Path], match: Optional[str],
             atol: float, rtol: float, timeout: float, device: str, jobs: Optional[int] = 1, any_failure: bool = False,
             settings: Optional[list[str]] = None, emit: Optional[list[str]] = None,
             reference: str = "eager", **more: Any) -> Options:
    """The run's Options from the command line's values, each checked (`more`: Options'
    other fields as they are)."""
    check_model_file(model, inputs)  # these, before any worker starts or torch is imported: an answer in a second
    check_backend_name(backend)
    check_plugin_file(backend)
    if backend.startswith(COMMAND_PREFIX):  # the command line's mistakes now, before torch loads; not a
        parse_command(backend)  # manifest's, whose program may be on another machine
    check_compile_on(backend)
    check_emit(list(emit or []), backend)
    if inputs is not None and not inputs.is_file():
        raise TrtminError(f"--inputs {inputs}: " + ("is a folder; pass the file torch.save wrote" if inputs.is_dir()
                          else "is not a regular file (a pipe or a device); pass the file torch.save wrote"
                          if inputs.exists() else "no such file; pass the file torch.save wrote of the model's arguments"))
    if inputs is not None:
        check_inputs_early(model, inputs)
    if not is_device(device):
        raise TrtminError(f"--device {device!r} is not {DEVICE_WORDS}")
    if device.startswith("cuda") and not gpu_driver_seen():
        raise TrtminError(f"--device {device} was asked for, but no CUDA GPU is visible here; "
                          "run on a GPU machine or use --device cpu")
    if match is not None and oracle not in ERROR_ORACLES:
        raise TrtminError(f"--match applies to the error of a crash or an oom; a {oracle} has no error "
                          "message to match: drop --match")
    if reference != "eager" and oracle != "mismatch":
        raise TrtminError(f"--reference {reference} judges a mismatch against eager's own error; a {oracle} is judged "
                          "without one: drop --reference")
    if match is not None:
        try:
            re.compile(match)
        except re.error as e:
            raise TrtminError(f"--match {match!r} is not a valid regular expression ({e})") from None
    if jobs is None:
        jobs = default_jobs(device)
    check_jobs(jobs)
    parsed_settings = parse_settings(settings)
    check_before_torch(backend, parsed_settings)  # a missing package, a --set typo: in a second, not after torch
    check_gpu_seen(backend, oracle)
    return Options(model=model, oracle=oracle, backend=backend, inputs=inputs, match=match, atol=atol,
                   rtol=rtol, timeout=timeout, device=device, jobs=jobs, any_failure=any_failure,
                   settings=parsed_settings, emit=list(dict.fromkeys(emit or [])), reference=reference, **more)  # once each
