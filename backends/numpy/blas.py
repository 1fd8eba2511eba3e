"""The BLAS under numpy, as far as plans depend on it.

OpenBLAS picks its kernels at load time for the CPU it finds (its "core", e.g. SkylakeX, Haswell,
Zen). On some cores its sgemm has a second kernel for small products, which takes no packing
copies: on this project's Xeon (SkylakeX kernels, OpenBLAS 0.3.31), a product of M x K by K x N
with few rows M (8 or 16) runs at 110-120 GFLOP/s while M * N * K stays within 100^3, and at
40-60 GFLOP/s past it (docs/performance.md, "Convs in small products"). Conv plans (conv.py,
_band_rows) and the MatMul kernel cut their products to that size where that pays
(small_product_columns, matmul_in_bands).
"""
from __future__ import annotations

import ctypes
import functools
import re
import sys
from pathlib import Path

import numpy as np

# OpenBLAS cores whose sgemm takes the small-product kernel for M * N * K up to SMALL_GEMM_MNK.
SMALL_GEMM_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})
SMALL_GEMM_MNK = 100 ** 3


# Symbol names of OpenBLAS's own functions: numpy's wheels carry scipy-openblas, whose symbols have
# a prefix and, in its 64-bit-integer build, a suffix.
_FUNCTIONS = {role: [f"{prefix}openblas_get_{role}{suffix}" for prefix in ("scipy_", "")
                     for suffix in ("64_", "")] for role in ("corename", "num_threads")}


@functools.cache
def _openblas() -> dict:
    """OpenBLAS's corename and num_threads functions (ctypes), from the library numpy loaded; {}
    where numpy's BLAS is not an OpenBLAS this can find (Accelerate, MKL, a static build)."""
    for path in _openblas_libraries():
        try:
            library = ctypes.CDLL(str(path))
        except OSError:
            continue
        found = {role: next((getattr(library, n) for n in names if hasattr(library, n)), None)
                 for role, names in _FUNCTIONS.items()}
        if found["corename"] is not None:
            found["corename"].restype = ctypes.c_char_p
            if found["num_threads"] is not None:
                found["num_threads"].restype = ctypes.c_int
            return found
    return {}


@functools.cache
def openblas_core() -> str | None:
    """The core OpenBLAS (numpy's) runs its kernels for, e.g. "SkylakeX"; None where numpy's
    BLAS is not an OpenBLAS."""
    corename = _openblas().get("corename")
    core = (corename() or b"").decode(errors="replace").strip() if corename is not None else ""
    return core or None


def openblas_threads() -> int | None:
    """The threads OpenBLAS runs a large product on now (OPENBLAS_NUM_THREADS, or set at run time
    by threadpoolctl); None where unknown."""
    num_threads = _openblas().get("num_threads")
    return int(num_threads()) if num_threads is not None else None


def _openblas_libraries() -> list[Path]:
    """OpenBLAS libraries this process has loaded (Linux: /proc/self/maps), numpy's own first (scipy
    may have loaded another), else the ones numpy's wheel ships next to it."""
    root = Path(np.__file__).parent
    numpy_dirs = (root.parent / "numpy.libs", root / ".dylibs", root)
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    loaded = {Path(p) for p in re.findall(r"(/\S*openblas\S*\.(?:so|dylib)\S*)", maps)}
    if not loaded and sys.platform != "win32":
        loaded = {p for d in numpy_dirs[:2] for p in d.glob("*openblas*")
                  if p.suffix in (".so", ".dylib") or ".so." in p.name}
    return sorted(loaded, key=lambda p: (not any(d in p.parents for d in numpy_dirs), str(p)))


def small_gemm_limit() -> int:
    """The largest M * N * K that numpy's float32 matmul runs with a small-product kernel; 0 where
    it has none known."""
    core = openblas_core()
    return SMALL_GEMM_MNK if core is not None and core.lower() in SMALL_GEMM_CORES else 0


SMALL_PRODUCTS = True  # False: no product is cut, for A/B measurements
SMALL_PRODUCT_ROWS = 32  # the most rows a product has for cutting it to pay (64 x 32 by 32 x 12544: x1.13)
SMALL_PRODUCT_COLUMNS = 128  # narrower products cost more in numpy calls than the kernel saves


def small_product_columns(rows: int, depth: int, columns: int, dtype, *, unless_threaded: bool = False) -> int:
    """Columns per product when (rows x depth) @ (depth x columns) is computed as products of
    column bands, each within small_gemm_limit(); columns (one product) where cutting does not pay:
    no such kernel, not float32, more than SMALL_PRODUCT_ROWS rows or a single one (numpy's
    matrix-vector path), an empty depth (nothing to multiply), or bands narrower than
    SMALL_PRODUCT_COLUMNS. unless_threaded: also one product where OpenBLAS runs on several threads
    (the small kernel runs on one; a lone product, 8 x 768 by 768 x 768 on two threads, was x1.2 in
    pieces, where a conv's im2col bands gain from staying in cache either way)."""
    limit = small_gemm_limit() if SMALL_PRODUCTS and np.dtype(dtype) == np.float32 else 0
    threaded = unless_threaded and (openblas_threads() or 1) > 1
    if not limit or depth == 0 or not 1 < rows <= SMALL_PRODUCT_ROWS or threaded:
        return columns
    band = limit // (rows * depth)
    return band if SMALL_PRODUCT_COLUMNS <= band < columns else columns


def matmul_in_bands(a: np.ndarray, b: np.ndarray, out: np.ndarray, column_bands: list[slice]) -> None:
    """out = a @ b, one product per band of columns where there are bands (small_product_columns)."""
    if not column_bands:
        np.matmul(a, b, out=out)
        return
    for columns in column_bands:
        np.matmul(a, b[..., columns], out=out[..., columns])


def describe() -> str:
    """numpy's BLAS in a few words (e.g. "OpenBLAS SkylakeX"), for benchmark reports."""
    core = openblas_core()
    if core:
        return f"OpenBLAS {core}"
    try:
        return str(np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"])
    except (KeyError, TypeError, ValueError):
        return "unknown BLAS"
