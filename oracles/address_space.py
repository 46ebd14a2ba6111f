"""The address-space limit of --memory-limit (RLIMIT_AS): a host allocation over it fails
("can't allocate memory", MemoryError), which is an oom verdict, not a machine brought down.

trtmin's workers set it once they have started (torch, the compiler and the program are
theirs, not the job's); repro.py sets the same limit before it calls the backend, with
these functions as they are here (address_space_source), so that alone it fails as the
reduction did. Standard library only: the script must not need trtmin.
"""

from __future__ import annotations

import inspect


def mapped_bytes():
    """The address space this process maps (VmSize), or None where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        return None


def set_address_limit(limit_bytes):
    """RLIMIT_AS (soft and hard) of limit_bytes for all this process does next. Returns None
    once set. Where the process already maps that much, it sets nothing and returns what is
    mapped: every allocation would fail, and anything would look like the bug. Raises
    ImportError where there is no `resource` module (Windows)."""
    import resource
    mapped = mapped_bytes()
    if mapped is not None and limit_bytes <= mapped:
        return mapped
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return None


def mib_to_ask(mapped):
    """A limit (MiB) that leaves room above what is mapped: it, rounded up to a GiB, and one more."""
    return -(-mapped // 2**30) * 1024 + 1024


def address_space_source() -> str:
    """The functions above, for repro.py."""
    return "\n\n".join(inspect.getsource(f) for f in (mapped_bytes, set_address_limit, mib_to_ask))
