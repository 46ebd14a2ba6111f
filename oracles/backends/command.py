"""An external command as the compiler, `--backend 'cmd:python run_on_board.py {model} {inputs} {outputs}'`.

For a compiler that runs outside this Python: TensorRT in another environment, `trtexec`,
an ExecuTorch runner on a board over adb, another torch release. Each candidate is exported
(torch.export.save) to {model} with its inputs (torch.save of a tuple) in {inputs}, and the
command runs on them, once per oracle call:

- it fails the candidate by exiting non-zero: a crash verdict, `CommandFailed: exit 1:
  <its last line>` (stderr's, else stdout's), so the same bug is the same last line (numbers
  made generic); `--match` narrows it. A command killed by a signal says which.
- where it has an {outputs} argument, it writes the program's outputs there (torch.save of
  a tuple or list) and the mismatch and nan oracles compare them with eager PyTorch.

The command is split like a shell line (shlex), not run by a shell, and runs from the folder
of the exported files, in the workers and in repro.py alike. An argument naming a file or
folder relative to trtmin's working directory is made absolute, so both find it. repro.py runs
the same command: the maintainer needs it, and the report names it. The files it names (a
runner script) are copied beside repro.py, which runs the copies where the originals are gone.
"""

from __future__ import annotations

import os
import re
import shlex
import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart, scratch_folder
from oracles.dynamic import export_dynamic_shapes
from oracles.errors import TrtminError
from oracles.supervise import SUPERVISE_SOURCE, supervised
from oracles.verdict import needs_child

from oracles.backend_names import COMMAND_PREFIX as PREFIX  # noqa: E402
from oracles.command_line import parse_command  # noqa: E402
RUNNER_MISTAKE = "exit 0"  # how run_command's errors about {outputs} start




class CommandFailed(RuntimeError):
    """The command exited non-zero: its exit and last line, then the tail of what it said."""


def command_files(command, folder):
    """The paths of {model}, {inputs} and {outputs} in `folder`, and `command` with them
    filled in. Shared, by source, with repro.py."""
    paths = {name: os.path.join(folder, file) for name, file in
             (("model", "model.pt2"), ("inputs", "inputs.pt"), ("outputs", "outputs.pt"))}
    args = list(command)
    for name, path in paths.items():
        args = [a.replace("{" + name + "}", path) for a in args]
    return args, paths


# run_command's export_dynamic_shapes in a script of a static program: no marks to read
STATIC_SHAPES_SOURCE = "def export_dynamic_shapes(inputs):\n    return None  # the program's sizes are static\n"


def run_command(command, module, inputs, folder, launcher=()):
    """Export `module` with `inputs` into `folder`, run `command` (its {model}, {inputs} and
    {outputs} replaced by the files' paths) and return what it wrote to {outputs} (None
    where it has no {outputs}). Raises CommandFailed where it exits non-zero. Shared, by
    source, with repro.py."""
    import pathlib
    import subprocess

    folder = pathlib.Path(folder)
    args, paths = command_files(command, folder)
    ep = torch.export.export(module, tuple(inputs), strict=False, dynamic_shapes=export_dynamic_shapes(inputs))
    torch.export.save(ep, paths["model"])
    torch.save(tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inputs), paths["inputs"])  # no marks
    if os.path.exists(paths["outputs"]):
        os.remove(paths["outputs"])  # a file from an earlier call is not this one's answer
    # From the files' folder, in the workers and in repro.py alike (which start elsewhere)
    done = subprocess.run(list(launcher) + args, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          errors="replace")
    if done.returncode != 0:
        raise CommandFailed(command_failure(done.returncode, done.stdout, done.stderr))
    if not any("{outputs}" in a for a in command):
        return None
    if not os.path.exists(paths["outputs"]):
        raise CommandFailed("exit 0 without writing {outputs}: save the program's outputs there with "
                            "torch.save(tuple(outputs), path)")
    save = "save the program's outputs there with torch.save(tuple(outputs), path)"
    try:
        outputs = torch.load(paths["outputs"], weights_only=True)
    except Exception as e:  # noqa: BLE001  (not torch's format raises KeyError, UnpicklingError, ...)
        said = next((ln for ln in str(e).splitlines() if ln.strip()), "")[:200]
        raise CommandFailed(f"exit 0, but torch.load cannot read {{outputs}} ({type(e).__name__}: {said}); {save}") from None
    if isinstance(outputs, (torch.Tensor, int, float, bool)):
        return [outputs]
    if not isinstance(outputs, (tuple, list)):
        raise CommandFailed(f"exit 0, but {{outputs}} holds a {type(outputs).__name__}, not the outputs in order; {save}")
    return list(outputs)


def command_failure(returncode, stdout, stderr):
    """A failed command's words: its exit (or the signal that killed it) and last line
    (stderr's, else stdout's), then the tail of what it said: its last whole lines, all
    within the 2,000 characters a verdict keeps (a runner's start-up warnings came first
    and its cause was cut mid-line). Shared, by source, with repro.py."""
    import signal

    said = [ln for ln in stderr.splitlines() if ln.strip()] or [ln for ln in stdout.splitlines() if ln.strip()]
    how = f"exit {returncode}" if returncode > 0 else f"killed by {signal.Signals(-returncode).name}"
    head, tail = f"{how}: {said[-1].strip() if said else '(it printed nothing)'}"[:1000], said[-30:]
    while tail and len(head) + sum(len(line) + 1 for line in tail) > 2000:  # what a verdict keeps
        tail = tail[1:]
    return "\n".join([head, *tail])


COPY_MAX_BYTES = 1 << 20  # a runner script is copied beside repro.py; a larger file is data


def _is_script(path: str) -> bool:
    """Whether the command's program is a script of the user's (`cmd:./run.sh ...`), to copy
    as its arguments are, rather than a program of the system (/usr/bin/env)."""
    with open(path, "rb") as f:
        return f.read(2) == b"#!"


class CommandBackend(Backend):
    name = "command"

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        if self.settings:
            raise TrtminError(f"--set {next(iter(self.settings))}: backend cmd: takes no settings; "
                              "pass them to your command instead")
        self.command = parse_command(spec)
        self.writes_outputs = any("{outputs}" in a for a in self.command)

    def own_code(self) -> str | None:
        return "the command"

    def oracle_problem(self, oracle: str) -> str | None:
        if oracle in ("mismatch", "nan") and not self.writes_outputs:
            return (f"--oracle {oracle} compares the program's outputs, and the command has no {{outputs}} to "
                    "write them to; add {outputs} to it (torch.save(tuple(outputs), path)), or use --oracle "
                    "crash")
        return None

    def setup_problem(self, message: str) -> str | None:
        # "exit 0 ...": the command ran to its end, and its {outputs} are missing or not outputs
        if message.startswith(RUNNER_MISTAKE):
            said = message.splitlines()[0].removeprefix(RUNNER_MISTAKE).removeprefix(", but").strip()
            return f"the command exits 0 (it ran), but {said}: that is the command's mistake, no compiler's bug; fix it"
        return super().setup_problem(message)

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        folder = scratch_folder("trtmin-cmd-")  # removed when `run` is dropped

        def run(*args: Any) -> Any:
            outputs = run_command(self.command, gm, args, folder.name, supervised(folder.name))
            return gm(*args) if outputs is None else outputs

        return run

    def script_part_for(self, verdict: Any, dynamic: bool = True,
                        io_dtypes: frozenset[Any] | None = None) -> ScriptPart:
        """The command's runner, pasted: a static program's script has no dynamic shapes to
        export (export_dynamic_shapes's 20 lines, a newcomer's hunt found, never ran), and
        only a hang's needs trtmin's launcher (it was a line of 3,194 characters in each)."""
        from oracles.backends.onnx_export import script_source
        from oracles.backends.torch_tensorrt import _indent_body

        body = textwrap.dedent("""\
            import atexit, shutil, tempfile
            folder = tempfile.mkdtemp(prefix="repro-cmd-")
            atexit.register(shutil.rmtree, folder, True)  # the exported files go when the script ends
            command = backend

            def run(*args):
                outputs = run_command(command, module, args, folder, LAUNCHER(folder))
                return module(*args) if outputs is None else outputs
            return run""")
        # The files the command names (a runner script): where the user ran it, the script
        # runs them there; elsewhere (a maintainer, the suite on another machine) the copies
        # beside it. Gone from both, it cannot run here, which is no news of the bug (else the
        # command's "can't open file" was CHANGED).
        copied = self.copied_files()
        copies = {str(src): name for name, src in copied.items()}
        files = [a for a in self.command[1:] if os.path.isabs(a) and os.path.exists(a)]
        load = textwrap.dedent(f"""\
            import pathlib, shutil
            copies = {copies!r}  # a file the command names -> its copy beside this script
            command = []
            for arg in {self.command!r}:
                copy = pathlib.Path(__file__).resolve().with_name(copies[arg]) if arg in copies else None
                if copy is not None and not os.path.exists(arg) and copy.exists():
                    arg = str(copy)
                if arg in {files!r} and not os.path.exists(arg):
                    raise FileNotFoundError(arg + ", a file the backend's command names, is not found here")
                command.append(arg)
            if shutil.which(command[0]) is None:
                raise FileNotFoundError({self.command[0]!r} + ", the program of the backend's command, is not found here")
            return command""")
        # A hang's script (a death's) runs the backend in a child it kills at the timeout: the
        # command goes with it under trtmin's launcher (oracles/supervise.py). Another's runs the
        # command in its own process group, which `repros run` ends, and a terminal's Ctrl-C
        # reaches, without the launcher's 3,000 characters (a line of them the maintainer would read)
        if verdict is None or needs_child(verdict):
            assert '"""' not in SUPERVISE_SOURCE and "\\" not in SUPERVISE_SOURCE  # as it is, in a """ string
            launcher = (f'SUPERVISE_SOURCE = """\\\n{SUPERVISE_SOURCE}"""\n\n\n' + script_source(supervised)
                        + "\n\nLAUNCHER = supervised  # the command dies with this script, even by kill -9\n")
        else:
            launcher = "LAUNCHER = lambda folder: ()  # the command runs in this script's process group\n"
        shapes = script_source(export_dynamic_shapes) if dynamic else STATIC_SHAPES_SOURCE
        runner = "\n\n\n".join([script_source(CommandFailed).rstrip("\n"), shapes.rstrip("\n"),
                                 script_source(command_files, command_failure, run_command)])
        return ScriptPart(imports=[runner, launcher],
                          compile_body=_indent_body(body), load_body=_indent_body(load),
                          files=copied)

    def script_part(self) -> ScriptPart:
        return self.script_part_for(None)

    def copied_files(self) -> dict[str, Path]:
        """The files the command names, up to COPY_MAX_BYTES each, to copy beside repro.py
        as `repro_cmd_<name>`: a repro saved into the suite, or sent upstream, needs its
        runner as it needs plugin.py. Larger ones (an engine, a dataset) stay where they are."""
        copies: dict[str, Path] = {}
        for i, arg in enumerate(self.command):
            if os.path.isabs(arg) and os.path.isfile(arg) and os.path.getsize(arg) <= COPY_MAX_BYTES \
                    and Path(arg) not in copies.values() and (i > 0 or _is_script(arg)):
                base = re.sub(r"[^\w.-]", "_", os.path.basename(arg))
                name, n = f"repro_cmd_{base}", 0
                while name in copies:  # two runners of one name, from two folders (never a third's name)
                    n += 1
                    name = f"repro_cmd_{n}_{base}"
                copies[name] = Path(arg)
        return copies

    def describe(self) -> str:
        return PREFIX + " ".join(a if re.fullmatch(r"[\w@%+=:,./{}-]+", a) else shlex.quote(a) for a in self.command)

    def describe_shared(self) -> str:
        """The command with each absolute path by its last name ("/home/me/run.py" as "run.py",
        "--out=/home/me/o/" as "--out=o", as a plugin's file is shown): a user's home folder
        in an issue's title says nothing."""
        def shared(arg: str) -> str:
            key, eq, value = arg.rpartition("=") if "=" in arg and not os.path.isabs(arg) else ("", "", arg)
            return key + eq + (os.path.basename(value.rstrip("/")) or "/" if os.path.isabs(value) else value)
        return PREFIX + " ".join(a if re.fullmatch(r"[\w@%+=:,./{}-]+", a) else shlex.quote(a)
                                 for a in map(shared, self.command))
