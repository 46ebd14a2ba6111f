"""Localization: one run with every value as an output guesses where the bug is.

For a mismatch or a NaN, the first node whose value is off when every kept node is an
output of the compiled graph (what Polygraphy users do by hand with `--trt-outputs mark
all`) usually ends the shortest failing prefix. trtmin takes it as a guess only: the
window search tries that node's shortest suffixes first, so a right guess costs the
localization run and 1 or 2 calls where bisection costs 2*log2(n), and a wrong one a
few calls more, never a different kind of answer (minimize/search/passes/bisect_window.py).
Marking outputs can change what a compiler fuses, so the bug may not show at all;
then there is no guess and the search is a plain binary search, one call dearer.

A compile grows faster than the program (Torch-TensorRT: minutes for 5,000 nodes), so a
large program is localized on growing prefixes first (256 nodes, then 4 times more while
under half the program): a bug in the first layers, the common case, costs a run of
seconds; one at the end costs the whole run and two far smaller ones (bench/README.md).

For a crash there is often a guess for free: a compiler that is an fx Interpreter
(Torch-TensorRT's converters) or Inductor's lowering names in its error the node it was
working on and the source line that node was traced from (oracles/checks.py failing_node);
TensorRT's ONNX parser names the ONNX node, whose fx node and source line torch.onnx keeps
(oracles/backends/onnx_export.py named_node_text). The window search then starts at that
node of ours, at no extra call.
"""

from __future__ import annotations

import re
from typing import Any

from torch.fx.node import _get_qualified_name

from minimize.program.candidate import Nodes
from minimize.search.problem import PathEnds, ReductionProblem
from oracles.verdict import VALUE_ORACLES, Verdict

MIN_NODES = 16                       # below this a binary search costs <= 4 calls: not worth a run
PREFIXES_FROM = 1024                 # a program this large is localized on prefixes first
FIRST_PREFIX = 256                   # their first length; each next is 4 times longer


def worth_localizing(problem: ReductionProblem, cand: Nodes) -> bool:
    """Whether a localization run may be made on `cand`. Without the original's verdict
    (a replay that hypothesizes it) the oracle decides alone: rules.localize is only
    set for localizable oracles."""
    sig = problem.signature
    return problem.rules.localize and len(cand) >= MIN_NODES and (sig is None or sig.kind in VALUE_ORACLES)


def prefix_lengths(n: int) -> list[int]:
    """The lengths localization tries on an n-node program: growing prefixes while they
    are under half of it, then the whole (one run below PREFIXES_FROM nodes)."""
    lengths, k = [], FIRST_PREFIX
    while n >= PREFIXES_FROM and 2 * k < n:
        lengths.append(k)
        k *= 4
    return lengths + [n]


def _values_off(problem: ReductionProblem, cand: Nodes) -> tuple[Verdict, list[tuple[int, Verdict]]]:
    """One run of `cand` with every value an output: its verdict, and the nodes whose
    values are off with their verdicts, in graph order."""
    shown, problem.current_pass = problem.current_pass, f"{problem.current_pass}: localizing"  # for the live view
    try:
        runs = problem.runs(problem.at(cand).but(mark_all=True))
    finally:
        problem.current_pass = shown
    if problem.signature is None:  # only on a replay that hypothesizes the original's verdict (speculate.py)
        raise PathEnds
    run = next((r for r in runs if r.extra.get("deviating")), runs[0])
    return run, [(int(i), Verdict.from_dict(d)) for i, d in run.extra.get("deviating") or []]


def first_off_position(problem: ReductionProblem, cand: Nodes) -> int | None:
    """Position in `cand` of the first node upstream of the original's failing output whose
    value is off the way the original is (else, in the whole program's run, the first of
    them off at all), from runs with every value an output on growing prefixes
    (prefix_lengths); None when localization is off, does not apply, or finds nothing."""
    if not worth_localizing(problem, cand):
        return None
    for k in prefix_lengths(len(cand)):
        run, off = _values_off(problem, cand[:k])
        pick = next((o for o in off if problem.same_bug(o[1]) and problem.upstream_of_symptom(o[0])), None)
        if pick is not None:
            break
    else:
        pick = next((o for o in off if problem.upstream_of_symptom(o[0])), None)
    if pick is None or pick[0] not in cand:
        # Say why the search had no guess (one call spent): the extra outputs hid the bug, or broke the compile.
        said = (f"the {len(cand)}-node program compiled with every value an output failed ({run.describe()})"
                if run.kind in ("crash", "oom", "hang") else
                f"no value off in the {len(cand)}-node program compiled with every value an output ({run.describe()})")
        problem.notes.setdefault("localization", f"{said}; bisected instead")
        return None
    node, v = problem.program.nodes[pick[0]], pick[1]
    problem.guessed_node = pick[0]
    how = ("non-finite where eager is finite" if v.kind == "nan" else
           f"off by max abs {v.max_abs:.4g}" if v.max_abs is not None else f"off ({v.detail})")
    if "first_off_value" not in problem.notes:  # keep the first: the largest program localized
        problem.notes["first_off_value"] = f"`{node.name}` ({node.target}): {how}"
        problem.notes["_first_off_node"] = pick[0]  # reduce says whether the result kept it
        problem.notes["localized_nodes"] = k
        if k < len(cand):
            problem.notes["localized_prefix_of"] = len(cand)
    return cand.index(pick[0])


# torch.fx's generated forward, where a stack trace ends when the node has no source stack:
#   File "<eval_with_key>.2", line 14, in forward
#       layer_norm = torch.ops.aten.layer_norm.default(add, [16], ...)
_GENERATED_LINE = re.compile(r"^(\w+) = torch\.ops\.", re.M)


# A source file's folders: a journaled error's stack and a re-export's nodes name the same
# file from other folders (a resume on Program.digest), so the file's name alone is compared.
_FOLDERS = re.compile(r"(?:[A-Za-z]:)?[^\s\"',()]*[/\\](?=[^\s\"',()/\\]+\.py\b)")


def _stack_key(stack: str | None) -> str:
    return "\n".join(_FOLDERS.sub("", line.strip()) for line in (stack or "").strip().splitlines())


def _target_name(target: Any) -> str:
    try:
        name = _get_qualified_name(target)  # as torch.fx prints it in "While executing"
    except Exception:  # noqa: BLE001 - a target fx cannot name: match by stack only
        name = str(target)
    return name.removeprefix("torch.ops.")  # Inductor prints aten.sin.default


# ops a compiler runs as another core ATen op, whose name its runtime error gives (ExecuTorch's
# kernel of conv3d is aten::convolution.out)
_CORE_ATEN_FORM = {f"aten.{op}": "aten.convolution" for op in (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_convolution")}


def _op_as_core_aten(op: str) -> str:
    """An op's name (no overload) as core ATen runs it: "aten.conv3d" -> "aten.convolution"."""
    return _CORE_ATEN_FORM.get(op, op)


def named_failing_position(problem: ReductionProblem, cand: Nodes) -> int | None:
    """Position in `cand` of the node the compiler's error on `cand` says it was working
    on, or None. Its graph is Dynamo's or AOT's, not ours (names differ), so it is matched by
    the source stack it was traced from (what torch keeps), then by target (an op the
    compiler decomposed has another); without stacks, by a target (or, failing that, an op
    under any overload) only one node has. The
    first such node: a guess too early costs a few calls, one too late leaves nodes for
    later passes. A replay that only hypothesizes `cand`'s verdict has no guess (None), as
    a run without such an error. Of several such nodes, the one of the error's node name.
    """
    if not problem.rules.locate_from_errors:
        return None
    verdict = problem.known_verdict(problem.at(cand))
    hint = verdict.extra.get("failing_node") if verdict is not None else None
    if not hint:
        return None
    nodes = problem.program.nodes
    stack = _stack_key(hint.get("stack"))
    named = _GENERATED_LINE.findall(stack)  # a stack in the slice's own code names our node
    by_name = [p for p, i in enumerate(cand) if named and nodes[i].name == named[-1]]
    same_line = [p for p, i in enumerate(cand) if stack and _stack_key(nodes[i].meta.get("stack_trace")) == stack]
    same_op = [p for p in (same_line or range(len(cand))) if _target_name(nodes[cand[p]].target) == hint["target"]]
    if by_name:
        picks = by_name
    elif same_line:
        picks = same_op or same_line  # that line's failing op, or its first op (the compiler decomposed it)
    elif not stack:  # no stack at all: the target, where only one node has it; else its op under another
        wanted = hint["target"].rsplit(".", 1)[0]  # (ExecuTorch names _upsample_bicubic2d_aa.vec .default)
        same_op_any_overload = [p for p in range(len(cand))
                                if _op_as_core_aten(_target_name(nodes[cand[p]].target).rsplit(".", 1)[0]) == wanted]
        picks = (same_op if len(same_op) == 1 else
                 same_op_any_overload if not same_op and len(same_op_any_overload) == 1 else [])
    else:
        picks = []  # a stack that names none of ours: a decomposed op's target may be another node's
    if not picks:
        return None
    # of those, the one the error names, where the compiler's graph names it as ours does (an
    # interpreter over our graph, as Torch-TensorRT's): a transformer's 32 blocks share each
    # source line, and the first block's softmax was taken for the 32nd's
    pick = next((p for p in picks if nodes[cand[p]].name == hint.get("name")), picks[0])
    node = nodes[cand[pick]]
    problem.guessed_node = cand[pick]
    problem.notes.setdefault("named_node", f"`{node.name}` ({node.target})")
    return pick
