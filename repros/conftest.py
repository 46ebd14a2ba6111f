"""``pytest repros/``: every saved repro is one test, run through the same runner function
as ``trtmin repros run`` (repros.runner.run_one) and judged by the same rules.

Options: --repro-root DIR (another suite), --repro-timeout S, --repro-strict-skips,
--repro-label L (the device label ``label:`` conditions see). Select repros with -k NAME.
"""

from __future__ import annotations

import pytest

from repros.runner import DEFAULT_TIMEOUT, Facts
from repros.suite import find_repros


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trtmin repros")
    group.addoption("--repro-root", default=None, help="suite folder to run (default: the shipped repros/suite)")
    group.addoption("--repro-timeout", type=float, default=DEFAULT_TIMEOUT,
                    help=f"seconds one repro may run (default {DEFAULT_TIMEOUT:g})")
    group.addoption("--repro-strict-skips", action="store_true",
                    help="fail repros that skip where the manifest does not expect it")
    group.addoption("--repro-label", default=None,
                    help="device label for label: conditions (default: the GPU's name or cpu)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "saved_repro" in metafunc.fixturenames:
        repros = find_repros(metafunc.config.getoption("--repro-root"))
        metafunc.parametrize("saved_repro", repros, ids=[r.name for r in repros])


@pytest.fixture(scope="session")
def repro_facts(pytestconfig: pytest.Config) -> Facts:
    return Facts(pytestconfig.getoption("--repro-label"))
