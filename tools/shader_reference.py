"""References for the shader harness: a `module:function` numpy reference loaded afresh on each
run (so --watch sees edits), called with the kernel's inputs by name, and the comparison of an
output with what it returns.
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..engine.errors import InputError, WgnnError


@dataclass
class Comparison:
    """One output against the reference: errors, mismatch count and the first mismatching index."""
    name: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatches: int = 0
    size: int = 0
    first_mismatch: tuple[int, ...] | None = None
    got: float | None = None  # values at the first mismatch
    expected: float | None = None
    error: str | None = None  # shape/dtype problems

    @property
    def ok(self) -> bool:
        return self.error is None and self.mismatches == 0

    def as_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "max_abs_error": self.max_abs_error,
                "max_rel_error": self.max_rel_error, "mismatches": self.mismatches, "size": self.size,
                "first_mismatch": None if self.first_mismatch is None else list(self.first_mismatch),
                "got": self.got, "expected": self.expected, "error": self.error}



def reference_path(spec: str) -> tuple[Path, str]:
    """The file and function of a `module:function` reference (a .py path, or a dotted module
    found from the current directory), without running it."""
    module_name, sep, function = spec.rpartition(":")
    if not sep or not module_name or not function:
        raise InputError(f"--ref {spec!r}: expected MODULE:FUNCTION (e.g. ref.py:relu or mypkg.refs:relu)")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
    else:
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        found = importlib.util.find_spec(module_name)
        if found is None or not found.origin or not found.origin.endswith(".py"):
            raise InputError(f"--ref {spec!r}: no Python module {module_name!r} found")
        path = Path(found.origin)
    if not path.is_file():
        raise InputError(f"--ref {spec!r}: file not found: {path}")
    return path, function


def load_reference(spec: str):
    """`module:function` -> (function, its module's file). The module is executed afresh on every
    call, so an edited reference is picked up by --watch."""
    path, function = reference_path(spec)
    loaded = importlib.util.spec_from_file_location(f"wgnn_shader_ref_{path.stem}", path)
    module = importlib.util.module_from_spec(loaded)
    try:
        loaded.loader.exec_module(module)
    except Exception as exc:
        raise WgnnError(f"--ref {spec!r}: importing {path} failed: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise InputError(f"--ref {spec!r}: {path} has no function {function!r}")
    return fn, path


def call_reference(fn, inputs: dict[str, np.ndarray], params: list[int] | None, output_names: list[str]) \
        -> dict[str, np.ndarray]:
    """Call the reference with the inputs by name (only those it declares, unless it takes
    **kwargs; `params` gets the 64 uniform slots) and name what it returns."""
    signature = inspect.signature(fn)
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    kwargs = dict(inputs) if var_kw else {k: v for k, v in inputs.items() if k in signature.parameters}
    if "params" in signature.parameters and "params" not in inputs:
        kwargs["params"] = np.asarray(params if params is not None else [], np.int32)
    try:
        result = fn(**kwargs)
    except Exception as exc:
        raise WgnnError(f"the reference {fn.__name__}({', '.join(kwargs)}) raised {type(exc).__name__}: {exc}") \
            from None
    if isinstance(result, dict):
        unknown = sorted(set(result) - set(output_names))
        if unknown:
            raise WgnnError(f"the reference returned unknown output(s) {unknown}; outputs are {output_names}")
        return {k: np.asarray(v) for k, v in result.items()}
    results = list(result) if isinstance(result, tuple | list) else [result]
    if len(results) != len(output_names):
        raise WgnnError(f"the reference returned {len(results)} array(s) for {len(output_names)} output(s) "
                        f"{output_names} (return a dict to check only some)")
    return {name: np.asarray(v) for name, v in zip(output_names, results)}


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> Comparison:
    """np.isclose semantics (|got - want| <= atol + rtol * |want|, NaN equal to NaN)."""
    row = Comparison(name, size=int(got.size))
    if got.shape != want.shape:
        row.error = f"shape {list(got.shape)} != reference {list(want.shape)}"
        return row
    g, w = got.astype(np.float64), want.astype(np.float64)
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    diff = np.where(np.isnan(g) & np.isnan(w), 0.0, np.abs(g - w))
    row.max_abs_error = float(diff.max()) if diff.size else 0.0
    nonzero = w != 0
    row.max_rel_error = float((diff[nonzero] / np.abs(w[nonzero])).max()) if nonzero.any() else 0.0
    bad = np.argwhere(~close)
    row.mismatches = len(bad)
    if len(bad):
        index = tuple(int(i) for i in bad[0])
        row.first_mismatch, row.got, row.expected = index, float(g[index]), float(w[index])
    return row
