"""The part of repro.py that runs the program eagerly and compiled and prints the verdict,
as real functions copied by source into each script (minimize/emit/script.py).

Lines tagged `# [feature]` go into a script only where its bug needs them (a GPU, packages
the backend imports, a plugin to load, dynamic sizes, a float64 reference, an error to match,
the cause a runtime logged, a child process, a memory limit, a pass manager's wrapped error,
a crash's stack): see oracles/script_checks.tagged_source. The script contract
(docs/design.md, "The script contract"): exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED (cannot run
here), 3 CHANGED (it fails another way); TRTMIN_BACKEND=eager runs eager in place of the
backend. `main` returns the verdict and why; the script's `if __name__ == "__main__":` block
(`entry`'s body) prints it and exits with its code. The names below that the script defines
itself are set here to stand-ins, so this module is plain, importable Python; its functions
carry no annotations for the same reason.
"""

import importlib
import os
import re
import sys
import tempfile
import traceback

import torch

from oracles.reference import Float64

# What each script defines for itself: the program, its inputs, the backend call, the checks.
DEVICE, ERROR_PATTERN, LOGGED_PATTERN, DYNAMIC = "cpu", "", "", {}
Repro = make_inputs = compile_backend = load_backend = outcome = None
mark_dynamic = clone_marked = limit_memory = announce_call = run_in_child = None


@torch.no_grad()
def main():
    """(verdict, why): why is a line of text or the exception that decided it."""
    def call(module):  # module's outputs on a copy of the inputs, as a list
        out = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])  # [!dynamic]
        out = module(*clone_marked(inputs))  # [dynamic] with their dynamic dims
        return list(out) if isinstance(out, (list, tuple)) else [out]
    try:  # the eager half runs everywhere, so a broken script shows
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
        inputs = [mark_dynamic(x, DYNAMIC.get(i, {})) for i, x in enumerate(inputs)]  # [dynamic]
        expected = call(module := Repro().to(DEVICE))  # [!failure]
        call(module := Repro().to(DEVICE))  # [failure] the bug is a failure: eager must run, its values do not matter
        with Float64():  # [float64] the reference: a difference counts beyond eager's own error
            exact = call(module)  # [float64]
    except Exception as e:  # no GPU, a file beside the script gone, or eager fails here: no news of the bug
        return "SKIPPED: cannot run", e
    try:  # [plugin]
        backend = None if os.environ.get("TRTMIN_BACKEND") == "eager" else load_backend()  # [plugin]
    except Exception as e:  # [plugin] the plugin's file or module is gone: not the bug
        return "SKIPPED: cannot run: the backend cannot be loaded", e  # [plugin]
    importlib.import_module("torch._dynamo")  # [dynamo] start-up, before the child's clock and the memory limit
    cannot = limit_memory()  # [memory]
    if cannot:  # [memory]
        return "SKIPPED", f"cannot run: {cannot}"  # [memory]
    announce_call()  # [child]
    stderr, log = os.dup(2), tempfile.TemporaryFile()  # [logged] the runtime logs its error's cause to stderr alone
    os.dup2(log.fileno(), 2)  # [logged]
    try:
        actual = call(module if os.environ.get("TRTMIN_BACKEND") == "eager" else compile_backend(module, inputs))  # [!plugin,!failure]
        actual = call(module if backend is None else compile_backend(module, inputs, backend))  # [plugin,!failure]
        call(module if os.environ.get("TRTMIN_BACKEND") == "eager" else compile_backend(module, inputs))  # [!plugin,failure]
        call(module if backend is None else compile_backend(module, inputs, backend))  # [plugin,failure]
        torch.cuda.synchronize()  # [cuda] a kernel's error shows here
    except Exception as e:  # the compiler failed: is it the same failure?
        chain, x = [], e  # [pattern,!direct]
        while x is not None and len(chain) < 8:  # [pattern,!direct] torch.compile wraps the backend's error: match them all
            chain, x = [*chain, x], getattr(x, "inner_exception", None) or x.__cause__  # [pattern,!direct]
        if re.search(ERROR_PATTERN, ": ".join(f"{type(x).__name__}: {str(x) or repr(x)}" for x in chain)):  # [pattern,!direct]
            if not re.search(LOGGED_PATTERN, os.pread(log.fileno(), 1 << 20, 0).decode(errors="replace")):  # [logged]
                return "CHANGED: fails differently now", f"{type(e).__name__}: {e} (the same error; the runtime logged another cause)"  # [logged]
            return "REPRODUCED", getattr(e, "inner_exception", None) or e  # [pattern,!direct] the backend's own error
        same = re.search(ERROR_PATTERN, f"{type(e).__name__}: {e}")  # [pattern,direct] compile_backend raised it
        return ("REPRODUCED" if same else "SKIPPED" if isinstance(e, ImportError) else "CHANGED: fails differently now"), e  # [pattern,direct]
        missing = any(isinstance(x, ImportError) for x in (e, e.__cause__, getattr(e, "inner_exception", None)))  # [requires,!direct] raised or wrapped
        return ("SKIPPED" if missing else "CHANGED: fails differently now"), getattr(e, "inner_exception", None) or e  # [requires,!direct]
        return "CHANGED: fails differently now", getattr(e, "inner_exception", None) or e  # [!requires,!direct]
    finally:  # [logged] stderr back, and what the runtime logged shown there as ever
        sys.stderr.flush()  # [logged]
        os.dup2(stderr, 2)  # [logged]
        sys.stderr.write(os.pread(log.fileno(), os.fstat(log.fileno()).st_size, 0).decode(errors="replace"))  # [logged] all of it
    return "FIXED", "compiled and ran without error"  # [failure]
    return outcome(expected, actual) if len(actual) == len(expected) else ("REPRODUCED", f"the backend returns {len(actual)} outputs, eager {len(expected)}")  # [!failure,!float64,!nan]
    return outcome(expected, actual, exact) if len(actual) == len(expected) else ("REPRODUCED", f"the backend returns {len(actual)} outputs, eager {len(expected)}")  # [float64,!nan]
    return outcome(expected, actual) if len(actual) == len(expected) else ("CHANGED: fails differently now", f"the backend returns {len(actual)} outputs, eager {len(expected)}")  # [nan] trtmin's check: a mismatch


def entry():
    """The body of the script's `if __name__ == "__main__":` block: print the verdict line
    (an error as its type and first line) and exit with its code."""
    if not os.environ.get("TRTMIN_CHILD"):  # [child] the bug ends the process: judge it from outside
        sys.exit(run_in_child())  # [child]
    verdict, why = main() if os.environ.get("TRTMIN_BACKEND", "eager") in ("", "eager") else ("SKIPPED", "TRTMIN_BACKEND takes eager alone (eager PyTorch for the backend)")
    if isinstance(why, BaseException) and not verdict.startswith("SKIPPED"):  # [stack] where the compiler failed, for its
        traceback.print_exception(why)  # [stack] maintainers: on stderr, before the verdict line
    if type(why) is Exception and why.__cause__ is not None:  # [wrapped] a pass manager's: its pass's words after
        why = f"Exception: {why}: {type(why.__cause__).__name__}: {why.__cause__}"  # [wrapped] as trtmin words it
    why = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    sys.exit(print(f"{verdict}: {why.splitlines()[0][:300]}") or {"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
