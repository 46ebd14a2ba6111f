"""trtmin's bytecode cache: used where a package has no bytecode, left alone elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, pkg_dir: Path, cache_home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "TRTMIN_BYTECODE_CACHE")}
    environ.update(PYTHONPATH=f"{ROOT}{os.pathsep}{pkg_dir}", XDG_CACHE_HOME=str(cache_home), **env)
    return subprocess.run([sys.executable, "-B", "-c", code], env=environ, capture_output=True, text=True, timeout=60)


ENABLE_AND_IMPORT = ("from oracles import bytecode; bytecode.PROBE = 'fakepkg'; "
                     "print(bytecode.enable()); import fakepkg")


def _fake_package(tmp_path: Path, with_bytecode: bool) -> Path:
    pkg = tmp_path / "src" / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    if with_bytecode:
        import py_compile
        py_compile.compile(str(pkg / "__init__.py"), cfile=str(pkg / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"))
    return pkg.parent


def test_a_package_without_bytecode_is_compiled_once_into_trtmins_cache(tmp_path: Path):
    src = _fake_package(tmp_path, with_bytecode=False)
    r = _run(ENABLE_AND_IMPORT, src, tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    folder = Path(r.stdout.strip())
    assert folder == tmp_path / "cache" / "trtmin" / "pycache"
    assert list(folder.rglob("__init__*.pyc"))  # written under -B, where Python alone writes none
    assert not (src / "fakepkg" / "__pycache__").exists()  # the install is not written to


def test_an_install_with_bytecode_or_a_users_choice_is_left_alone(tmp_path: Path):
    src = _fake_package(tmp_path, with_bytecode=True)
    assert _run(ENABLE_AND_IMPORT, src, tmp_path / "cache").stdout.strip() == "None"
    bare = _fake_package(tmp_path / "b", with_bytecode=False)
    assert _run(ENABLE_AND_IMPORT, bare, tmp_path / "cache", TRTMIN_NO_BYTECODE_CACHE="1").stdout.strip() == "None"
    assert _run(ENABLE_AND_IMPORT, bare, tmp_path / "cache", PYTHONPYCACHEPREFIX=str(tmp_path / "mine")).stdout.strip() == "None"
    assert not (tmp_path / "cache").exists()


def prefix_runner():  # a worker's setup (oracles.worker): each job returns the worker's bytecode folder
    return lambda job: sys.pycache_prefix


def test_workers_use_the_cache_of_the_process_that_started_them(tmp_path: Path):
    src = _fake_package(tmp_path, with_bytecode=False)
    code = (ENABLE_AND_IMPORT + "\nfrom oracles.worker import WorkerConfig, WorkerPool\n"
            "pool = WorkerPool(WorkerConfig(setup='tests.test_bytecode:prefix_runner', setup_kwargs={}))\n"
            "print(pool.run([{}])[0]); pool.close()")
    r = _run(code, src, tmp_path / "cache")
    assert r.returncode == 0, r.stderr[-2000:]
    parent, worker = r.stdout.split()
    assert worker == parent == str(tmp_path / "cache" / "trtmin" / "pycache")  # spawned with -B, yet cached
