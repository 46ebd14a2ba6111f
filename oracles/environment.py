"""The environment, in the shape of pytorch/TensorRT's bug report template
(.github/ISSUE_TEMPLATE/bug-report.md, "## Environment"), plus TensorRT, ExecuTorch,
ONNX Runtime and the driver, which a compiler bug report needs as well.

Versions come from package metadata (importlib.metadata), under every distribution name a
module is published as (Torch-TensorRT built on TensorRT-RTX is `torch-tensorrt-rtx`); a
module with no metadata (a copied tree) is imported for its `__version__`, and a broken
install reads "unknown", never a crash of the report.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

NOT_INSTALLED = "not installed"

# The compilers a repro's verdict depends on: recorded with every run, kept as first_seen.
# onnxscript holds torch.onnx's op library (its atan2, say): part of the compiler of the
# onnxruntime and tensorrt backends, which run the torch.onnx export.
KEY_PACKAGES = ("torch", "torch_tensorrt", "tensorrt", "tensorrt_rtx", "executorch", "onnxruntime", "onnxscript")
# Distributions that provide a module, in the order we ask for them (else the module's own name).
MODULE_DISTRIBUTIONS = {"tensorrt": ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt-cu11"),
                        "tensorrt_rtx": ("tensorrt-rtx", "tensorrt-rtx-cu13", "tensorrt-rtx-cu12",
                                         "tensorrt-rtx-cu13-bindings", "tensorrt-rtx-cu12-bindings"),
                        "torch_tensorrt": ("torch-tensorrt", "torch_tensorrt", "torch-tensorrt-rtx"),
                        "onnxruntime": ("onnxruntime", "onnxruntime-gpu")}
TORCH_TENSORRT_ON_RTX = "torch-tensorrt-rtx"  # Torch-TensorRT built on TensorRT-RTX
# The bug template's lines read from metadata alone, first found wins.
DISTRIBUTIONS = {
    "PyTorch Version": ("torch",),
    "ExecuTorch Version": ("executorch",),
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
    """The installed version of the module ``package``, or "not installed": from its
    distribution's metadata, else, for trtmin's own compilers (a module copied without
    it), its `__version__`. Any other module (what a plugin imports) is never imported for
    it: one that crashes on import ended `repros run` after its last repro, its record lost."""
    version = first_installed_version(MODULE_DISTRIBUTIONS.get(package, (package,)))
    if version == NOT_INSTALLED and package not in KEY_PACKAGES:  # metadata under another name (cv2's)
        dists = md.packages_distributions().get(package, [])
        return first_installed_version(tuple(dists)) if dists else NOT_INSTALLED
    if version != NOT_INSTALLED or package == "tensorrt" or importlib.util.find_spec(package) is None:
        return version  # a tensorrt without metadata is TensorRT-RTX's alias (Torch-TensorRT-RTX makes one)
    try:
        return str(getattr(importlib.import_module(package), "__version__", "unknown"))
    except Exception:  # noqa: BLE001 - a broken install is reported, not raised
        return "unknown (it fails to import)"


def trtmin_version(version: str) -> str:
    """`version` (trtmin's), and the commit where trtmin runs from a git checkout (every
    commit is 0.1.0): "0.1.0 (git 070e4f1)", so results of two checkouts can be told apart.
    Read from .git's files (worktrees, submodules, packed refs; no git run); a copy without
    .git, or one that cannot be read, gives `version` alone."""
    commit = _git_commit(Path(__file__).resolve().parent.parent)
    return f"{version} (git {commit[:7]})" if commit else version


def _git_commit(checkout: Path) -> str | None:
    import re

    git = checkout / ".git"
    try:
        if git.is_file():  # a worktree or a submodule: "gitdir: PATH", relative to the file's folder
            git = (checkout / git.read_text().split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            common = git / (git / "commondir").read_text().strip() if (git / "commondir").is_file() else git
            loose = common / ref
            head = loose.read_text().strip() if loose.is_file() else next(
                line.split()[0] for line in (common / "packed-refs").read_text().splitlines()
                if line.endswith(" " + ref))
    except (OSError, IndexError, StopIteration):
        return None
    return head if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head) else None


def torch_tensorrt_line() -> str:
    """Torch-TensorRT's version, and whether it is the build on TensorRT-RTX."""
    version = package_version("torch_tensorrt")
    if version == NOT_INSTALLED:
        return version
    try:
        md.version(TORCH_TENSORRT_ON_RTX)
    except md.PackageNotFoundError:
        return version
    return f"{version} ({TORCH_TENSORRT_ON_RTX}: built on TensorRT-RTX)"


def tensorrt_line() -> str:
    """Which TensorRT is here: NVIDIA's full TensorRT (module tensorrt), TensorRT-RTX
    (module tensorrt_rtx, the same Python API), or none."""
    full, rtx = package_version("tensorrt"), package_version("tensorrt_rtx")
    parts = [full] if full != NOT_INSTALLED else []
    if rtx != NOT_INSTALLED:
        parts.append(f"TensorRT-RTX {rtx} (module tensorrt_rtx)")
    if not parts:  # the libraries alone still say what an engine was built with
        return first_installed_version(("tensorrt-cu13-libs", "tensorrt-cu12-libs"))
    return "; ".join(parts)


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


def _cpu() -> str:
    """The CPU's model and the widest vector ISA torch's CPU kernels use here (a vectorized
    kernel's bug can differ between AVX2 and AVX-512 machines)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch
        isa = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - an old torch, or none: the model alone
        return model
    return f"{model}; torch's CPU kernels use {isa}"


def collect_environment() -> dict[str, str]:
    env = {label: first_installed_version(names) for label, names in DISTRIBUTIONS.items()}
    env["Torch-TensorRT Version"] = torch_tensorrt_line()
    env["TensorRT Version"] = tensorrt_line()
    ort = package_version("onnxruntime")  # the provider is part of an ONNX Runtime bug: the backend runs the CPU's
    env["ONNX Runtime Version"] = ort if ort == NOT_INSTALLED else f"{ort} (CPUExecutionProvider, as trtmin runs it)"
    env["ONNX export"] = f"onnx {package_version('onnx')}, onnxscript {package_version('onnxscript')}"
    gpus, cuda = _gpus()
    env.update({
        "CPU Architecture": platform.machine() or "unknown",
        "CPU": _cpu(),
        "OS": _os(),
        "How you installed PyTorch": how_installed("torch"),
        "Python version": platform.python_version(),
        "CUDA version": cuda,
        "GPU models and configuration": gpus,
        "Driver version": _driver(),
    })
    # the template's order
    order = ["Torch-TensorRT Version", "PyTorch Version", "TensorRT Version", "ExecuTorch Version",
             "ONNX Runtime Version", "ONNX export", "CPU Architecture", "CPU", "OS", "How you installed PyTorch", "Python version",
             "CUDA version", "GPU models and configuration", "Driver version"]
    return {k: env[k] for k in order}


# Which template lines a backend's bug needs, by the start of its spec: the others say
# "not installed" about packages the bug never touched.
BACKEND_LINES = {"torch_tensorrt": ("Torch-TensorRT Version", "TensorRT Version"),
                 "tensorrt": ("TensorRT Version", "ONNX export"),  # torch.onnx.export, then TensorRT's parser
                 "executorch:tensorrt": ("ExecuTorch Version", "Torch-TensorRT Version", "TensorRT Version"),
                 "executorch": ("ExecuTorch Version",), "onnxruntime": ("ONNX Runtime Version", "ONNX export"), "inductor": (),
                 "eager": ()}
COMPILER_LINES = ("Torch-TensorRT Version", "TensorRT Version", "ExecuTorch Version", "ONNX Runtime Version",
                  "ONNX export")
GPU_LINES = ("CUDA version", "GPU models and configuration", "Driver version")
# backends whose engines are the GPU's wherever trtmin ran the program: their GPU lines stay, a
# TensorRT build failure's "no GPU" included (it may be the GPU's absence)
GPU_BACKENDS = ("tensorrt", "torch_tensorrt", "executorch:cuda", "executorch:tensorrt")


def format_environment(env: dict[str, str], backend: str | None = None, device: str | None = None) -> str:
    """The "## Environment" list of the Torch-TensorRT bug report template. For a bug
    (`backend`, `device`): of the compilers, only those the backend uses (a plugin's or a
    command's: those installed), and without the GPU lines for a CPU bug (GPU_BACKENDS' are none)."""
    if backend is not None:
        family = backend if backend in BACKEND_LINES else "executorch" if backend.startswith("executorch:") else None
        if family is None:  # a plugin or a command: which compilers it calls is not known
            env = {k: v for k, v in env.items() if v != NOT_INSTALLED}
        else:
            env = {k: v for k, v in env.items() if k not in COMPILER_LINES or k in BACKEND_LINES[family]}
    if device is not None and not device.startswith("cuda") and backend not in GPU_BACKENDS:
        env = {k: v for k, v in env.items() if k not in GPU_LINES}
    return "\n".join(f" - {k}: {v}" for k, v in env.items())
