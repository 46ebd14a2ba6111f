"""One oracle call: run eager and the backend on a graph, and say what happened.

Runs inside an isolated worker process (oracles/worker.py); a segfault, abort or
hang here kills only the worker.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import Backend
from oracles.checks import (Tolerance, classify_exception, compare_each, compare_outputs, flatten_outputs,
                            in_eager_form, summarize)
from oracles.dynamic import clone_marked
from oracles.errors import FLOAT64_FAILED, SETTING_FAILED, NotRunHere, SettingNotHonoured
from oracles.reference import float64_outputs
from oracles.verdict import Verdict


def _clone(values: Sequence[Any]) -> list[Any]:
    return clone_marked(values)  # an input's dynamic dims stay dynamic (oracles/dynamic.py)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def evaluate(gm: fx.GraphModule, inputs: Sequence[Any], backend: Backend, tol: Tolerance,
             device: str = "cpu") -> Verdict:
    ran = _run_both(gm, inputs, backend, device, tol.reference == "float64")
    return ran if isinstance(ran, Verdict) else compare_outputs(ran[0], ran[1], tol, ran[2])


def evaluate_each(gm: fx.GraphModule, inputs: Sequence[Any], backend: Backend, tol: Tolerance,
                  device: str = "cpu") -> tuple[Verdict, list[Verdict]]:
    """The verdict, and one verdict per output (empty when it did not run to the end or
    the backend returned another number of outputs: they could not be paired)."""
    ran = _run_both(gm, inputs, backend, device, tol.reference == "float64")
    if isinstance(ran, Verdict):
        return ran, []
    expected, actual, exact = ran
    if len(expected) != len(actual):
        return compare_outputs(expected, actual, tol), []
    actual = [in_eager_form(e, a) for e, a in zip(expected, actual)]  # a form is not an error (localization)
    each = compare_each(expected, actual, tol, exact)
    return summarize(each, tol.asked), each


def _run_both(gm: fx.GraphModule, inputs: Sequence[Any], backend: Backend, device: str,
              float64: bool = False) -> tuple[list[Any], list[Any], list[Any] | None] | Verdict:
    """Eager's and the backend's flattened outputs, and with `float64` those of the float64
    run (oracles/reference.py); or the verdict that stopped them."""
    exact = None
    with torch.no_grad():
        try:
            expected = flatten_outputs(gm(*_clone(inputs)))
            _sync(device)
        except Exception as e:  # the candidate is broken, not the compiler
            return Verdict("invalid", exc_type=type(e).__name__, message=str(e)[:500])
        if float64:
            try:
                exact = flatten_outputs(float64_outputs(gm, _clone(inputs)))
                _sync(device)
            except Exception as e:  # an op with no float64 kernel: this program cannot be judged so
                return Verdict("invalid", exc_type=type(e).__name__, message=f"{FLOAT64_FAILED}{str(e)[:480]}")
        try:
            compiled = backend.compile(gm, _clone(inputs))
            actual = flatten_outputs(compiled(*_clone(inputs)))
            _sync(device)
        except NotRunHere as e:  # built, and not run here: the build passed, nothing else was judged
            return Verdict("pass", message=str(e))
        except SettingNotHonoured as e:  # no verdict on the program: never the bug, nor a candidate's failure
            return Verdict("invalid", exc_type=type(e).__name__, message=f"{SETTING_FAILED}{str(e)[:480]}")
        except BaseException as e:  # noqa: BLE001 - a compiler may raise anything, SystemExit included
            if isinstance(e, KeyboardInterrupt):
                raise
            return classify_exception(e)
    return expected, actual, exact
