"""Checks: compare a backend's outputs with eager's, and classify what was raised."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

import torch

from oracles.errors import error_chain
from oracles.reference import ERROR_RATIO, error_ratio
from oracles.verdict import Verdict

# What counts as an OOM: these exception types, or a message that says one of these
# (any case): CUDA's "CUDA out of memory", the CPU allocator's "can't allocate memory"
# under a memory limit (RLIMIT_AS, --memory-limit). repro.py's pattern is made of the same
# (oom_pattern), so the script and trtmin agree on what is an OOM.
OOM_TYPES = ("OutOfMemoryError", "MemoryError")
OOM_MESSAGES = ("out of memory", "can't allocate memory")


def says_oom(message: str) -> bool:
    lowered = message.lower()
    return any(m in lowered for m in OOM_MESSAGES)


def oom_pattern() -> str:
    """A regex for error text ('Type: message', one exception a line, as repro.py writes it)
    that matches what classify_exception calls an OOM: one of OOM_TYPES by its exact name,
    or one of OOM_MESSAGES in any case."""
    messages = "|".join(re.escape(m).replace("\\ ", " ") for m in OOM_MESSAGES)
    return rf"\b(?:{'|'.join(OOM_TYPES)})\b|(?i:{messages})"


@dataclass(frozen=True)
class Tolerance:
    atol: float = 1e-3
    rtol: float = 1e-3
    reference: str = "eager"  # "float64": a mismatch must also be ERROR_RATIO x eager's own error (oracles/reference.py)
    asked: str = "nan"  # the value oracle asked about: where one output is NaN and another off, summarize names it


def flatten_outputs(out: Any) -> list[Any]:
    """Backends return a tensor, a tuple, a list or nested structures; compare leaves."""
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in flatten_outputs(item)]
    return [out]


def classify_exception(exc: BaseException) -> Verdict:
    """An exception while compiling or running is a crash, unless it is an OOM."""
    name = type(exc).__name__
    message = str(exc) or repr(exc)
    is_oom = name in OOM_TYPES or says_oom(message)
    # Inductor and dynamo wrap the real error; report the innermost type.
    inner = exc
    while getattr(inner, "inner_exception", None) is not None:
        inner = inner.inner_exception  # type: ignore[assignment]
    if inner is not exc:
        name = type(inner).__name__
        message = str(inner) or repr(inner)
        is_oom = is_oom or name in OOM_TYPES
    if type(inner) is Exception and inner.__cause__ is not None:  # a pass manager's bare wrapper (torch.fx's,
        cause = inner.__cause__  # ExecuTorch's): "An error occurred when running the 'P' pass...", then P's own
        message = f"{message}: {type(cause).__name__}: {str(cause) or repr(cause)}"  # as repro.py joins the chain
        is_oom = is_oom or type(cause).__name__ in OOM_TYPES or says_oom(message)
    # an OOM that led to this error is the failure: Dynamo rewraps it `from None`, as
    # InternalTorchDynamoError("MemoryError: std::bad_alloc"), which repro.py's words call an OOM
    is_oom = is_oom or any(type(c).__name__ in OOM_TYPES for c in error_chain(inner)[1:])
    located = failing_node(getattr(inner, "failing_node_text", None) or message)  # a backend's own reading first
    step = getattr(exc, "trtmin_step", None) or getattr(inner, "trtmin_step", None)  # backends/base.py mark_step
    return Verdict("oom" if is_oom else "crash", exc_type=name, message=message[:2000],
                   extra={**({"failing_node": located} if located else {}), **({"step": step} if step else {})})


# torch.fx.Interpreter appends to the error of the node it was running (Torch-TensorRT's
# converters and most plugins are such interpreters):
#   While executing %sin : [num_users=1] = call_function[target=torch.ops.aten.sin.default](...)
#   Original traceback:
#   File "model.py", line 30, in forward
#       h = h + torch.sin(h) * 0.5
#   Use tlparse to see full graph. ...
# Inductor's lowering raises a LoweringException, which says it its own way:
#   LoweringException: RuntimeError: ...
#     target: aten.sin.default
#     args[0]: ...
#   Found from :
#    File "model.py", line 30, in forward
#       h = h + torch.sin(h) * 0.5
_EXECUTING = re.compile(r"While executing %(\w+) : .*?\[target=(.*?)\]\(")
_TRACEBACK = re.compile(r"\nOriginal traceback:\n(.*?)(?:\nUse tlparse|\Z)", re.S)
_LOWERING_TARGET = re.compile(r"^\s*target: (\S+)\s*$", re.M)
_FOUND_FROM = re.compile(r"\nFound from : \n(.*?)(?:\n\n|\Z)", re.S)
# ExecuTorch's to_edge verifiers check the graph it made of ours (its nodes keep our stacks):
#   Operator: <EdgeOpOverload: aten.mul.Tensor>: schema = aten::mul.Tensor(...) with args: {...}
#   stack trace: File "model.py", line 33, in forward
#       q = rope(q, freqs)
#   Please make sure the dtypes of the Tensor inputs are the same as ...
# or name an op not in core ATen, with no stack:
#   Operator torch._ops.aten._upsample_bicubic2d_aa.default is not in Core ATen opset (...)
_EDGE_OPERATOR = re.compile(r"^Operator: <EdgeOpOverload: ([\w.]+)>", re.M)
_EDGE_STACK = re.compile(r"\nstack trace: (.*?)(?=\nOperator: |\nPlease make sure|\Z)", re.S)
_NOT_CORE_ATEN = re.compile(r"Operator torch\._ops\.([\w.]+) is not in Core ATen opset")


# ExecuTorch's runtime logs the kernel that failed (behind its bare error code), as the core
# ATen op's out variant, with no stack: conv3d runs as aten::convolution there.
#   [method.cpp:1480] KernelCall failed at instruction 0:4 in operator aten::convolution.out: 0x12
_KERNEL_CALL = re.compile(r"KernelCall failed .*?\bin operator (\w+)::(\w+)\.(\w+)")


def failing_kernel(native_errors: Sequence[str]) -> dict[str, str] | None:
    """failing_node's form of the kernel a compiler's native log says failed (ExecuTorch's
    KernelCall line), or None: the search's guess where the raised error names none."""
    for line in native_errors:
        kernel = _KERNEL_CALL.search(line)
        if kernel is not None:
            return {"name": "", "target": ".".join(kernel.groups()), "stack": ""}
    return None


def failing_node(message: str) -> dict[str, str] | None:
    """The node a compiler's error says it was working on: its name in the compiler's graph
    (where it says), its target and the source stack it was traced from (torch keeps the
    exported program's stack traces through Dynamo and AOT, ExecuTorch through to_edge),
    read from the whole message before it is cut."""
    node = _EXECUTING.search(message)
    if node is not None:
        name, target, stack = node.group(1), node.group(2), _TRACEBACK.search(message, node.end())
    elif (edge := _EDGE_OPERATOR.search(message)) is not None:  # ExecuTorch's verifier: a stack of ours
        name, target, stack = "", edge.group(1), _EDGE_STACK.search(message, edge.end())
    elif (not_core := _NOT_CORE_ATEN.search(message)) is not None:  # no stack: a target only one node has
        name, target, stack = "", not_core.group(1), None
    else:
        lowering = _LOWERING_TARGET.search(message)
        if lowering is None:
            return None
        name, target, stack = "", lowering.group(1), _FOUND_FROM.search(message, lowering.end())
    trace = stack.group(1).strip() if stack else ""
    return {"name": name, "target": target.removeprefix("torch.ops."),
            "stack": "" if trace == "None" else trace[:4000]}


def compare_outputs(expected: Sequence[Any], actual: Sequence[Any], tol: Tolerance,
                    exact: Sequence[Any] | None = None) -> Verdict:
    """Eager vs backend, output by output. Integer outputs are compared exactly apart from atol.
    exact: the float64 run's outputs, with --reference float64."""
    if len(expected) != len(actual):
        return Verdict("mismatch", detail=f"eager returns {len(expected)} outputs, the backend {len(actual)}")
    return summarize(compare_each(expected, actual, tol, exact), tol.asked)


def compare_each(expected: Sequence[Any], actual: Sequence[Any], tol: Tolerance,
                 exact: Sequence[Any] | None = None) -> list[Verdict]:
    """One verdict per output pair (localization wants every output that is off);
    the caller checks that the counts agree."""
    exact = exact if exact is not None and len(exact) == len(expected) else [None] * len(expected)
    return [_compare_one(i, e, a, tol, r) for i, (e, a, r) in enumerate(zip(expected, actual, exact))]


def in_eager_form(e: Any, a: Any) -> Any:
    """A backend's value in eager's form where it returns the same meaning in another: a
    complex value as its real view (..., 2), as Torch-TensorRT returns complex tensors.
    Localization makes every value an output, complex ones too: a form is not an error."""
    if (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and e.is_complex() and a.is_floating_point()
            and tuple(a.shape) == (*e.shape, 2)):
        return torch.view_as_complex(a.detach().to(torch.float64).contiguous())
    return a


def summarize(each: Sequence[Verdict], asked: str = "nan") -> Verdict:
    """The verdict of all outputs: NaN where eager is finite is a `nan` (the first such
    output decides); values off by more than atol + rtol*|expected| are a `mismatch` (the
    worst output decides). Where outputs fail both ways, the kind `asked` (the value oracle
    the user asked about) names the verdict: a policy's NaN value head does not hide its
    action head's mismatch from --oracle mismatch. Where several outputs fail so, extra["off"]
    lists each as [output, max abs]: the reduction holds to the one output whose cause
    it follows (Signature.matches), which need not be the worst. A pass keeps the first
    output's note of a difference that was within eager's own error (--reference float64)."""
    nan = next((v for v in each if v.kind == "nan"), None)
    worst = max((v for v in each if v.kind == "mismatch"), key=lambda v: v.max_abs or 0, default=None)
    chosen = (worst or nan) if asked == "mismatch" else (nan or worst)
    if chosen is None:
        return next((v for v in each if v.detail), Verdict("pass"))
    off = [[v.output, v.max_abs, v.extra.get("ratio")] for v in each if v.kind == chosen.kind]
    return chosen if len(off) < 2 else replace(chosen, extra={**chosen.extra, "off": off})


def as_number_tensor(x: Any) -> Any:
    """A Python number (an output of .item()) as a 0-d tensor, a float one in float64, so it is
    judged as a tensor is (tolerances, NaN, its size off); anything else as it is."""
    if isinstance(x, (bool, int, float)):
        return torch.tensor(x, dtype=torch.float64 if isinstance(x, float) else None)
    return x


def _compare_one(i: int, e: Any, a: Any, tol: Tolerance, r: Any = None) -> Verdict:
    if isinstance(e, (bool, int, float)) and isinstance(a, torch.Tensor) and a.numel() == 1:
        a = a.item()  # a backend's 1-element tensor for eager's number
    e, a = as_number_tensor(e), as_number_tensor(a)
    if not isinstance(e, torch.Tensor):  # None, a string: the same or not
        return Verdict("pass") if e == a else Verdict("mismatch", output=i, detail=f"eager {e!r}, backend {a!r}")
    if not isinstance(a, torch.Tensor):
        return Verdict("mismatch", output=i, detail=f"backend returned {type(a).__name__}, not a tensor")
    if e.shape != a.shape:
        return Verdict("mismatch", output=i, detail=f"shape {tuple(a.shape)}, eager {tuple(e.shape)}")
    e64 = e.detach().to("cpu", torch.complex128 if e.is_complex() else torch.float64)
    a64 = a.detach().to("cpu", e64.dtype)
    e_finite = torch.isfinite(e64)
    a_finite = torch.isfinite(a64)
    bad = e_finite & ~a_finite
    if bool(bad.any()):
        return Verdict("nan", output=i, detail=f"{int(bad.sum())} of {e.numel()} values")
    # Non-finite in both: equal only if identical (inf == inf, nan vs nan ok).
    both_nonfinite = ~e_finite & ~a_finite
    same_nonfinite = both_nonfinite & ((e64 == a64) | (torch.isnan(e64) & torch.isnan(a64)))
    diff = (e64 - a64).abs()
    diff = torch.where(same_nonfinite, torch.zeros_like(diff), diff)
    # finite against not, or non-finite both but otherwise (eager's NaN, the backend's inf: |nan - inf|
    # is NaN, which no tolerance is below): off by inf
    differ = (e_finite != a_finite) | (both_nonfinite & ~same_nonfinite)
    diff = torch.where(differ, torch.full_like(diff, float("inf")), diff)
    if not any(x.is_floating_point() or x.is_complex() for x in (e, a)):  # integers exactly: float64 holds 2**53,
        diff = torch.where(e.detach().cpu() != a.detach().cpu(), diff.clamp_min(1), diff)  # a timestamp in ns is 1.7e18
    if diff.numel() == 0:
        return Verdict("pass")
    # rtol is for rounding; integers do not round (an int64 timestamp off by 8.6e9 ns
    # is a bug however large the timestamp), so they get atol alone.
    rtol = tol.rtol if (e.is_floating_point() or e.is_complex()) else 0.0
    off = diff > tol.atol + rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0)  # the values off
    off_count = int(off.sum())
    if not off_count:
        odd = int((~e_finite).sum())  # where the backend is as non-finite as eager: the program's, said
        word = "NaN" if odd and bool(e64[~e_finite].isnan().all()) else "non-finite values"
        return Verdict("pass", detail=f"output {i} has {word} where eager has too ({odd} of {e.numel()} values): "
                                      "the program makes them, not the backend" if odd else "")
    max_abs = float(diff.max())
    # of the values off where eager is not 0 (there diff / 1e-12 said "max rel 4.958e+11"); none: inf, not said
    at = off & (e64 != 0)
    rel = (diff[at] / e64.abs()[at]).max() if bool(at.any()) else torch.tensor(float("inf"))
    detail = f"{off_count} of {e.numel()} values off, dtype {str(e.dtype).removeprefix('torch.')}"
    rounds = e.is_floating_point() or e.is_complex()  # an integer has no error to be judged by
    exact = r if tol.reference == "float64" and rounds and isinstance(r, torch.Tensor) and r.shape == e.shape else None
    ratio = error_ratio(e64, a64, exact.detach().to("cpu", e64.dtype)) if exact is not None else None
    if ratio is not None and ratio <= ERROR_RATIO:
        return Verdict("pass", detail=f"output {i} is off eager by max abs {max_abs:.4g}, but its error from the "
                                      f"float64 run is {ratio:.3g}x eager's own (a bug above {ERROR_RATIO:g}x)")
    if ratio is not None:
        detail += (", where eager matches the float64 run" if ratio == float("inf")
                   else f", {ratio:.3g}x eager's own error from float64")
    sized = {"ratio": ratio} if ratio is not None and math.isfinite(ratio) else {}  # Signature.holds_ratio's
    # a relative error of an integer is noise (1e+12 where eager's value is 0): none is given
    scale = float(e64[e_finite].abs().max()) if rounds and bool(e_finite.any()) else 0.0  # precision_note's
    lost = ~e_finite & a_finite  # eager's NaN or inf came back finite: Verdict.lost_words says so
    lost_count = int(lost.sum())
    lost_what = {} if not lost_count else {"lost": {
        "count": lost_count, "off": off_count,
        "eager": "NaN" if bool(e64[lost].isnan().all()) else "inf" if not bool(e64[lost].isnan().any()) else "NaN or inf"}}
    return Verdict("mismatch", output=i, max_abs=max_abs, max_rel=float(rel.max()) if rounds else None, detail=detail,
                   extra={"first_off": first_off_values(e, a, off, exact), **({"scale": scale} if scale else {}),
                          **sized, **lost_what})


def first_off_values(e: torch.Tensor, a: torch.Tensor, bad: torch.Tensor, exact: torch.Tensor | None = None,
                     n: int = 6) -> dict[str, list[Any]]:
    """The first `n` values that are off, eager's beside the backend's, with their indices:
    what a maintainer reads first (3000000000 against -1294967296 is an int32 overflow).
    `exact`: the float64 run's output (--reference float64), whose values go beside them:
    which of the two is nearer is what makes a bf16 difference a bug or rounding."""
    flat = bad.flatten().nonzero().flatten()[:n].tolist()
    shape = tuple(e.shape)

    def index(k: int) -> list[int]:
        out = []
        for size in reversed(shape):
            out.append(k % size)
            k //= size
        return out[::-1]

    def value(t: torch.Tensor, k: int) -> Any:
        v = t.detach().reshape(-1)[k].cpu().item()
        return str(v) if isinstance(v, complex) else shortest(v, t.dtype) if isinstance(v, float) else v
    return {"index": [index(k) for k in flat], "eager": [value(e, k) for k in flat],
            "backend": [value(a, k) for k in flat],
            **({"float64": [value(exact, k) for k in flat]} if exact is not None else {})}


def shortest(v: float, dtype: torch.dtype) -> float:
    """`v`, a value of the floating `dtype`, with the fewest significant digits that read back
    as that value: a float32 0.1 is 0.1, not the 0.10000000149011612 it is as a double. Not
    a decimal halfway to the next value (float8's 96 is not "100", which rounds to 96 only
    by rounding half to even)."""
    if dtype == torch.float64 or v != v or v in (float("inf"), float("-inf")):
        return v

    def value(x: float) -> float:
        return torch.tensor(x, dtype=dtype).item()
    for digits in range(1, 17):
        short = float(f"{v:.{digits}g}")
        mirror = 2 * short - v  # representable where `short` is the midpoint between v and it
        if value(short) == v and (short == v or value(mirror) != mirror):
            return short
    return v
