"""Whether this process has started the CUDA driver, which a fork then cannot use.

A process whose driver was initialized (cuInit, by torch or by any library it loaded) has
forks that fail their first CUDA call with cudaErrorInitializationError, even where
`torch.cuda.is_initialized()` is false: the CUDA runtime starts the driver when asked for
the device count (`torch._C._cuda_getDeviceCount()`), and so does the CUDA device guard
that Dynamo's fake tensors set up, and torch is told of neither. The zygote
(oracles/zygote.py) asks the driver itself before it forks any worker.
"""

from __future__ import annotations

import ctypes

CUDA_SUCCESS = 0


def driver_started() -> bool:
    """Whether this process has initialized the CUDA driver. Before cuInit every driver
    call fails with CUDA_ERROR_NOT_INITIALIZED and starts nothing, so one that succeeds
    says cuInit ran. Loading the library starts nothing either; without it (no NVIDIA
    driver) nothing can have started."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return driver.cuDeviceGetCount(ctypes.byref(count)) == CUDA_SUCCESS
