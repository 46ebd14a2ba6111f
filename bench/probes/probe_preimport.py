"""GPU probe (eighth session): where a forked worker's Dynamo warm-up spends its 2-3 s on the
H200, and whether the zygote can take the imports of it without starting CUDA.

`python bench/probes/probe_preimport.py` on a GPU machine. The parent is a zygote as trtmin's
is where CUDA is available (torch, torch._dynamo, reset(); no compile). Then, each in a fork:
A0 profiles the warm-up compile (top functions by cumulative time); A1, A2 time CUDA's start,
the warm-up and a first small job; the parent then imports every module A1's warm-up
imported, asks the driver whether that started it, and B1, B2 time the same; B4 forks four at
once, as --jobs 4 does. One JSON line per step."""
import cProfile
import importlib
import io
import json
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
t0 = time.perf_counter()
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch.nn as nn  # noqa: E402
from oracles.cuda_fork import driver_started  # noqa: E402

torch._dynamo.reset()
print(json.dumps({"step": "parent", "import_and_reset": round(time.perf_counter() - t0, 2),
                  "cuda": torch.cuda.is_available(), "driver_started": driver_started()}), flush=True)
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def work(profile: bool) -> dict:
    out: dict = {}
    t = time.perf_counter()
    if DEV == "cuda":
        torch.cuda.init()
        (torch.ones(1, device=DEV) + 1).item()
    out["cuda"] = round(time.perf_counter() - t, 2)
    before = set(sys.modules)
    prof = cProfile.Profile() if profile else None
    t = time.perf_counter()
    if prof:
        prof.enable()
    torch._dynamo.reset()
    torch.compile(lambda x: x + 1, backend="eager")(torch.zeros(1))
    if prof:
        prof.disable()
    out["warm"] = round(time.perf_counter() - t, 2)
    out["new_modules"] = sorted(set(sys.modules) - before)
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(35)
        out["profile"] = s.getvalue()[-6000:]
    m = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8)).to(DEV)
    t = time.perf_counter()
    torch.compile(m, backend="eager")(torch.randn(4, 32, device=DEV)).sum().item()
    out["first_job"] = round(time.perf_counter() - t, 2)
    return out


def forked(n: int, profile: bool = False) -> list[dict]:
    pipes = []
    for _ in range(n):
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(r)
            try:
                res = work(profile)
            except Exception as e:  # noqa: BLE001
                res = {"error": repr(e)[:300]}
            os.write(w, json.dumps(res).encode())
            os._exit(0)
        os.close(w)
        pipes.append(r)
    outs = []
    for r in pipes:
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        outs.append(json.loads(data))
    for _ in range(n):
        os.wait()
    return outs


def show(step: str, res: dict) -> None:
    brief = {k: v for k, v in res.items() if k not in ("new_modules", "profile")}
    brief["n_new_modules"] = len(res.get("new_modules", []))
    print(json.dumps({"step": step, **brief}), flush=True)
    if "profile" in res:
        print(res["profile"], flush=True)


show("A0 profiled", forked(1, profile=True)[0])
a1 = forked(1)[0]
show("A1", a1)
show("A2", forked(1)[0])
t = time.perf_counter()
failed = []
for name in a1.get("new_modules", []):
    try:
        importlib.import_module(name)
    except Exception as e:  # noqa: BLE001
        failed.append(f"{name}: {type(e).__name__}")
print(json.dumps({"step": "parent imports", "modules": len(a1.get("new_modules", [])),
                  "seconds": round(time.perf_counter() - t, 2), "failed": failed[:10],
                  "driver_started": driver_started()}), flush=True)
show("B1", forked(1)[0])
show("B2", forked(1)[0])
for i, res in enumerate(forked(4)):
    show(f"B4[{i}]", res)
