"""Reduction passes, one family per module, in one tier list.

A pass proposes candidates through the ReductionProblem (try_first / run_search) and
accepts what fails the same way, as sequential code: speculation over all passes is
the problem's (minimize/search/speculate.py). Passes make deterministic progress and do not loop
to a fixed point themselves; the scheduler does (docs/design.md#a-reduction-end-to-end).
"""

from __future__ import annotations

from typing import Callable

from minimize.search.passes.bisect_window import bisect_window
from minimize.search.passes.delete_chunks import delete_chunks, prove_one_minimal
from minimize.search.passes.interior import keep_needed
from minimize.search.passes.module_blocks import delete_module_blocks
from minimize.search.passes.outputs import keep_one_output
from minimize.search.passes.partitions import bisect_op_fallback, bisect_settings, isolate_partition
from minimize.search.passes.shapes import generate_small_values, shrink_shapes
from minimize.search.passes.values import generate_values
from minimize.search.problem import ReductionProblem

Pass = Callable[[ReductionProblem], None]
PROOF: tuple[str, Pass] = ("prove_one_minimal", prove_one_minimal)  # after the tiers' fixed point

# Coarse to fine: a contiguous failing window first, then the nodes inside it that the
# failure needs, then whole outputs and whole nn.Module blocks, then delta debugging down
# to single nodes.
TIERS: list[tuple[str, Pass]] = [
    ("isolate_partition", isolate_partition),
    ("bisect_window", bisect_window),
    ("keep_needed", keep_needed),
    ("keep_one_output", keep_one_output),
    ("delete_module_blocks", delete_module_blocks),
    ("delete_chunks", delete_chunks),
]

# Once the graph is minimal: which settings and which op types the bug needs, whether it
# needs the values of its large tensors and their sizes (both at once first: most bugs
# need neither), then each.
FINISHERS: list[tuple[str, Pass]] = [
    ("bisect_settings", bisect_settings),
    ("bisect_op_fallback", bisect_op_fallback),
    ("generate_small_values", generate_small_values),
    ("generate_values", generate_values),
    ("shrink_shapes", shrink_shapes),
]
