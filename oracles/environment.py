"""The environment, in the shape of pytorch/TensorRT's bug report template
(.github/ISSUE_TEMPLATE/bug-report.md, "## Environment"), plus TensorRT, ExecuTorch,
ONNX Runtime and the driver, which a compiler bug report needs as well.

Versions come from package metadata (importlib.metadata): nothing is imported to read
a version, so a broken tensorrt install cannot crash the report.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

NOT_INSTALLED = "not installed"

# The compilers a repro's verdict depends on: recorded with every run, kept as first_seen.
KEY_PACKAGES = ("torch", "torch_tensorrt", "tensorrt", "executorch", "onnxruntime")
# Distributions that provide a module, in the order we ask for them (else the module's own name).
MODULE_DISTRIBUTIONS = {"tensorrt": ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt-cu11"),
                        "torch_tensorrt": ("torch-tensorrt", "torch_tensorrt"),
                        "onnxruntime": ("onnxruntime", "onnxruntime-gpu")}
# The bug template's lines, first found wins; for TensorRT also its library-only wheels,
# which say what the engine was built with even without the Python module.
DISTRIBUTIONS = {
    "Torch-TensorRT Version": MODULE_DISTRIBUTIONS["torch_tensorrt"],
    "PyTorch Version": ("torch",),
    "TensorRT Version": MODULE_DISTRIBUTIONS["tensorrt"] + ("tensorrt-cu13-libs", "tensorrt-cu12-libs", "tensorrt-rtx"),
    "ExecuTorch Version": ("executorch",),
    "ONNX Runtime Version": MODULE_DISTRIBUTIONS["onnxruntime"],
}


def first_installed_version(names: tuple[str, ...]) -> str:
    """The version of the first of these distributions that is installed (metadata only)."""
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return NOT_INSTALLED


def package_version(package: str) -> str:
    """The installed version of the module ``package`` (metadata only), or "not installed"."""
    return first_installed_version(MODULE_DISTRIBUTIONS.get(package, (package,)))


def how_installed(dist: str = "torch") -> str:
    """pip / uv / conda / source (editable), as the template asks for PyTorch."""
    try:
        d = md.distribution(dist)
    except md.PackageNotFoundError:
        return NOT_INSTALLED
    direct = d.read_text("direct_url.json")
    if direct:
        try:
            info = json.loads(direct)
        except ValueError:
            info = {}
        if info.get("dir_info", {}).get("editable"):
            return "source (editable install)"
        if str(info.get("url", "")).startswith("file:"):
            return "local wheel or source"
    installer = (d.read_text("INSTALLER") or "").strip()
    if (Path(sys.prefix) / "conda-meta").is_dir() and installer in ("", "conda"):
        return "conda"
    return installer or "unknown"


def _os() -> str:
    pretty = ""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    base = f"{platform.system()} {platform.release()}"
    return f"{base} ({pretty})" if pretty else base


def _gpus() -> tuple[str, str]:
    """(GPU models and configuration, CUDA version) as torch sees them."""
    try:
        import torch
    except ImportError:
        return "unknown (torch is not installed)", "unknown"
    cuda = torch.version.cuda or "none (CPU-only torch build)"
    if not torch.cuda.is_available():
        return "none visible to torch", cuda
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append(f"{i}: {p.name}, {p.total_memory / 2**30:.0f} GiB, sm_{p.major}{p.minor}")
    return f"{len(gpus)} GPU(s): " + "; ".join(gpus), cuda


def _driver() -> str:
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            versions = sorted({ln.strip() for ln in out.stdout.splitlines() if ln.strip()})
            if out.returncode == 0 and versions:
                return ", ".join(versions)
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
        return first.strip()
    except (OSError, IndexError):
        return "none (no NVIDIA driver found)"


def collect_environment() -> dict[str, str]:
    env = {label: first_installed_version(names) for label, names in DISTRIBUTIONS.items()}
    gpus, cuda = _gpus()
    env.update({
        "CPU Architecture": platform.machine() or "unknown",
        "OS": _os(),
        "How you installed PyTorch": how_installed("torch"),
        "Python version": platform.python_version(),
        "CUDA version": cuda,
        "GPU models and configuration": gpus,
        "Driver version": _driver(),
    })
    # the template's order
    order = ["Torch-TensorRT Version", "PyTorch Version", "TensorRT Version", "ExecuTorch Version",
             "ONNX Runtime Version", "CPU Architecture", "OS", "How you installed PyTorch", "Python version",
             "CUDA version", "GPU models and configuration", "Driver version"]
    return {k: env[k] for k in order}


def format_environment(env: dict[str, str]) -> str:
    """The "## Environment" list of the Torch-TensorRT bug report template."""
    return "\n".join(f" - {k}: {v}" for k, v in env.items())
