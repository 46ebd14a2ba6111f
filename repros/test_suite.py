"""One test per saved repro (parametrized in repros/conftest.py)."""

from __future__ import annotations

import pytest

from repros.runner import SKIPPED, Facts, run_one
from repros.suite import Repro


def test_repro(saved_repro: Repro, repro_facts: Facts, pytestconfig: pytest.Config) -> None:
    r = run_one(saved_repro, timeout=pytestconfig.getoption("--repro-timeout"), facts=repro_facts,
                strict_skips=pytestconfig.getoption("--repro-strict-skips"))
    if r.status == SKIPPED and r.ok:
        pytest.skip(r.reason)
    expected = r.expected + (f" ({r.expected_because})" if r.expected_because else "")
    detail = "\n".join(filter(None, [f"verdict: {r.verdict}" if r.verdict else "", r.reason,
                                     "\n".join(r.stderr_tail)]))
    assert r.ok, f"{r.name}: {r.status}, expected {expected}: {r.note}\n{detail}"
