"""The installed package, not the source tree: build a wheel, install it into a fresh venv and use
it from a directory where the sources are not importable.

Slow-ish (a wheel build); skip with WGNN_SKIP_PACKAGING=1.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(os.environ.get("WGNN_SKIP_PACKAGING") == "1",
                                reason="WGNN_SKIP_PACKAGING=1: packaging tests skipped")

# Never copied into the build tree: VCS data and build outputs at the top, caches anywhere.
TOP_LEVEL_IGNORED = {".git", "build", "dist", ".venv", ".pytest_cache", ".ruff_cache"}
CACHES = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "*.tmp")


def _ignored(folder: str, names: list[str]) -> set[str]:
    ignored = set(CACHES(folder, names))
    if Path(folder).resolve() == ROOT:
        ignored |= TOP_LEVEL_IGNORED & set(names)
    return ignored


def check_build_tools() -> None:
    """--no-build-isolation builds with what is installed: setuptools, and the wheel package for
    setuptools older than 70.1 (which added its own bdist_wheel)."""
    from importlib import metadata, util

    try:
        installed = metadata.version("setuptools")  # not imported: it would patch distutils in this process
    except metadata.PackageNotFoundError:
        pytest.fail("building the wheel needs setuptools: pip install 'setuptools>=68' wheel")
    version = tuple(int(x) for x in installed.split(".")[:2])
    if version < (70, 1) and util.find_spec("wheel") is None:
        pytest.fail(f"setuptools {installed} needs the wheel package to build wheels: pip install wheel")


def setuptools_config() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def source_packages() -> dict[str, Path]:
    """Every package directory (with __init__.py) under the folders package-dir maps, by name."""
    found = {}
    for package, folder in setuptools_config()["package-dir"].items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            if "__pycache__" in init.parts:
                continue
            relative = init.parent.relative_to(ROOT / folder)
            found[".".join([package, *relative.parts])] = init.parent
    return found


def run(command: list, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=600,
                            check=False, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _pip_has_python_option() -> bool:
    import pip

    major, minor = (int(x) for x in pip.__version__.split(".")[:2])
    return (major, minor) >= (22, 3)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(python of a fresh venv with the wheel installed, a working directory outside the sources)."""
    check_build_tools()
    tmp = tmp_path_factory.mktemp("packaging")
    # Build from a clean copy: an in-tree build could pick up stale files from an old build/.
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=_ignored)
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-w", tmp / "wheels"],
        cwd=source)
    (wheel,) = (tmp / "wheels").glob("wgnn-*.whl")
    venv = tmp / "venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install = ["install", "--no-deps", "--no-index", "--force-reinstall", wheel]
    if _pip_has_python_option():  # no pip inside the venv needed: much faster
        run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], cwd=tmp)
        run([sys.executable, "-m", "pip", "--python", python, *install], cwd=tmp)
    else:
        run([sys.executable, "-m", "venv", "--system-site-packages", venv], cwd=tmp)
        run([python, "-m", "pip", *install], cwd=tmp)
    work = tmp / "work"
    work.mkdir()
    return python, work


def run_in_venv(installed, script: str) -> subprocess.CompletedProcess:
    python, work = installed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return run([python, "-c", textwrap.dedent(script)], cwd=work, env=env)


def test_every_source_package_is_listed():
    listed = set(setuptools_config()["packages"])
    found = source_packages()
    missing = sorted(set(found) - listed)
    assert not missing, f"packages with __init__.py missing from pyproject's [tool.setuptools] packages: {missing}"
    stale = sorted(listed - set(found))
    assert not stale, f"pyproject lists packages that do not exist: {stale}"
    mapped = set(setuptools_config()["package-dir"].values())
    top_level = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name not in mapped)
    assert not top_level, f"top-level packages not mapped in [tool.setuptools] package-dir: {top_level}"
    # A folder of Python modules without __init__.py would silently be left out of the wheel.
    for folder in setuptools_config()["package-dir"].values():
        for module in (ROOT / folder).rglob("*.py"):
            assert (module.parent / "__init__.py").exists(), f"{module.parent} has modules but no __init__.py"


def test_installed_package_imports_from_the_venv(installed):
    python, _ = installed
    venv = python.parents[1]
    packages = sorted(setuptools_config()["packages"])
    result = run_in_venv(installed, f"""
        import importlib, json
        files = {{name: importlib.import_module(name).__file__ for name in {packages!r}}}
        print(json.dumps(files))
    """)
    files = json.loads(result.stdout)
    for name, path in files.items():
        assert Path(path).is_relative_to(venv), f"{name} was imported from {path}, not the installed wheel"


def test_installed_package_ships_all_files(installed):
    result = run_in_venv(installed, """
        import json, pathlib, wgnn
        print(pathlib.Path(wgnn.__file__).parent)
    """)
    site = Path(result.stdout.strip())
    assert (site / "models" / "schema" / "wgnn.fbs").read_text() == (ROOT / "models/schema/wgnn.fbs").read_text()
    shaders = sorted((ROOT / "kernels_wgsl").rglob("*.wgsl"))
    for shader in shaders:
        installed_copy = site / "kernels_wgsl" / shader.relative_to(ROOT / "kernels_wgsl")
        assert installed_copy.is_file(), f"{shader.relative_to(ROOT)} is not in the installed package"
        assert installed_copy.read_bytes() == shader.read_bytes()
    # Every Python module of every package is installed.
    for package, folder in source_packages().items():
        target = site.joinpath(*package.split(".")[1:])
        for module in folder.glob("*.py"):
            assert (target / module.name).is_file(), f"{module.relative_to(ROOT)} is not installed"


def test_installed_package_converts_and_runs_onnx(installed):
    result = run_in_venv(installed, """
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
        import wgnn

        vi = helper.make_tensor_value_info
        graph = helper.make_graph(
            [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "tiny",
            [vi("x", TensorProto.FLOAT, ["N", 4])], [vi("y", TensorProto.FLOAT, ["N", 4])],
            [numpy_helper.from_array(np.array([-1.0, 0.0, 1.0, 2.0], np.float32), "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
        x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
        (y,) = session.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.maximum(x + np.array([-1, 0, 1, 2], np.float32), 0))
        print("ok", wgnn.__version__, y.shape)
    """)
    assert result.stdout.split()[0] == "ok"


def test_installed_console_script(installed):
    python, work = installed
    script = python.parent / ("wgnn.exe" if os.name == "nt" else "wgnn")
    assert script.exists(), "the wgnn console script was not installed"
    result = run([script, "--version"], cwd=work)
    assert result.stdout.startswith("wgnn ")


def test_installed_demo_classifies_the_shipped_digits(installed):
    """The shipped model and test set are package data: the demo runs from the wheel alone."""
    result = run_in_venv(installed, """
        from wgnn.tools.demo import run_demo
        print(run_demo(providers=["numpy"], runs=1)["correct"])
    """)
    assert int(result.stdout.split()[-1]) == 348
