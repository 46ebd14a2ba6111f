"""Each oracle writes the check part of repro.py, so the script checks what trtmin checked."""

from __future__ import annotations

import inspect
import re

from oracles.checks import oom_pattern
from oracles.reference import ERROR_RATIO, error_ratio, float64_source
from oracles.verdict import Signature

_FLATTEN = '''
def flatten(out):
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in flatten(item)]
    return [out]
'''

_MAX_ERROR = '''

def max_error(expected, actual, exact=None):
    """(output index, max abs error, offending values, note) of the worst output, or None."""
    worst = None
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor):
            if e != a:
                return i, float("inf"), 1, ""
            continue
        if e.shape != a.shape:
            return i, float("inf"), e.numel(), ""
        wide = torch.complex128 if e.is_complex() else torch.float64
        e64, a64 = e.detach().cpu().to(wide), a.detach().cpu().to(wide)
        diff = (e64 - a64).abs().nan_to_num(0.0, float("inf"), float("inf"))
        both_nan = e64.isnan() & a64.isnan()
        diff = torch.where(both_nan | (e64 == a64), torch.zeros_like(diff), diff)
        rounds = e.is_floating_point() or e.is_complex()
        rtol = RTOL if rounds else 0.0  # integers do not round
        bad = diff > ATOL + rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0)
        note = ""
#EXACT#
        if bad.any() and (worst is None or float(diff.max()) > worst[1]):
            worst = (i, float(diff.max()), int(bad.sum()), note)
    return worst
'''

# With the float64 run's outputs (`exact`), an output whose error from them is within
# ERROR_RATIO x eager's own is no error; of another shape (a data-dependent one,
# x[x > t]), eager alone judges, as in trtmin.
_EXACT = '''        r = exact[i] if exact is not None and i < len(exact) else None
        if bad.any() and rounds and isinstance(r, torch.Tensor) and r.shape == e.shape:
            ratio = error_ratio(e64, a64, r.detach().cpu().to(wide))
            if ratio is not None and ratio <= ERROR_RATIO:
                continue  # no further from the float64 run than eager's own rounding
            note = "" if ratio is None else f", {ratio:.3g}x eager's own error from float64"'''

_NON_FINITE = '''

def non_finite(expected, actual):
    """The first output with non-finite values where eager is finite, as a message, or None."""
    for i, (e, a) in enumerate(zip(expected, actual)):
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and e.shape == a.shape:
            bad = torch.isfinite(e.cpu()) & ~torch.isfinite(a.cpu())
            if bad.any():
                return f"output {i} has {int(bad.sum())} non-finite values where eager is finite"
    return None
'''


def _reference_source() -> str:
    """The float64 run and its judgement, as oracles/reference.py has them."""
    return (f"\n\nERROR_RATIO = {ERROR_RATIO!r}\n\n\n{float64_source()}\n\n"
            f"{inspect.getsource(error_ratio)}")


def check_source(sig: Signature, match: str | None, float64: bool = False) -> str:
    """Source of `outcome(expected, actual, exact) -> (reproduced, message)` and helpers
    (reproduced None: it fails another way, CHANGED);
    float64: the script judges a mismatch against a float64 run (oracles/reference.py)."""
    if sig.kind == "mismatch":
        fixed = ('within = f" (or is off it by at most {ERROR_RATIO:g}x eager\'s own error from float64)" '
                 'if exact is not None else ""\n        return False, f"the backend matches eager PyTorch{within}"'
                 if float64 else 'return False, "the backend matches eager PyTorch"')
        body = '''
def outcome(expected, actual, exact=None):
    """(True, why) reproduced, (False, why) fixed, (None, why) failing another way."""
    lost = non_finite(expected, actual)  # trtmin's checks call that a nan, not this mismatch
    if lost:
        return None, lost
    worst = max_error(expected, actual, exact)
    if worst is None:
        FIXED_LINE
    i, err, n, note = worst
    return True, f"output {i} differs from eager by max abs {err:.4g} ({n} values off{note})"
'''.replace("FIXED_LINE", fixed)
        helpers = _MAX_ERROR.replace("#EXACT#\n", _EXACT + "\n" if float64 else "") + _NON_FINITE
    elif sig.kind == "nan":
        body = '''
def outcome(expected, actual, exact=None):
    lost = non_finite(expected, actual)
    return (True, lost) if lost else (False, "no non-finite values where eager is finite")
'''
        helpers = _NON_FINITE
    else:  # crash, oom, hang: the run itself decides; reaching outputs means it ran
        body = '''
def outcome(expected, actual, exact=None):
    return False, "compiled and ran without error"
'''
        helpers = ""
    reference = _reference_source() if float64 else ""
    return _FLATTEN + helpers + reference + body + f"\nERROR_PATTERN = {error_pattern(sig, match)!r}\n"


def error_pattern(sig: Signature, match: str | None) -> str:
    """A regex for the failure text: the user's --match, else the normalized message."""
    if match:
        return match
    if sig.kind == "oom":
        return oom_pattern()  # what trtmin's checks count as an OOM (oracles/checks.py)
    if sig.kind != "crash" or not sig.message:
        return ""
    text = re.escape(sig.message)
    text = text.replace("<n>", r"\d+").replace("<addr>", r"0x[0-9a-fA-F]+").replace("<path>/", r"\S*/")
    return text.replace(r"\ ", r"\s+")
