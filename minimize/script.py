"""repro.py: the standalone script that compiles the reduced graph and judges it.

Everything it needs is written into it (the graph as a Repro module, its inputs and
weights as expressions or a tensors file beside it, the checks the oracle used), so it
runs with torch and the compiler alone, never trtmin.
"""

from __future__ import annotations

import platform
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

import minimize
from minimize.passes.values import INLINE_MAX_ELEMENTS
from oracles.address_space import address_space_source
from oracles.backends.base import Backend
from oracles.reference import ERROR_RATIO
from oracles.script_checks import check_source
from oracles.script_child import CHILD_SOURCE
from oracles.verdict import Signature, Verdict


INPUTS_FILE = "repro_inputs.pt"


def nodes(n: int) -> str:
    """"1 call node", "3 call nodes"."""
    return f"{n} call node" + ("" if n == 1 else "s")


def environment() -> dict[str, str]:
    """What a run records of where it ran (summary.json): with the versions of the installed
    compilers, which `repros add` keeps as the manifest's first_seen."""
    from oracles.environment import KEY_PACKAGES, NOT_INSTALLED, package_version
    env = {"trtmin": minimize.__version__, "torch": torch.__version__, "python": platform.python_version(),
           "os": platform.platform(), "cuda": str(torch.version.cuda or "none")}
    for package in KEY_PACKAGES:
        version = env.get(package) or package_version(package)
        if version != NOT_INSTALLED:
            env[package] = version
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


@dataclass
class ReproInfo:
    title: str
    source_model: str
    original_nodes: int
    final_nodes: int
    oracle_calls: int
    oracle: str
    verdict: Verdict
    signature: Signature
    match: str | None
    atol: float
    rtol: float
    device: str
    needs_subprocess: bool  # signal deaths and hangs must be caught from a parent process
    timeout: float
    reference: str = "eager"  # "float64": a mismatch is judged against eager's own error (oracles/reference.py)
    memory_limit_mb: int | None = None  # --memory-limit: the script sets it too (oracles/address_space.py)
    imports: tuple[str, ...] = ()  # --import: libraries registering the program's custom ops, imported first
    # {input name: {dim: (min, max or None)}}: the sizes the program was exported with as dynamic
    dynamic: dict[str, dict[int, tuple[int, int | None]]] = field(default_factory=dict)


def forward_source(gm: fx.GraphModule) -> str:
    src = gm.graph.python_code(root_module="self").src
    lines = []
    for line in src.strip().splitlines():
        line = re.sub(r";\s+(\w+ = )+None$", "", line)  # fx's "x = None" frees: noise here
        lines.append(line)
    return "\n".join(lines)


def _literal(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        dtype = str(v.dtype)
        values = v.detach().cpu().reshape(-1).tolist()
        shape = tuple(v.shape)
        return f"torch.tensor({values!r}, dtype={dtype}).reshape({shape!r})"
    return repr(v)


def tensor_expressions(values: dict[str, Any], generated: dict[str, str] | None,
                       big: dict[str, torch.Tensor]) -> dict[str, str]:
    """The expression that makes each value in repro.py: generated ones as the expression
    (minimize/passes/values.py), small ones inline, the other large ones read from
    `tensors`, the file beside the script (added to `big`)."""
    made = generated or {}

    def value(name: str, v: Any) -> str:
        if name in made:
            return made[name]
        if isinstance(v, torch.Tensor) and (v.numel() > INLINE_MAX_ELEMENTS or v.is_complex()):
            big[name] = v.detach().cpu().contiguous()
            return f"tensors[{name!r}]"
        return _literal(v)
    return {name: value(name, v) for name, v in values.items()}


def tensors_source(inputs: dict[str, Any], constants: dict[str, Any],
                   generated: dict[str, str] | None = None) -> tuple[str, str, dict[str, torch.Tensor]]:
    """Source of Repro.__init__ (the weights) and make_inputs(), and the tensors that go
    to the file beside the script."""
    big: dict[str, torch.Tensor] = {}
    load = f"torch.load(pathlib.Path(__file__).with_name({INPUTS_FILE!r}), weights_only=True)"
    weight_exprs = tensor_expressions(constants, generated, big)
    input_exprs = tensor_expressions(inputs, generated, big)
    weights = [f"        self.register_buffer({n!r}, {e})" for n, e in weight_exprs.items()]
    items = [f"        {e},  # {n}" for n, e in input_exprs.items()]
    init = ""
    if weights:
        uses_file = any(n in big for n in constants)
        init = ("    def __init__(self):\n        super().__init__()\n"
                + (f"        tensors = {load}\n" if uses_file else "") + "\n".join(weights) + "\n\n")
    if not items:
        return init, "def make_inputs():\n    return []\n", big
    file_line = f"    tensors = {load}\n" if any(n in big for n in inputs) else ""
    return init, "def make_inputs():\n" + file_line + "    return [\n" + "\n".join(items) + "\n    ]\n", big


SCRIPT = '''#!/usr/bin/env python3
"""{title}

{verdict_line}

Reduced by trtmin {trtmin} from {source}: {original} -> {final} in {calls} oracle calls.
Reduced on: torch {torch}, Python {python}, {os}, device {device}{gpu}.
Backend: {backend}. Oracle: {oracle}{tolerance}.{memory_words}

Run:      python repro.py
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package or file),
          3 = CHANGED: it still fails, but differently (another error, a hang or a kill)
Control:  TRTMIN_BACKEND=eager python repro.py
          runs eager PyTorch in place of the backend, so it must print FIXED
"""

{std_imports}

try:
    import torch
except ImportError as exc:  # no torch here: cannot run, which is no verdict on the bug
    print(f"SKIPPED: torch cannot be imported: {{exc}}")
    sys.exit(2)
{device_import}{libraries}
inf, nan = float("inf"), float("nan")
DEVICE = {device!r}
ATOL, RTOL = {atol!r}, {rtol!r}
REFERENCE = {reference!r}  # float64: a difference counts only beyond ERROR_RATIO x eager's own error from a float64 run
REQUIRES = {requires!r}  # "a|b": either package
{dynamic_constant}{memory_constant}{imports}

class Repro(torch.nn.Module):
{init}{forward}


{inputs}

def load_backend():
    {load_body}


def compile_backend(module, inputs, backend):
    {compile_body}

{checks}
{dynamic_functions}{child_functions}{memory_functions}
def exception_chain(e):
    """The exception and what it wraps (torch.compile wraps a backend's error)."""
    chain = []
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = getattr(e, "inner_exception", None) or e.__cause__
    return chain


def prepare():
    """(module, inputs, eager's outputs, the float64 run's or None): everything before the
    backend is called."""
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
{mark_inputs}    module = Repro().to(DEVICE)  # its weights too: written (or loaded) on the CPU
    with torch.no_grad():
        expected = flatten(module(*clone(inputs)))  # the eager half runs everywhere, so a broken script shows
{float64_run}


def clone(inputs):
    {clone_body}


def first_line(e):
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{{type(e).__name__}}: {{lines[0][:300] if lines else ''}}".rstrip(": ")


def run():
    try:
        module, inputs, expected, exact = prepare()
    except Exception as e:  # a file beside the script is gone or eager fails here: no news about the bug
        print(f"SKIPPED: cannot run: {{first_line(e)}}")
        return 2
    eager = os.environ.get("TRTMIN_BACKEND") == "eager"
    missing = [name for name in REQUIRES if not any(importlib.util.find_spec(n) for n in name.split("|"))]
    if missing and not eager:
        print(f"SKIPPED: {{', '.join(m.replace('|', ' or ') for m in missing)}} is not installed")
        return 2
    try:
        backend = None if eager else load_backend()
    except Exception as e:  # plugin.py gone from beside the script, a module not installed: not the bug
        print(f"SKIPPED: cannot run: the backend cannot be loaded: {{first_line(e)}}")
        return 2
{before_call}    with torch.no_grad():
        try:
            compiled = module if eager else compile_backend(module, clone(inputs), backend)
            actual = flatten(compiled(*clone(inputs)))
            if DEVICE.startswith("cuda"):
                torch.cuda.synchronize()
        except Exception as e:  # the compiler failed: is it the same failure?
            chain = exception_chain(e)
            text = "\\n".join(f"{{type(x).__name__}}: {{x}}" for x in chain)
            root = e  # the compiler's own error: what torch.compile's wrapper wraps, not its causes
            while getattr(root, "inner_exception", None) is not None:
                root = root.inner_exception
            error = first_line(root)
            if ERROR_PATTERN and re.search(ERROR_PATTERN, text):
                print(f"REPRODUCED: {{error}}")
                return 1
            print(f"CHANGED: fails differently now: {{error}}")
            return 3
    reproduced, message = outcome(expected, actual, exact)
    if reproduced is None:
        print(f"CHANGED: fails differently now: {{message}}")
        return 3
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


def main():
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        print("SKIPPED: no CUDA GPU is visible here")
        return 2
{child_block}    return run()


if __name__ == "__main__":
    sys.exit(main())
'''


FLOAT64_RUN = """        with Float64():
            return module, inputs, expected, flatten(module(*clone(inputs)))"""


# torch.compile imports Dynamo (a second or more) on its first call: start-up, as in trtmin's
# warm workers, so it is done before the child starts the clock, and before the memory limit.
IMPORT_DYNAMO = "    import torch._dynamo\n"
ANNOUNCE_CALL = "    announce_call()\n"
LIMIT_MEMORY = '''    cannot = limit_memory()
    if cannot:
        print(f"SKIPPED: cannot run: {cannot}")
        return 2
'''


# The memory limit the reduction ran under (--memory-limit), set as trtmin's workers set it,
# with their functions (oracles/address_space.py): the bug is an allocation over it.
MEMORY_FUNCTIONS = '''
def limit_memory():
    """RLIMIT_AS of MEMORY_LIMIT_MB for the backend call, as trtmin's workers had it: None once
    set, else why it cannot be (the script then cannot judge the bug here)."""
    limit = f"the reduction's memory limit ({MEMORY_LIMIT_MB} MiB of address space, RLIMIT_AS)"
    try:
        mapped = set_address_limit(MEMORY_LIMIT_MB * 2**20)
    except ImportError:  # no resource module (Windows): unlimited, an OOM bug would pass as FIXED
        return f"the bug needs {limit}, and this platform cannot set one (no resource module)"
    except (ValueError, OSError) as e:  # a lower hard limit is set already (ulimit -v)
        return f"{limit} cannot be set here: {e}"
    if mapped is not None:
        return (f"{limit} is below what this process maps before the backend call ({mapped >> 20} MiB); "
                f"to run it anyway, set MEMORY_LIMIT_MB to at least {mib_to_ask(mapped)}")
    return None


'''


CHILD_BLOCK = '''    if not os.environ.get("TRTMIN_CHILD"):
        return run_in_child()
'''


def render_script(info: ReproInfo, gm: fx.GraphModule, inputs: dict[str, Any], constants: dict[str, Any],
                  backend: Backend, generated: dict[str, str] | None = None) -> tuple[str, dict[str, torch.Tensor]]:
    env = environment()
    part = backend.script_part_for(info.verdict)
    init_src, inputs_src, big = tensors_source(inputs, constants, generated)
    forward_src = forward_source(gm)
    match = info.match
    if info.needs_subprocess and info.verdict.kind == "crash" and not match:
        match = re.escape(info.verdict.message)  # the signal's name, e.g. SIGSEGV
    tol = f" (atol {info.atol:g}, rtol {info.rtol:g}{reference_words(info)})" if info.oracle in ("mismatch",) else ""
    script = SCRIPT.format(
        title=_docstring_text(info.title), verdict_line=_docstring_text(info.verdict.describe()), trtmin=env["trtmin"],
        source=_docstring_text(info.source_model), original=info.original_nodes, final=nodes(info.final_nodes),
        calls=info.oracle_calls,
        torch=env["torch"], python=env["python"], os=env["os"], device=info.device,
        gpu=f" ({env['gpu']})" if "gpu" in env else "", backend=_docstring_text(backend.describe()), oracle=info.oracle,
        tolerance=tol, atol=info.atol, rtol=info.rtol, requires=part.requires,
        imports="\n".join(part.imports) + ("\n" if part.imports else ""),
        init=init_src, forward=textwrap.indent(forward_src, "    "), inputs=inputs_src,
        compile_body=part.compile_body, load_body=part.load_body,
        checks=check_source(info.signature, match, info.reference == "float64"), reference=info.reference,
        float64_run=FLOAT64_RUN if info.reference == "float64" else "        return module, inputs, expected, None",
        device_import=("from torch import device  # the graph below writes devices as device(type=...)\n"
                       if "device(" in forward_src + init_src + inputs_src else ""),
        std_imports="\n".join(f"import {m}" for m in ["importlib.util", "os", *(["pathlib"] if big else []), "re",
                                                         *(["subprocess"] if info.needs_subprocess else []), "sys"]),
        child_block=_child_block(info), child_functions=_child_functions(info),
        before_call=_before_call(info), memory_words=_memory_words(info),
        memory_constant=(f"MEMORY_LIMIT_MB = {info.memory_limit_mb!r}  # the reduction's --memory-limit (RLIMIT_AS), "
                         "set before the backend is called\n" if info.memory_limit_mb else ""),
        libraries=_libraries_source(info),
        memory_functions=MEMORY_FUNCTIONS + address_space_source() + "\n" if info.memory_limit_mb else "",
        **_dynamic_parts(info, list(inputs)),
    )
    return script, big


def _dynamic_parts(info: ReproInfo, input_names: list[str]) -> dict[str, str]:
    """The template's parts for the dims the program was exported with as dynamic: a table by
    input position, inputs marked with it, clones that keep the marks. Empty for a static
    program, whose script is as it was."""
    table = {i: info.dynamic[name] for i, name in enumerate(input_names) if info.dynamic.get(name)}
    if not table:
        return {"dynamic_constant": "", "mark_inputs": "", "dynamic_functions": "",
                "clone_body": "return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]"}
    from oracles.backends.onnx_export import script_source
    from oracles.dynamic import clone_marked, mark_dynamic
    return {
        "dynamic_constant": f"DYNAMIC = {table!r}  # input -> {{dim: (min, max)}}: sizes the program was exported "
                            "with as dynamic (torch.export.Dim); the compile keeps them dynamic\n",
        "mark_inputs": "    inputs = [mark_dynamic(x, DYNAMIC.get(i, {})) for i, x in enumerate(inputs)]\n",
        "dynamic_functions": script_source(mark_dynamic, clone_marked) + "\n",
        "clone_body": "return clone_marked(inputs)  # with their dynamic dims"}


def _libraries_source(info: ReproInfo) -> str:
    """Imports of the libraries that register the program's custom ops (trtmin --import)."""
    if not info.imports:
        return ""
    return (f"\nfor _library in {list(info.imports)!r}:  # they register the program's custom ops\n"
            "    try:\n        importlib.import_module(_library)\n"
            "    except Exception as exc:  # not installed here: cannot run, which is no verdict on the bug\n"
            "        print(f\"SKIPPED: {_library}, which registers the program's custom ops, cannot be imported: "
            "{exc}\")\n        sys.exit(2)\n")


def reference_words(info: ReproInfo) -> str:
    return (f"; only beyond {ERROR_RATIO:g}x eager's own error from a float64 run"
            if info.reference == "float64" else "")


def _docstring_text(text: str) -> str:
    """Text for the script's docstring: an error message or a command may hold backslashes
    (a Windows path, a regex: '\\x' then no hex digits is a SyntaxError) or three quotes."""
    return text.replace("\\", "\\\\").replace('"""', '\\"""')


def _before_call(info: ReproInfo) -> str:
    """run()'s lines between loading the backend and calling it: Dynamo's import (start-up),
    the memory limit, the child's mark that the call starts."""
    limit = bool(info.memory_limit_mb)
    return ((IMPORT_DYNAMO if info.needs_subprocess or limit else "") + (LIMIT_MEMORY if limit else "")
            + (ANNOUNCE_CALL if info.needs_subprocess else ""))


def _memory_words(info: ReproInfo) -> str:
    if not info.memory_limit_mb:
        return ""
    return (f"\nMemory:   the backend is called under {info.memory_limit_mb} MiB of address space (RLIMIT_AS),\n"
            "          the reduction's --memory-limit, set as trtmin's workers set it: a host allocation\n"
            "          over it fails. The eager control runs under it too. Where it cannot be set (no\n"
            "          `resource` module, as on Windows) the script prints SKIPPED.")


def _child_block(info: ReproInfo) -> str:
    """The part of main() that runs the bug in a child process: only for bugs that kill or
    hang the process, so that the scripts of the others hold no dead code."""
    return CHILD_BLOCK if info.needs_subprocess else ""


def _child_functions(info: ReproInfo) -> str:
    if not info.needs_subprocess:
        return ""
    hang = info.oracle == "hang"
    verdict = (f"REPRODUCED: no result within {info.timeout:g} s (hang)", 1) if hang else ("CHANGED: hangs now", 3)
    return (f"\nCHILD_TIMEOUT_S = {info.timeout!r}\nHANG_VERDICT = {verdict!r}\n"
            f"DEATH_PATTERN = ERROR_PATTERN or \"$^\"  # how the reduced bug ended the process\n{CHILD_SOURCE}")
