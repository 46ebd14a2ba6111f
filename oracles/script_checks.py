"""What repro.py checks, as real functions copied by source into each script: the script
judges a run as trtmin's checks (oracles/checks.py) did, with torch alone.

A line tagged `# [feature]` goes into a script only where the bug needs that feature
(`# [!feature]`: only where it does not; `# [a,!b]`: where all of them hold), so each
script holds no code it never runs (`tagged_source`). The module itself is plain Python: the tests call these functions.
The copied functions carry no annotations: the scripts import torch alone.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from typing import Any, Callable, Iterable

import torch

from oracles.checks import oom_pattern
from oracles.reference import ERROR_RATIO, error_ratio, float64_source
from oracles.verdict import PLACEHOLDERS, Signature

ATOL = RTOL = 0.0  # each script sets its own: the reduction's tolerances

_TAG = re.compile(r"\s*# \[(!?\w+(?:,!?\w+)*)\]( .*)?$")


def tagged_source(fn: Callable[..., Any], features: Iterable[str], name: str | None = None,
                  docstring: bool = True) -> str:
    """`fn`'s source at module level, with only the lines its tags ask for and the tags
    gone (a tag's words after it stay as the line's comment); renamed to `name`; without
    its docstring unless `docstring`."""
    on = set(features)
    kept = []
    for line in textwrap.dedent(inspect.getsource(fn)).splitlines():
        tag = _TAG.search(line)
        if tag:
            terms = tag.group(1).split(",")
            if not all((t[1:] not in on) if t.startswith("!") else (t in on) for t in terms):
                continue
            line = line[:tag.start()] + (f"  #{tag.group(2)}" if tag.group(2) else "")
        kept.append(line)
    text = "\n".join(kept) + "\n"
    if not docstring:
        text = re.sub(r'^(def [^\n]*:\n)    """.*?"""\n', r"\1", text, count=1, flags=re.S | re.M)
    if name:
        text = text.replace(f"def {fn.__name__}(", f"def {name}(", 1)
    return text


def mismatch_outcome(expected, actual, exact=None):
    """("REPRODUCED", why): the backend is off eager beyond ATOL/RTOL; ("FIXED", why): it
    matches; CHANGED: non-finite values where eager is finite (which trtmin calls a NaN bug)
    and no output off, as trtmin judges an --oracle mismatch."""
    off, lost = [], ""  # (max abs error, output, values off, note) of each output that is off; a NaN output
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = (torch.tensor(x, dtype=torch.float64 if isinstance(x, float) else None) if isinstance(x, (bool, int, float)) else x for x in (e, a))  # [numbers] an .item(): judged as a 0-d tensor
        if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor) or e.shape != a.shape:  # all off
            off += [(float("inf"), i, "all", "")] if isinstance(e, torch.Tensor) or e != a else []
            continue
        e64, a64 = (x.detach().cpu().to(torch.complex128 if e.is_complex() else torch.float64) for x in (e, a))
        if (e64.isfinite() & ~a64.isfinite()).any():
            lost = lost or f"output {i} has non-finite values where eager is finite"
            continue
        rtol, ints = (RTOL if e.is_floating_point() or e.is_complex() else 0.0), ATOL < 1 and not any(x.is_floating_point() or x.is_complex() for x in (e, a))  # integers do not round
        bad = ~torch.isclose(a64, e64, rtol=rtol, atol=ATOL, equal_nan=True) | (ints & (e.cpu() != a.cpu()))  # off by > ATOL + rtol * |eager|; 2**60 + 1 too
        note = ""  # [float64]
        r = exact[i] if exact is not None and i < len(exact) else None  # [float64]
        if bad.any() and rtol and isinstance(r, torch.Tensor) and r.shape == e.shape:  # [float64]
            ratio = error_ratio(e64, a64, r.detach().cpu().to(e64.dtype))  # [float64]
            if ratio is not None and ratio <= ERROR_RATIO:  # [float64]
                continue  # [float64] no further from the float64 run than eager's own rounding
            note = "" if ratio is None else f", {ratio:.3g}x eager's own error from float64"  # [float64]
        err = torch.where(bad, (e64 - a64).abs().nan_to_num(float("inf"), float("inf")).clamp_min(float(ints)), 0)  # the values off; a lost inf or NaN: inf
        at = tuple(int(k) for k in torch.unravel_index(err.argmax(), err.shape)) if bad.any() else ()  # the worst
        off += [(float(err.max()), i, f"{int(bad.sum())} of {bad.numel()}", f"; at {list(at)}: eager {e64[at]:.4g}, backend {a64[at]:.4g}")] if bad.any() else []  # [!float64]
        off += [(float(err.max()), i, f"{int(bad.sum())} of {bad.numel()}", f"{note}; at {list(at)}: eager {e64[at]:.4g}, backend {a64[at]:.4g}")] if bad.any() else []  # [float64]
    if not off:  # a NaN where eager is finite, and nothing off: trtmin's NaN bug, not this one
        return ("CHANGED: fails differently now", lost) if lost else ("FIXED", "the backend matches eager PyTorch")  # [!float64]
        within = f" (or is off it by at most {ERROR_RATIO:g}x eager's own error from float64)"  # [float64]
        return ("CHANGED: fails differently now", lost) if lost else ("FIXED", "the backend matches eager PyTorch" + (within if exact is not None else ""))  # [float64]
    return "REPRODUCED", "output {1} differs from eager by max abs {0:.4g} ({2} values off{3})".format(*max(off, key=lambda o: o[0]))


def nan_outcome(expected, actual, exact=None):
    """("REPRODUCED", why): an output has non-finite values where eager's are finite."""
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = (torch.tensor(x, dtype=torch.float64 if isinstance(x, float) else None) if isinstance(x, (bool, int, float)) else x for x in (e, a))  # [numbers] an .item(): judged as a 0-d tensor
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and e.shape == a.shape:
            bad = torch.isfinite(e.cpu()) & ~torch.isfinite(a.cpu())
            if bad.any():
                return "REPRODUCED", f"output {i} has {int(bad.sum())} non-finite values where eager is finite"
    return "FIXED", "no non-finite values where eager is finite"


OUTCOMES = {"mismatch": mismatch_outcome, "nan": nan_outcome}


def check_source(sig: Signature, float64: bool = False, numbers: bool = False) -> str:
    """Source of `outcome(expected, actual, exact=None) -> (verdict, why)` (REPRODUCED, FIXED
    or CHANGED, as the script prints it) for a bug in the values (mismatch, NaN); float64:
    a mismatch is judged against a float64 run too (oracles/reference.py); numbers: the
    program returns Python numbers (.item()), judged as 0-d tensors as oracles/checks.py
    judges them. Empty for a failure (crash, OOM, hang): the script's main judges those by
    ERROR_PATTERN alone."""
    if sig.kind not in OUTCOMES:
        return ""
    features = ["float64"] * float64 + ["numbers"] * numbers
    outcome = tagged_source(OUTCOMES[sig.kind], features, name="outcome", docstring=False)
    reference = (f"\n\nERROR_RATIO = {ERROR_RATIO!r}\n\n\n{float64_source()}\n\n{inspect.getsource(error_ratio)}"
                 if float64 else "")
    return f"{reference}\n\n{outcome}"


def error_pattern(sig: Signature, match: str | None) -> str:
    """A regex for the failure text: the user's --match, else the normalized message."""
    if match:
        return match
    if sig.kind == "oom":
        return oom_pattern()  # what trtmin's checks count as an OOM (oracles/checks.py)
    if sig.kind != "crash" or not sig.message:
        return ""
    return message_pattern(sig.message)


def message_pattern(message: str) -> str:
    """A normalized message (oracles/verdict.py normalize_message) as a regex: its
    placeholders stand for what they replaced, and any run of spaces for any other."""
    text = re.escape(message)
    for placeholder, regex in PLACEHOLDERS.items():
        text = text.replace(placeholder, regex)
    return text.replace(r"\ ", r"\s+")
