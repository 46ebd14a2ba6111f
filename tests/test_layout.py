"""The package layout docs/design.md sets (Rooms): imports go one way, towards oracles/.

oracles/ (backends, checks, workers, running a script) is what both sides share: it imports
neither minimize/ nor repros/. minimize/ does not import repros/, except its CLI, which wires
every command, and repros/ does not import minimize/ (the names in a reduction's output
folder, which both read, are oracles/out_folder.py's).
Only minimize/cli.py imports typer.

Inside minimize/, four rooms and the app: `program/` (the model, the candidate) imports no
other room; `search/`, `run/` and `emit/` each import `program/` and no other room; the
app (minimize/*.py: cli, reduce, arguments, options, progress) wires them all. Every room
may read the shared `minimize.options` and the package's version.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS_MAY_IMPORT = {"program": set(), "search": {"program"}, "run": {"program"}, "emit": {"program"}}
SHARED = {"minimize", "minimize.options"}


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at top level or inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def package_files(package: str) -> list[Path]:
    """The package's own modules (not the saved repros' scripts under repros/suite/)."""
    return [p for p in sorted((ROOT / package).rglob("*.py")) if "suite" not in p.relative_to(ROOT).parts[1:-1]]


def _top(module: str) -> str:
    return module.split(".")[0]


def test_oracles_import_neither_minimize_nor_repros() -> None:
    wrong = {str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p) if _top(m) in ("minimize", "repros"))
             for p in package_files("oracles")}
    assert {k: v for k, v in wrong.items() if v} == {}


def test_minimize_imports_repros_only_in_its_cli() -> None:
    wrong = {str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p) if _top(m) == "repros")
             for p in package_files("minimize") if p.name != "cli.py"}
    assert {k: v for k, v in wrong.items() if v} == {}


def test_repros_import_nothing_of_minimize() -> None:
    wrong = {str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p) if _top(m) == "minimize")
             for p in package_files("repros")}
    assert {k: v for k, v in wrong.items() if v} == {}


def room_of(module: str) -> str | None:
    """The room of a minimize module ("minimize.search.passes.values": "search"), None for the app's."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS_MAY_IMPORT else None


def test_rooms_inside_minimize_import_only_the_program_room() -> None:
    wrong = {}
    for p in package_files("minimize"):
        own = p.relative_to(ROOT / "minimize").parts[0]
        if own not in ROOMS_MAY_IMPORT:
            continue  # the app's modules wire the rooms
        bad = sorted(m for m in imported_modules(p) if _top(m) == "minimize" and m not in SHARED
                     and room_of(m) not in {own, *ROOMS_MAY_IMPORT[own]})
        if bad:
            wrong[str(p.relative_to(ROOT))] = bad
    assert wrong == {}
    assert room_of("minimize.search.passes.values") == room_of("minimize.search") == "search"
    assert room_of("minimize.reduce") is None


def test_only_the_cli_imports_typer() -> None:
    users = [str(p.relative_to(ROOT)) for pkg in ("minimize", "oracles", "repros") for p in package_files(pkg)
             if "typer" in {_top(m) for m in imported_modules(p)}]
    assert users == ["minimize/cli.py"]


def test_the_scan_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import os\n\ndef f():\n    from repros.runner import run_script\n    from . import x\n")
    assert imported_modules(sample) == {"os", "repros.runner"}
