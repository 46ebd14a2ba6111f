"""The longest functions of trtmin's packages, by lines (issue 24 tracks the top 10):
`python bench/longest_functions.py [ROOT] [N]`."""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def longest(root: Path, n: int = 10) -> list[tuple[int, str]]:
    rows = []
    for package in ("minimize", "oracles", "repros"):
        for path in (root / package).rglob("*.py"):
            if "suite" in path.relative_to(root).parts[1:-1]:
                continue  # the saved repros' scripts
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    rows.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(root)}:{node.name}"))
    return sorted(rows, reverse=True)[:n]


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    for lines, name in longest(root, int(sys.argv[2]) if len(sys.argv) > 2 else 10):
        print(lines, name)
