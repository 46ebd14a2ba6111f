"""Benchmark: trtmin (--jobs 1 and --jobs 4) against torch._functorch.fx_minifier on the same cases.

Both start from the same graph (the .pt2 after trtmin's own minimize.program.inputs.prepare) and
apply the same oracle (for the GPU hosts of bench/hosts, `--cases video_policy ...` on the
GPU machine: the real Torch-TensorRT bugs, with the host's own options): oracles.evaluate.evaluate with the case's backend, accepted when
Signature.of(first verdict).matches(v, MATCH). trtmin runs each oracle call in a worker
process; fx_minifier runs in this process (no isolation). Results merge into --json after
every run, so cases can run one at a time; --resume skips runs already recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.cases import CASES  # noqa: E402
from bench.export_case import export_case  # noqa: E402
from minimize.program.inputs import load_inputs, prepare  # noqa: E402
from minimize.program.model import count_call_nodes, lifted_args, load_exported  # noqa: E402
from minimize.reduce import reduce  # noqa: E402
from minimize.run.session import Options  # noqa: E402
from oracles.backends import resolve  # noqa: E402
from oracles.checks import Tolerance  # noqa: E402
from oracles.evaluate import evaluate  # noqa: E402
from oracles.verdict import Signature, Verdict  # noqa: E402
from oracles.worker import death_verdict  # noqa: E402
from bench.isolate import Killed, in_fork  # noqa: E402

RESULTS = ROOT / "bench" / "results"
GPU_HOSTS = ("camera_policy", "video_policy", "video_policy_xl")  # real Torch-TensorRT bugs: GPU only
CPU_HOSTS = ("attn_pool_softmax_1d", "upsampler_dilated_deconv")  # real TensorRT-RTX parser/builder failures
HOSTS = (*CPU_HOSTS, *GPU_HOSTS)  # bench/hosts: real bugs, with the options in their RUN
ORDER = [*[c for c in CASES if c != "big_mlp_stack"], *CPU_HOSTS, "forecaster", "big_mlp_stack",
         *GPU_HOSTS]  # big ones last


@dataclass
class Case:
    name: str
    model: Path
    inputs: Path
    backend: str
    oracle: str
    match: str | None
    core: int | None  # planted core size (None: a real bug, no planted core)
    kills_process: bool = False  # its compiler segfaults: fx_minifier's checks run in a fork
    device: str = "cpu"
    atol: float = 1e-3
    # fx_minifier's graph keeps the weights as constants (get_attr), not inputs: Torch-TensorRT
    # refuses a complex64 graph input (the RoPE table), so fx_minifier could not start.
    weights_as_constants: bool = False


def load_case(name: str, cache: Path) -> Case:
    if name in HOSTS:
        host = __import__(f"bench.hosts.{name}", fromlist=["RUN"])
        model, inputs = cache / f"{name}.pt2", cache / f"{name}_inputs.pt"
        if not (model.exists() and inputs.exists()):
            subprocess.run([sys.executable, "-m", "bench.hosts", name, str(cache)], check=True, cwd=ROOT)
        run = dict(zip(host.RUN[::2], host.RUN[1::2]))
        return Case(name, model, inputs, run["--backend"], run["--oracle"], None, None, device=run["--device"],
                    atol=float(run.get("--atol", 1e-3)), weights_as_constants=True)
    if name == "forecaster":  # the real Inductor bug (pytorch/pytorch#175966); its test expects <= 3 nodes
        return Case(name, ROOT / "examples/forecaster.pt2", ROOT / "examples/forecaster_inputs.pt",
                    "inductor", "mismatch", None, None)
    mod = __import__(f"bench.cases.{CASES[name]}", fromlist=["build"])
    model, inputs = cache / f"{CASES[name]}.pt2", cache / f"{CASES[name]}_inputs.pt"
    if not (model.exists() and inputs.exists()):
        export_case(CASES[name], cache)
    return Case(name, model, inputs, str(ROOT / f"bench/cases/{CASES[name]}.py") + ":backend",
                mod.ORACLE, mod.MATCH, mod.CORE, getattr(mod, "KILLS_PROCESS", False))


def error_tail(e: BaseException) -> str:
    return " | ".join("".join(traceback.format_exception(e)).strip().splitlines()[-4:])


# ---------------------------------------------------------------------------- trtmin
def run_trtmin(case: Case, jobs: int, out: Path) -> dict[str, Any]:
    opts = Options(model=case.model, oracle=case.oracle, backend=case.backend, inputs=case.inputs,
                   match=case.match, jobs=jobs, device=case.device, atol=case.atol,
                   verify=False)  # the reduction's time, as fx_minifier's; the script's run alone comes after
    seen = [0]

    def progress(p: Any) -> None:
        if p.counters.oracle_calls >= seen[0] + 25:
            seen[0] = p.counters.oracle_calls
            print(f"  [trtmin j{jobs}] {p.counters.oracle_calls} calls, {len(p.current.nodes)} nodes, "
                  f"pass {p.current_pass}", flush=True)

    t0 = time.monotonic()
    try:
        s = reduce(opts, out, force=True, on_change=progress, log=lambda m: print(f"  [trtmin] {m}", flush=True))
    except Exception as e:  # noqa: BLE001 - a benchmark reports errors, it does not stop on them
        return {"error": error_tail(e), "wall_s": round(time.monotonic() - t0, 2)}
    t = s["timing"]
    return {"original_nodes": s["original_nodes"], "final_nodes": s["final_nodes"],
            "oracle_calls": s["oracle_calls"], "evaluations": t["evaluations"], "batches": t.get("batches"),
            "wall_s": round(time.monotonic() - t0, 2), "seconds": t["seconds"],
            "oracle_seconds": t["oracle_seconds"], "trtmin_seconds": t["trtmin_seconds"],
            "own_fraction": round(t["trtmin_seconds"] / max(t["seconds"], 1e-9), 3),
            "passes": s["passes"], "pass_seconds": t["pass_seconds"], "worker_restarts": t["worker_restarts"],
            "final_verdict": s["final_verdict"]}


# ---------------------------------------------------------------------------- fx_minifier
class Budget(Exception):  # raised from module_fails: fx_minifier has no budget of its own
    pass


def start_graph(case: Case) -> tuple[fx.GraphModule, list[Any]]:
    """trtmin's starting graph as a plain GraphModule, weights as placeholders (or, with
    case.weights_as_constants, as attributes the graph reads); call nodes nothing uses
    (assertions, dead values) are dropped, as trtmin drops them."""
    from torch.export.graph_signature import InputKind
    ep = prepare(load_exported(case.model), case.device)
    lifted = lifted_args(ep, load_inputs(case.inputs, ep))
    values = [a.detach().to(case.device) if isinstance(a, torch.Tensor) else a for a in lifted]
    kinds = {s.arg.name: s.kind for s in ep.graph_signature.input_specs}
    graph, env, root, args = fx.Graph(), {}, torch.nn.Module(), []
    placeholders = iter(values)
    for n in ep.graph_module.graph.nodes:
        if n.op == "call_function" and not n.users:
            continue
        if n.op == "placeholder":
            value = next(placeholders)
            if case.weights_as_constants and kinds.get(n.name) != InputKind.USER_INPUT:
                root.register_buffer(n.name, value)
                env[n] = graph.get_attr(n.name)
                continue
            args.append(value)
        env[n] = graph.node_copy(n, lambda a: env[a])
        env[n].meta = {}  # fx_minifier reads none of it; the oracle retraces the graph
    return fx.GraphModule(root, graph), args


def run_fx(case: Case, max_calls: int, max_seconds: float, log: Path) -> dict[str, Any]:
    from torch._functorch.fx_minifier import minifier
    t0 = time.monotonic()
    gm, args = start_graph(case)
    setup_s = time.monotonic() - t0
    backend, tol = resolve(case.backend), Tolerance(atol=case.atol, asked=case.oracle)  # judged as trtmin judges it
    match = re.compile(case.match) if case.match else None
    t1 = time.monotonic()
    def check(g: fx.GraphModule, inps: Any) -> Verdict:
        if not case.kills_process:
            return evaluate(g, inps, backend, tol, case.device)
        try:  # as PyTorch's minifier does in its isolated mode (bench/isolate.py)
            return Verdict.from_dict(in_fork(lambda: evaluate(g, inps, backend, tol, case.device).to_dict()))
        except Killed as e:
            return Verdict.from_dict(death_verdict(f"killed by {e}", ""))

    with torch.no_grad():
        first = check(gm, args)  # = trtmin's check of the original: one call
    calls, last, sig = [1], [count_call_nodes(gm.graph)], Signature.of(first)
    if not sig.matches(first, match) or first.kind != case.oracle:
        return {"error": f"original does not fail the {case.oracle} oracle: {first.describe()}"}

    def module_fails(g: fx.GraphModule, inps: Any) -> bool:
        if calls[0] >= max_calls or time.monotonic() - t1 > max_seconds:
            raise Budget(f"stopped at budget ({calls[0]} calls, {time.monotonic() - t1:.0f} s)")
        calls[0] += 1
        if calls[0] % 25 == 0:
            print(f"  [fx_minifier] {calls[0]} calls, {last[0]} nodes, {time.monotonic() - t1:.0f} s", flush=True)
        return sig.matches(check(g, inps), match)

    def dump_state(g: fx.GraphModule, inps: Any) -> None:  # called with every accepted state
        last[0] = count_call_nodes(g.graph)

    status = "done"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f, contextlib.redirect_stderr(f), torch.no_grad():
        try:
            result, _ = minifier(gm, args, module_fails, dump_state=dump_state, skip_sanity=True)
            last[0] = count_call_nodes(result.graph)
        except Budget as e:
            status = str(e)
        except Exception as e:  # noqa: BLE001
            status = f"error: {error_tail(e)}"
    return {"original_nodes": count_call_nodes(gm.graph), "final_nodes": last[0], "oracle_calls": calls[0],
            "wall_s": round(time.monotonic() - t1, 2), "setup_s": round(setup_s, 2), "status": status,
            "first_verdict": first.describe()}


# ---------------------------------------------------------------------------- report
def fmt(r: dict[str, Any] | None, *keys: str) -> str:
    if not r:
        return "—"
    if "error" in r and "final_nodes" not in r:
        return "error"
    return " / ".join("—" if r.get(k) is None else f"{r[k]:g}" if isinstance(r[k], float) else str(r[k])
                      for k in keys)


def table(results: dict[str, Any]) -> str:
    rows = ["| case | oracle | CORE | nodes | trtmin j1: final / calls / wall s | own time | "
            "trtmin j4: final / calls / evals / rounds / wall s | fx_minifier*: final / calls / wall s |",
            "|---|---|---|---|---|---|---|---|"]
    for name in [n for n in ORDER if n in results]:
        r = results[name]
        j1, j4, fx_ = r.get("trtmin_j1"), r.get("trtmin_j4"), r.get("fx_minifier")
        nodes = next((x["original_nodes"] for x in (j1, j4, fx_) if x and "original_nodes" in x), "?")
        own = f"{j1['own_fraction']:.0%} ({j1['trtmin_seconds']:g} s)" if j1 and "own_fraction" in j1 else "—"
        fx_cell = fmt(fx_, "final_nodes", "oracle_calls", "wall_s")
        if fx_ and fx_.get("status", "done") != "done":
            fx_cell += f" ({fx_['status'][:60]})"
        oracle = r["case"]["oracle"]
        rows.append(f"| {name} | {oracle} | {r['case']['core'] or '≤3 (test)'} | {nodes} | "
                    f"{fmt(j1, 'final_nodes', 'oracle_calls', 'wall_s')} | {own} | "
                    f"{fmt(j4, 'final_nodes', 'oracle_calls', 'evaluations', 'batches', 'wall_s')} | {fx_cell} |")
    return "\n".join(rows) + ("\n\n*fx_minifier runs in-process, without isolation; its calls include the check "
                              "of the original.")


def targets(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    ok = lambda cond: "PASS" if cond else "FAIL"  # noqa: E731
    for name in [n for n in ORDER if n in results]:
        r = results[name]
        j1, j4, fx_ = r.get("trtmin_j1") or {}, r.get("trtmin_j4") or {}, r.get("fx_minifier") or {}
        if "final_nodes" not in j1:
            out.append(f"{name}: trtmin j1 {'error: ' + j1['error'] if j1 else 'not run'}")
            continue
        f, calls, n, core = j1["final_nodes"], j1["oracle_calls"], j1["original_nodes"], r["case"]["core"] or 2
        out.append(f"{name}: final {f} <= CORE+1 = {core + 1}: {ok(f <= core + 1)}")  # forecaster: its test's <= 3
        if "final_nodes" in fx_:
            out.append(f"{name}: final {f} <= fx_minifier's {fx_['final_nodes']}: {ok(f <= fx_['final_nodes'])}")
        if "final_nodes" in fx_ and n >= 200:
            x, cut = calls / max(fx_["oracle_calls"], 1), " (fx stopped at budget)" if "budget" in fx_["status"] else ""
            out.append(f"{name}: {calls} calls <= 0.5x fx_minifier's {fx_['oracle_calls']}{cut}: {ok(x <= 0.5)} ({x:.2f}x)")
        if n >= 5000:
            out.append(f"{name}: {calls} oracle calls <= 60: {ok(calls <= 60)}")
            out.append(f"{name}: trtmin's own time {j1['own_fraction']:.0%} of wall <= 10%: {ok(j1['own_fraction'] <= 0.1)}")
        if name == "slow_oracle" and "final_nodes" in j4:
            x = j4["wall_s"] / j1["wall_s"]
            out.append(f"{name}: --jobs 4 wall {j4['wall_s']} s <= 0.35x --jobs 1's {j1['wall_s']} s: {ok(x <= 0.35)} ({x:.2f}x)")
    return out


def version() -> str:
    """Which trtmin ran: TRTMIN_COMMIT where the caller sets it (the GPU machine's copy of
    the tree has a stale .git: it said 524a3b9-dirty at 96b6b40), ROOT's git commit, or the
    SNAPSHOT file of a `git archive` copy."""
    if os.environ.get("TRTMIN_COMMIT"):
        return os.environ["TRTMIN_COMMIT"]
    if (ROOT / "SNAPSHOT").exists():
        return (ROOT / "SNAPSHOT").read_text().strip()
    git = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return git.stdout.strip() or str(ROOT)


def save(path: Path, name: str, case: dict[str, Any], key: str, result: dict[str, Any]) -> dict[str, Any]:
    """Merge one run into the JSON file (re-read first: other runs may have written to it)."""
    data = json.loads(path.read_text()) if path.exists() else {"cases": {}}
    data["cases"].setdefault(name, {}).update({"case": case, key: result})
    data["meta"] = {"torch": torch.__version__, "cpus": os.cpu_count(), "updated": result["date"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=ORDER, choices=ORDER, metavar="NAME")
    ap.add_argument("--jobs", nargs="*", type=int, default=[1, 4], help="trtmin --jobs values to run (none: skip)")
    ap.add_argument("--skip-fx", action="store_true", help="do not run fx_minifier")
    ap.add_argument("--fx-max-calls", type=int, default=2000)
    ap.add_argument("--fx-max-seconds", type=float, default=1800.0)
    ap.add_argument("--json", type=Path, default=RESULTS / "bench.json")
    ap.add_argument("--resume", action="store_true", help="skip runs already recorded in --json")
    ap.add_argument("--report", action="store_true", help="only print the table from --json")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    data = json.loads(a.json.read_text()) if a.json.exists() else {"cases": {}}
    work = a.json.parent / "work"
    for name in [] if a.report else sorted(a.cases, key=ORDER.index):
        case = load_case(name, a.json.parent / "cases")
        info = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(case).items()}
        for key, jobs in [(f"trtmin_j{j}", j) for j in a.jobs] + ([] if a.skip_fx else [("fx_minifier", 0)]):
            if a.resume and "error" not in data["cases"].get(name, {}).get(key, {"error": 1}):
                continue
            print(f"== {name}: {key}", flush=True)
            r = (run_trtmin(case, jobs, work / name / key) if jobs
                 else run_fx(case, a.fx_max_calls, a.fx_max_seconds, work / name / "fx_minifier.log"))
            r.update(date=datetime.now(timezone.utc).isoformat(timespec="seconds"), trtmin=version())
            print(f"   {json.dumps({k: v for k, v in r.items() if k not in ('passes', 'pass_seconds')})}", flush=True)
            data = save(a.json, name, info, key, r)
    print(table(data["cases"]))
    print("\nTargets:\n" + "\n".join(f"- {t}" for t in targets(data["cases"])))

if __name__ == "__main__":
    main()
