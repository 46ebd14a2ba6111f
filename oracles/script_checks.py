"""Each oracle writes the check part of repro.py, so the script checks what trtmin checked."""

from __future__ import annotations

import re

from oracles.verdict import Signature

_COMPARE = '''
def flatten(out):
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in flatten(item)]
    return [out]


def max_error(expected, actual):
    """(output index, max abs error, offending values) of the worst output, or None."""
    worst = None
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor):
            if e != a:
                return i, float("inf"), 1
            continue
        if e.shape != a.shape:
            return i, float("inf"), e.numel()
        e64, a64 = e.detach().cpu().double(), a.detach().cpu().double()
        diff = (e64 - a64).abs().nan_to_num(0.0, float("inf"), float("inf"))
        both_nan = e64.isnan() & a64.isnan()
        diff = torch.where(both_nan | (e64 == a64), torch.zeros_like(diff), diff)
        rtol = RTOL if (e.is_floating_point() or e.is_complex()) else 0.0  # integers do not round
        bad = diff > ATOL + rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0)
        if bad.any() and (worst is None or float(diff.max()) > worst[1]):
            worst = (i, float(diff.max()), int(bad.sum()))
    return worst
'''


def check_source(sig: Signature, match: str | None) -> str:
    """Source of `outcome(expected, actual) -> (reproduced, message)` and helpers."""
    if sig.kind == "mismatch":
        body = '''
def outcome(expected, actual):
    worst = max_error(expected, actual)
    if worst is None:
        return False, "the backend matches eager PyTorch"
    i, err, n = worst
    return True, f"output {i} differs from eager by max abs {err:.4g} ({n} values off)"
'''
    elif sig.kind == "nan":
        body = '''
def outcome(expected, actual):
    for i, (e, a) in enumerate(zip(expected, actual)):
        if isinstance(e, torch.Tensor):
            bad = torch.isfinite(e.cpu()) & ~torch.isfinite(a.cpu())
            if bad.any():
                return True, f"output {i} has {int(bad.sum())} non-finite values where eager is finite"
    return False, "no non-finite values where eager is finite"
'''
    else:  # crash, oom, hang: the run itself decides; reaching outputs means it ran
        body = '''
def outcome(expected, actual):
    return False, "compiled and ran without error"
'''
    return _COMPARE + body + f"\nERROR_PATTERN = {error_pattern(sig, match)!r}\n"


def error_pattern(sig: Signature, match: str | None) -> str:
    """A regex for the failure text: the user's --match, else the normalized message."""
    if match:
        return match
    if sig.kind == "oom":
        return r"(?i)out of memory|OutOfMemoryError|MemoryError"
    if sig.kind != "crash" or not sig.message:
        return ""
    text = re.escape(sig.message)
    text = text.replace("<n>", r"\d+").replace("<addr>", r"0x[0-9a-fA-F]+").replace("<path>/", r"\S*/")
    return text.replace(r"\ ", r"\s+")
