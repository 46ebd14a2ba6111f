"""A compiler outside trtmin's Python, for --backend 'cmd:python command_runner.py MODE {model} {inputs} [{outputs}]'.

It reads the exported candidate's graph from the archive, and where it must write
{outputs} loads it and its inputs with torch and runs it; it has one planted bug, chosen
by MODE, on aten.sin (a crash or a hang needs no torch: each call then takes milliseconds,
not torch's import, so the tests' hang timeouts stay short):
  crash_on_sin   exits 1 with "RuntimeError: sin is not supported by this runtime"
  crash_on_sin_odd_text  exits 1 with an error that holds three quotes and backslashes
  dict_on_sin    runs, and saves {outputs} as a dict (not the outputs in order)
  garbage_on_sin writes {outputs} that torch.load cannot read
  off_on_sin     runs, with sin's values doubled (written to {outputs})
  no_outputs     runs, and writes no {outputs} (a runner's mistake, no compiler's bug)
  elsewhere      exits 1 unless it runs from the folder of {model}, as repro.py runs it
  always_fails   exits 1 on any program (a runner's own failure, no compiler's bug)
  hang_on_sin    writes its pid to $TRTMIN_TEST_STATE/hung.pid (and {model}'s path to hung.model) and sleeps
"""

import os
import sys
import time
import zipfile

mode, model, inputs = sys.argv[1:4]
if mode == "elsewhere" and os.getcwd() != os.path.dirname(os.path.abspath(model)):
    raise RuntimeError(f"run from {os.getcwd()}, not from the folder of the files")
with zipfile.ZipFile(model) as archive:  # the graph as torch.export.save wrote it: no torch to import yet
    graph = "".join(archive.read(n).decode() for n in archive.namelist() if n.endswith("models/model.json"))
has_sin = '"torch.ops.aten.sin.default"' in graph
if mode == "always_fails":
    raise RuntimeError("cannot open /dev/npu0")
if has_sin and mode == "crash_on_sin":
    raise RuntimeError("sin is not supported by this runtime")
if has_sin and mode == "crash_on_sin_odd_text":
    raise RuntimeError(r'sin is not supported: """sin""" at C:\xla\new\N')
if mode == "crash_on_sin_hang_otherwise":  # a one-op control hangs: it tells nothing, and is ended
    if has_sin:
        raise RuntimeError("sin is not supported by this runtime")
    time.sleep(37.5)
if has_sin and mode == "hang_on_sin":
    with open(os.path.join(os.environ["TRTMIN_TEST_STATE"], "hung.pid"), "w") as f:
        f.write(str(os.getpid()))
    with open(os.path.join(os.environ["TRTMIN_TEST_STATE"], "hung.model"), "w") as f:
        f.write(model)
    time.sleep(600)
if len(sys.argv) == 4:  # no {outputs}: only a failure is judged, and there is none
    sys.exit(0)

import torch  # noqa: E402 - only a run that writes values needs torch
from torch.fx import Interpreter  # noqa: E402

ep = torch.export.load(model)
args = torch.load(inputs, weights_only=True)


class OffOnSin(Interpreter):
    def call_function(self, target, a, kw):
        out = super().call_function(target, a, kw)
        return out * 2 if target == torch.ops.aten.sin.default and mode == "off_on_sin" else out


module = ep.module()
outputs = OffOnSin(module.graph_module if hasattr(module, "graph_module") else module).run(*args)
if has_sin and mode == "dict_on_sin":
    torch.save({"out": outputs}, sys.argv[4])
    sys.exit(0)
if has_sin and mode == "garbage_on_sin":
    with open(sys.argv[4], "w") as f:
        f.write("not torch.save's")
    sys.exit(0)
if len(sys.argv) > 4 and mode != "no_outputs":
    torch.save(tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,), sys.argv[4])
