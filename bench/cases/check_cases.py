"""Sanity-check the planted-bug benchmark cases.

For every case: build, export, count call_function nodes, run the plugin on the lifted
``ep.graph_module`` and confirm that the oracle fires. Then, with a tiny cut-to-input
reducer (greedy chunk removal down to a 1-minimal failing node set), check that the
smallest failing core has CORE nodes. Finally strip failing cores off the full graph until
it passes, and confirm the plugin matches eager bit-for-bit on that trigger-free graph.

Usage: python bench/cases/check_cases.py [case ...]
"""

from __future__ import annotations

import importlib
import operator
import re
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch
from torch.export.graph_signature import InputKind
from torch.fx import Graph, GraphModule, Interpreter, Node

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.cases import CASES  # noqa: E402
from bench.isolate import in_fork  # noqa: E402


def lifted_inputs(ep: torch.export.ExportedProgram, user: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    it, out = iter(user), []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            out.append(next(it))
        else:
            out.append(ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target])
    return out


def cut(gm: GraphModule, keep: set[Node], env: dict[Node, Any]) -> tuple[GraphModule, list[Any]] | None:
    """Cut-to-input candidate: kept nodes, every other value they use becomes an input."""
    keep = {n for n in keep if not (n.target is operator.getitem and n.args[0] not in keep)}
    order = [n for n in gm.graph.nodes if n in keep]
    cut_vals = list(dict.fromkeys(a for n in order for a in n.all_input_nodes if a not in keep))
    if not order or any(not isinstance(env[a], torch.Tensor) for a in cut_vals):
        return None
    g, remap = Graph(), {}
    for i, a in enumerate(cut_vals):
        remap[a] = g.placeholder(f"in_{i}")
        remap[a].meta["val"] = env[a]
    for n in order:
        remap[n] = g.node_copy(n, lambda a: remap[a])
    sinks = [remap[n] for n in order if not any(u in keep for u in n.users) and isinstance(env[n], torch.Tensor)]
    if not sinks:
        return None
    g.output(tuple(sinks))
    return GraphModule(gm, g), [env[a] for a in cut_vals]


def _close(r: torch.Tensor, g: Any) -> bool:
    if not isinstance(g, torch.Tensor) or g.shape != r.shape or g.dtype != r.dtype:
        return False
    if r.is_floating_point() or r.is_complex():
        return torch.allclose(r, g, rtol=1e-3, atol=1e-3, equal_nan=True)
    return torch.equal(r, g)


def verdict(case: ModuleType, gm: GraphModule, inputs: list[Any]) -> tuple[bool, str]:
    """(oracle fires?, detail). A candidate eager cannot run is never a failure."""
    try:
        ref = list(gm(*inputs))
    except Exception as e:  # noqa: BLE001
        return False, f"eager fails: {e}"
    try:
        got = run_backend(case, gm, inputs)
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:90]
        return case.ORACLE == "crash" and (case.MATCH is None or re.search(case.MATCH, str(e)) is not None), msg
    if case.ORACLE == "crash":
        return False, "no exception"
    if case.ORACLE == "nan":  # trtmin's nan oracle: non-finite (NaN or inf) where eager is finite
        bad = sum(int((~g.isfinite() & r.isfinite()).sum()) for r, g in zip(ref, got) if g.is_floating_point())
        return bad > 0, f"{bad} non-finite where eager is finite"
    err = max(((r.double() - g.double()).abs().nan_to_num(float("inf")).max().item()
               for r, g in zip(ref, got) if r.is_floating_point() and r.numel()), default=0.0)
    return not all(_close(r, g) for r, g in zip(ref, got)), f"max abs err {err:.3g}"


def run_backend(case: ModuleType, gm: GraphModule, inputs: list[Any]) -> list[Any]:
    """The plugin's outputs; in a forked child where its compile kills the process."""
    run = lambda: list(case.backend(gm, list(inputs))(*inputs))
    return in_fork(run) if getattr(case, "KILLS_PROCESS", False) else run()


def exact(case: ModuleType, gm: GraphModule, inputs: list[Any]) -> bool:
    ref, got = gm(*inputs), run_backend(case, gm, inputs)
    return len(ref) == len(got) and all(torch.equal(r, g) for r, g in zip(ref, got))


def reduce(nodes: list[Node], fails: Callable[[list[Node]], bool]) -> list[Node]:
    """Greedy chunked removal (ddmin complement steps) until 1-minimal."""
    cur, chunk = list(nodes), max(1, len(nodes) // 2)
    while True:
        i, changed = 0, False
        while i < len(cur):
            cand = cur[:i] + cur[i + chunk:]
            if cand and fails(cand):
                cur, changed = cand, True
            else:
                i += chunk
        if chunk == 1 and not changed:
            return cur
        chunk = max(1, chunk // 2)


def check(name: str, mod_name: str) -> dict[str, Any]:
    case = importlib.import_module(f"bench.cases.{mod_name}")
    model, args = case.build()
    t0 = time.perf_counter()
    ep = torch.export.export(model, args)
    export_s = time.perf_counter() - t0
    gm = ep.graph_module
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    inputs = [t.detach() for t in lifted_inputs(ep, args)]  # inference only from here on

    t0 = time.perf_counter()
    fires, detail = verdict(case, gm, inputs)
    full_s = time.perf_counter() - t0
    if hasattr(case, "COMPILE_SECONDS"):
        case.COMPILE_SECONDS = 0.0  # keep the reduction below fast

    rec = Interpreter(gm, garbage_collect_values=False)
    rec.run(*inputs)
    env = rec.env

    def fails(keep: list[Node]) -> bool:
        c = cut(gm, set(keep), env)
        return c is not None and verdict(case, *c)[0]

    core = reduce(calls, fails) if fires else []
    core = [n for n in core if not (n.target is operator.getitem and n.args[0] not in core)]
    keep, stripped = set(calls), 0
    while fails(list(keep)) and stripped < 20:
        keep -= set(reduce([n for n in calls if n in keep], fails))
        stripped += 1
    c = cut(gm, keep, env)
    clean_ok = c is not None and exact(case, *c)
    return dict(name=name, calls=len(calls), oracle=case.ORACLE, fires=fires, detail=detail,
                core=len(core), CORE=case.CORE, core_ops=[str(n.target) for n in core],
                clean=f"{'exact' if clean_ok else 'DIFF'} ({len(keep)} nodes, {stripped} cores cut)",
                export_s=export_s, full_s=full_s)


def main() -> None:
    names = sys.argv[1:] or list(CASES)
    rows = []
    for name in names:
        r = check(name, CASES[name])
        rows.append(r)
        print(f"{r['name']}: {r['calls']} call nodes, export {r['export_s']:.1f}s, plugin on full graph "
              f"{r['full_s']:.1f}s -> {r['oracle']} fires={r['fires']} [{r['detail']}]; "
              f"core {r['core']} {r['core_ops']}; trigger-free graph: {r['clean']}", flush=True)
    print(f"\n{'case':20} {'calls':>6} {'oracle':9} {'fires':6} {'CORE':>4} {'found':>5} {'export_s':>8}  clean")
    for r in rows:
        print(f"{r['name']:20} {r['calls']:6d} {r['oracle']:9} {str(r['fires']):6} {r['CORE']:4d} "
              f"{r['core']:5d} {r['export_s']:8.1f}  {r['clean']}")
    ok = all(r["fires"] and r["core"] == r["CORE"] and r["clean"].startswith("exact") for r in rows)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
