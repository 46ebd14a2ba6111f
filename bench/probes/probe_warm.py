"""GPU probe (seventh session): what in Dynamo's first compile starts CUDA, and can a zygote
warm up without starting it. `python bench/probes/probe_warm.py VARIANT` on a GPU machine:
trace (which CUDA calls that compile makes), none (no compile), hide (is_available False),
hide_all (and no devices), guard (the CUDA device guard a no-op), hide_guard (all of it).
Each prints the parent's CUDA state and whether a fork then starts CUDA and compiles.
Measured on the H200: only hide_guard leaves the fork its CUDA; workers forked after such a
warm-up were slower, so trtmin does not do it (minimize/run/worker_side.py, preload)."""
import os, sys, time, json
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
variant = sys.argv[1]
t0 = time.perf_counter()
import torch, torch._dynamo
import torch.cuda
log = {"variant": variant, "import": round(time.perf_counter() - t0, 2)}
t = time.perf_counter(); torch._dynamo.reset(); log["reset"] = round(time.perf_counter() - t, 2)
seen = []
def prof(frame, event, arg):
    if event == "c_call":
        name = getattr(arg, "__name__", "")
        if "cuda" in name.lower() or "device" in name.lower():
            f = frame; st = []
            for _ in range(6):
                if f is None: break
                st.append(f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}:{f.f_code.co_name}"); f = f.f_back
            key = name + " <- " + " <- ".join(st)
            if key not in seen: seen.append(key)
saved = {}
def patch(obj, name, val):
    if hasattr(obj, name):
        saved[(obj, name)] = getattr(obj, name); setattr(obj, name, val)
if variant != "none":
    if variant in ("hide", "hide_all", "hide_guard"):
        patch(torch.cuda, "is_available", lambda: False)
    if variant in ("hide_all", "hide_guard"):
        patch(torch.cuda, "device_count", lambda: 0)
        patch(torch._C, "_cuda_getDeviceCount", lambda: 0)
    if variant == "guard":
        patch(torch._C, "_ensureCUDADeviceGuardSet", lambda: None)
    if variant == "hide_guard":
        patch(torch._C, "_ensureCUDADeviceGuardSet", lambda: None)
    if variant in ("trace", "guard"): sys.setprofile(prof)
    t = time.perf_counter()
    torch.compile(lambda x: x + 1, backend="eager")(torch.zeros(1))
    sys.setprofile(None)
    log["warm"] = round(time.perf_counter() - t, 2)
    for (o, n), v in saved.items(): setattr(o, n, v)
log["parent_cuda_initialized"] = torch.cuda.is_initialized()
log["calls"] = seen[:40]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r); out = {}
    try:
        t = time.perf_counter(); torch.cuda.init(); (torch.ones(1, device="cuda") + 1).item(); out["cuda"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter(); torch._dynamo.reset(); torch.compile(lambda x: x + 1, backend="eager")(torch.zeros(1)); out["warm_in_child"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter(); torch.compile(lambda x: torch.sin(x) * 2, backend="inductor")(torch.ones(8, device="cuda")).sum().item(); out["inductor_cuda"] = round(time.perf_counter() - t, 2)
        out["ok"] = True
    except Exception as e:
        out["error"] = repr(e)[:300]
    os.write(w, json.dumps(out).encode()); os._exit(0)
os.close(w); data = b""
while chunk := os.read(r, 65536): data += chunk
os.waitpid(pid, 0)
log["child"] = json.loads(data or b"{}")
print(json.dumps(log, indent=1))
