"""reset_dynamo(): torch._dynamo.reset() before each compile, without the import of
Inductor's CUDA graph trees that reset() makes where CUDA is available (0.6 s of imports on
the way to every worker's start), unless Inductor has made trees. Run in fresh interpreters,
with CUDA's availability faked on a machine without it: what is measured is which modules
get imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE_CUDA = "import torch; torch.cuda.is_available = lambda: True\n"


def run(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", FAKE_CUDA + code], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_torchs_reset_imports_the_trees_and_ours_does_not():
    said = run("import sys, json\n"
               "from oracles.backends.base import CUDAGRAPH_TREES, reset_dynamo\n"
               "reset_dynamo(); ours = CUDAGRAPH_TREES in sys.modules\n"
               "available = torch.cuda.is_available()\n"
               "torch._dynamo.reset(); theirs = CUDAGRAPH_TREES in sys.modules\n"
               "print(json.dumps({'ours': ours, 'theirs': theirs, 'available': available}))")
    assert said == {"ours": False, "theirs": True, "available": True}  # and is_available is put back


def test_once_the_trees_are_imported_they_are_reset():
    said = run("import sys, json\n"
               "import torch._inductor.cudagraph_trees as trees\n"
               "calls = []; trees.reset_cudagraph_trees = lambda: calls.append(1)\n"
               "from oracles.backends.base import reset_dynamo\n"
               "reset_dynamo()\n"
               "print(json.dumps({'calls': len(calls)}))")
    assert said == {"calls": 1}


def test_the_zygote_imports_what_inductors_first_compile_needs_and_no_more_for_a_plugin():
    """worker_side.preload, in the zygote: Inductor's warm_imports (its compile_fx and the
    trees), which its workers' first compile would import each; a plugin's workers, none.
    Either way, what Dynamo's first compile imports (functorch.compile, aot_autograd)."""
    code = ("import sys, json\n"
            "from minimize.run.worker_side import preload\n"
            "torch.cuda.is_available = lambda: True\n"
            "preload({backend!r}, {{}})\n"
            "print(json.dumps([m in sys.modules for m in ('torch._inductor.compile_fx', "
            "'torch._inductor.cudagraph_trees', 'functorch.compile')]))")
    assert run(code.format(backend="inductor")) == [True, True, True]
    assert run(code.format(backend="tests/plugins/planted.py:crash_on_sin")) == [False, False, True]
