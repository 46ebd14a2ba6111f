"""User compilers: `path/to/file.py:fn` or `pkg.module:fn`.

`fn` has the torch.compile backend signature `fn(gm, example_inputs) -> callable`, so
any in-house compiler plugs in. A plugin runs the user's code, in worker processes.

Optional, for partition-aware reduction: `--set KEY=VALUE` settings reach `fn` as
keyword arguments (true/false, ints and floats parsed; anything else a string), the
module may define `partitions(gm, example_inputs, **settings) -> list[list[str]]` (the
node names of each engine it would build), and `OP_FALLBACK_SETTING = "name"`, the
setting that takes a comma-separated list of op names to run in PyTorch instead.
"""

from __future__ import annotations

import difflib
import faulthandler
import functools
import importlib
import importlib.util
import inspect
import sys
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart, compile_off_guard, reset_dynamo
from oracles.backend_names import check_plugin_file, parse_backend, plugin_own_modules
from oracles.errors import TrtminError, kind_of
from oracles.out_folder import PLUGIN_COPY_PREFIX


def parse_setting(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def load_plugin_module(spec: str) -> ModuleType:
    parsed = parse_backend(spec)
    target, fn_name, path = parsed.target, parsed.function, parsed.plugin_file
    if path is not None:
        check_plugin_file(spec)
        mod_name = f"trtmin_plugin_{abs(hash(str(path.resolve())))}"
        spec_obj = importlib.util.spec_from_file_location(mod_name, path)
        if spec_obj is None or spec_obj.loader is None:
            raise TrtminError(f"plugin file {path} cannot be imported; it must be a Python source file")
        module = importlib.util.module_from_spec(spec_obj)
        sys.modules[mod_name] = module
        folder = str(path.resolve().parent)
        if folder not in sys.path:  # its neighbours import as they do for `python plugin.py`
            sys.path.insert(0, folder)
        try:
            with _own_argv(str(path)), _crash_says_where():
                spec_obj.loader.exec_module(module)
        except (Exception, SystemExit) as e:
            raise TrtminError(f"plugin file {path} fails on import ({_import_failure(e)}); fix the plugin") from None
    else:
        try:
            with _own_argv(target), _crash_says_where():
                module = importlib.import_module(target)
        except ImportError as e:
            raise TrtminError(f"plugin module {target!r} cannot be imported ({e}); check the name and PYTHONPATH") from None
        except (Exception, SystemExit) as e:
            raise TrtminError(f"plugin module {target!r} fails on import ({_import_failure(e)}); fix the plugin") from None
    fn = getattr(module, fn_name, None)
    if fn is None:
        defined = [n for n, v in vars(module).items()  # its own public functions, not its _helpers nor classes
                   if inspect.isfunction(v) and v.__module__ == module.__name__ and not n.startswith("_")]
        close = difflib.get_close_matches(fn_name, defined, n=1, cutoff=0.6)
        hint = f"did you mean {target}:{close[0]}?" if close else "name a function defined in it" + (
            f" ({', '.join(sorted(defined)[:8])})" if defined else "")
        raise TrtminError(f"plugin {target} has no function {fn_name!r}; {hint}")
    if not callable(fn):
        raise TrtminError(f"plugin {target}:{fn_name} is {kind_of(fn)}, not callable; "
                          "name a function fn(gm, example_inputs) -> callable")
    return module


@contextmanager
def _crash_says_where() -> Iterator[None]:
    """A plugin that crashes the process as it is imported (a native extension's segfault)
    ended trtmin with exit 139 and not a word: Python's fault handler prints the plugin's
    line where it died. Only around the import: a worker's crash is trtmin's to report."""
    was = faulthandler.is_enabled()
    try:
        faulthandler.enable(all_threads=False)  # the importing thread's stack: the plugin's line on top
    except (AttributeError, ValueError, OSError):  # a stderr with no file descriptor (captured in-process)
        was = True
    try:
        yield
    finally:
        if not was:
            faulthandler.disable()


@contextmanager
def _own_argv(name: str) -> Iterator[None]:
    """sys.argv as a plugin imported on its own would see it: an argparse at import then
    names the plugin, not trtmin, and does not read trtmin's arguments."""
    saved = sys.argv
    sys.argv = [name]
    try:
        yield
    finally:
        sys.argv = saved


def _import_failure(e: BaseException) -> str:
    if isinstance(e, SystemExit):  # argparse, or sys.exit(), at import time
        return f"it exits with code {e.code} as it is imported: an argparse or sys.exit at its top level?"
    return f"{type(e).__name__}: {e}"


class PluginBackend(Backend):
    name = "plugin"

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        self.parsed = parse_backend(spec)
        self.target, self.fn_name = self.parsed.target, self.parsed.function
        self.kwargs = {k: parse_setting(v) for k, v in self.settings.items()}
        self._module: ModuleType | None = None

    @property
    def module(self) -> ModuleType:
        if self._module is None:
            self._module = load_plugin_module(self.spec)
        return self._module

    def describe(self) -> str:
        return self.parsed.shown

    def validate(self) -> None:
        module = self.module
        self.reports_partitions = callable(getattr(module, "partitions", None))
        self.op_fallback_setting = getattr(module, "OP_FALLBACK_SETTING", None)
        self.lowering_toggles = tuple((str(k), str(v)) for k, v in getattr(module, "LOWERING_TOGGLES", ()))
        self._check_settings_taken(getattr(module, self.fn_name))

    def _check_settings_taken(self, fn: Callable[..., Any]) -> None:
        """--set KEY=VALUE reaches fn as a keyword argument: one it does not take would make
        every compile a TypeError, which the crash oracle would take for the bug."""
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            return  # a builtin or a callable without a signature: let it say so itself
        positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                       inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        if len(positional) < 2 and not any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
            # torch.compile calls it with (gm, example_inputs): every compile would be a TypeError
            raise TrtminError(f"plugin {self.target}:{self.fn_name} takes {len(positional)} positional argument"
                              f"{'s' if len(positional) != 1 else ''}; a backend is called as fn(gm, example_inputs) "
                              "and returns a callable: add the missing argument")
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return
        named = [p.name for p in positional[2:] if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] + \
            [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]  # after gm, example_inputs
        unknown = [k for k in self.kwargs if k not in named]
        if unknown:
            takes = f"it takes {', '.join(named)}" if named else "it takes no settings"
            raise TrtminError(f"--set {unknown[0]}=...: plugin {self.target}:{self.fn_name} has no keyword argument "
                              f"{unknown[0]!r} ({takes}); drop the --set, or add {unknown[0]}=... to the function")

    def own_code(self) -> str | None:
        return f"plugin {self.parsed.shown}"

    def setup_problem(self, message: str) -> str | None:
        # torch.compile's words for a backend function that returned no callable
        if "did not return callable" in message:
            return (f"plugin {self.target}:{self.fn_name} returns no callable (it must return one that runs the "
                    "graph: fn(*inputs) -> outputs); that is the plugin's mistake, no compiler's bug; fix it")
        return super().setup_problem(message)

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        # Through torch.compile, as a torch.compile backend is used: the plugin gets the
        # dynamo graph of the candidate, exactly as repro.py will hand it over.
        fn = getattr(self.module, self.fn_name)
        reset_dynamo()
        return torch.compile(gm, backend=functools.partial(fn, **self.kwargs) if self.kwargs else fn)

    def partitions(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> list[list[str]]:
        report = getattr(self.module, "partitions", None)
        return report(gm, list(example_inputs), **self.kwargs) if report else []

    def script_part(self) -> ScriptPart:
        plugin_file = self.parsed.plugin_file
        if plugin_file is not None:
            own = plugin_own_modules(plugin_file)
            # The plugin file is copied beside the script, so the folder is self-contained.
            load = ("import importlib.util, pathlib\n"
                    "    path = pathlib.Path(__file__).resolve().with_name('plugin.py')\n"
                    "    if not path.is_file():\n"
                    "        raise FileNotFoundError(f'{path.name}, the plugin backend, must sit beside "
                    "{pathlib.Path(__file__).name}')\n" + _own_modules_finder(own) +
                    "    spec = importlib.util.spec_from_file_location('plugin', path)\n"
                    "    plugin = importlib.util.module_from_spec(spec)\n"
                    "    spec.loader.exec_module(plugin)\n"
                    "    return plugin")
            files = {"plugin.py": plugin_file, **{copy_name(name): file for name, file in own.items()}}
        else:
            load = f"import importlib\n    return importlib.import_module({self.target!r})"
            files = {}
        fn = f"backend.{self.fn_name}"
        if self.kwargs:
            body = (f"{compile_off_guard()}import functools\n"
                    f"    return torch.compile(module, backend=functools.partial({fn}, **{self.kwargs!r}))")
        else:
            body = f"{compile_off_guard()}return torch.compile(module, backend={fn})"
        return ScriptPart(compile_body=body, load_body=load, files=files)


def copy_name(module: str) -> str:
    """The name of the copy of a plugin's own module beside repro.py (a name trtmin writes,
    so that an --out folder holds only its own files)."""
    return f"{PLUGIN_COPY_PREFIX}{module}.py"


def _own_modules_finder(own: dict[str, Any]) -> str:
    """load_backend's lines that make `import helpers` in the copied plugin.py find the copy
    of helpers.py beside repro.py; none for a plugin that imports no module of its folder."""
    if not own:
        return ""
    copies = {name: copy_name(name) for name in own}
    return (f"    copies = {copies!r}  # the plugin's own modules, copied beside it\n"
            "\n"
            f"    class Copies:  # `import {next(iter(own))}` finds the copy, as the plugin found the file beside it\n"
            "        def find_spec(self, name, search_path=None, target=None):\n"
            "            return importlib.util.spec_from_file_location(name, path.with_name(copies[name])) "
            "if name in copies else None\n"
            "    sys.meta_path.insert(0, Copies())\n")
