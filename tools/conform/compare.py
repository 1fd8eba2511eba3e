"""Output comparison with the ONNX backend suite's rule: shapes equal, dtypes equal, NaN where the
expected output has NaN, and |got - expected| <= atol + rtol * |expected| elsewhere (infinities
must match exactly); integers and bools exactly.
"""
from __future__ import annotations

import math

import numpy as np

# float16 keeps 11 significant bits: one unit in the last place is up to 2**-10 (~1e-3) relative,
# so an fp16 output rounded once more than the reference's needs two. atol covers fp16 subnormals.
FP16_RTOL, FP16_ATOL = 2e-3, 1e-5


def tolerance(dtype, rtol: float, atol: float) -> tuple[float, float]:
    """The tolerance that applies to an output of this dtype: the case's, loosened for float16."""
    if np.dtype(dtype) == np.float16:
        return max(rtol, FP16_RTOL), max(atol, FP16_ATOL)
    return rtol, atol


def number(x) -> float | str | None:
    """A float for JSON: non-finite values as "inf", "-inf" or "nan" (JSON has no literal for them)."""
    if x is None:
        return None
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def magnitude(x) -> float:
    """Sort key for number() values: strings back to floats, NaN as the worst."""
    if x is None:
        return -1.0
    value = float(x)
    return math.inf if math.isnan(value) else value


def _scalar(value):
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float):
        return number(value)
    return value if isinstance(value, (bool, int, str)) else str(value)


def compare_output(name: str, got, want, rtol: float, atol: float) -> dict:
    """One output against the expected one. Returns ok, shapes, dtypes, max abs and rel error,
    the number of mismatching elements and the first mismatching index with both values."""
    row = {"name": name, "ok": False, "shape": None, "expected_shape": None, "dtype": None, "expected_dtype": None,
           "max_abs": None, "max_rel": None, "mismatches": 0, "first_mismatch": None, "message": ""}
    if not isinstance(want, np.ndarray):
        kind = "sequence" if isinstance(want, list) else "optional" if want is None else type(want).__name__
        row["message"] = f"the expected output is a {kind}; wgnn produces tensors only"
        return row
    got = np.asarray(got)
    row.update(shape=list(got.shape), expected_shape=list(want.shape), dtype=got.dtype.name,
               expected_dtype=want.dtype.name)
    if got.shape != want.shape:
        row["message"] = f"shape {list(got.shape)} != expected {list(want.shape)}"
        return row
    messages = []
    if got.dtype != want.dtype:
        messages.append(f"dtype {got.dtype.name} != expected {want.dtype.name}")
    if want.dtype == object or got.dtype == object:  # strings
        bad = np.asarray(got != want, dtype=bool)
        diff = None
    else:
        rtol, atol = tolerance(want.dtype, rtol, atol)
        if got.size and (got.dtype.kind not in "biufc" or want.dtype.kind not in "biufc"):
            messages.append(f"cannot compare {got.dtype.name} with {want.dtype.name}")
            row["message"] = "; ".join(messages)
            return row
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            if want.dtype.kind == "f" or got.dtype.kind == "f":
                g_nan, w_nan = np.isnan(g), np.isnan(w)
                same = (g == w) | (g_nan & w_nan)  # equal infinities and NaN where NaN is expected
                diff = np.where(same, 0.0, np.abs(g - w))
                diff[g_nan != w_nan] = np.inf  # NaN where a number was expected, or the reverse
                bad = ~same & ~(diff <= atol + rtol * np.abs(w))
            else:  # integers and bools: exact, compared in their own type (int64 beyond 2**53)
                bad = np.asarray(got != want, dtype=bool)
                diff = np.abs(g - w)
        row["tolerance"] = {"rtol": rtol, "atol": atol}
    if diff is not None and diff.size:
        row["max_abs"] = number(diff.max())
        nonzero = (np.abs(w) > 0) & np.isfinite(w)
        with np.errstate(invalid="ignore", divide="ignore"):
            row["max_rel"] = number((diff[nonzero] / np.abs(w[nonzero])).max()) if nonzero.any() else 0.0
    elif diff is not None:
        row["max_abs"] = row["max_rel"] = 0.0
    count = int(bad.sum())
    row["mismatches"] = count
    if count:
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        row["first_mismatch"] = {"index": list(index), "got": _scalar(got[index]), "expected": _scalar(want[index])}
        messages.append(f"{count} of {bad.size} elements differ; first at {list(index)}: "
                        f"{row['first_mismatch']['got']} != expected {row['first_mismatch']['expected']}")
    row["ok"] = not messages
    row["message"] = "; ".join(messages)
    return row
