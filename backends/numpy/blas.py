"""The BLAS under numpy, as far as plans depend on it.

OpenBLAS picks its kernels at load time for the CPU it finds (its "core", e.g. SkylakeX, Haswell,
Zen). On some cores its sgemm has a second kernel for small products, which takes no packing
copies: on this project's Xeon (SkylakeX kernels, OpenBLAS 0.3.31), a product of M x K by K x N
with few rows M (8 or 16) runs at 110-120 GFLOP/s while M * N * K stays within 100^3, and at
40-60 GFLOP/s past it (docs/performance.md, "Convs in small products"). Conv plans cut their
im2col products to that size where that pays (conv.py, _band_rows).
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


@functools.cache
def openblas_core() -> str | None:
    """The core OpenBLAS (numpy's) runs its kernels for, e.g. "SkylakeX"; None where numpy's
    BLAS is not an OpenBLAS this can find (Accelerate, MKL, a static build)."""
    for path in _openblas_libraries():
        try:
            library = ctypes.CDLL(str(path))
        except OSError:
            continue
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                     "openblas_get_corename64_", "openblas_get_corename"):
            function = getattr(library, name, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                core = (function() or b"").decode(errors="replace").strip()
                return core or None
    return None


def _openblas_libraries() -> list[Path]:
    """OpenBLAS libraries this process has loaded (Linux: /proc/self/maps), else the ones numpy's
    wheel ships next to it."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    loaded = sorted({Path(p) for p in re.findall(r"(/\S*openblas\S*\.(?:so|dylib)\S*)", maps)})
    if loaded:
        return loaded
    root = Path(np.__file__).parent
    shipped = [*root.parent.glob("numpy.libs/*openblas*"), *root.glob(".dylibs/*openblas*")]
    return sorted(p for p in shipped if p.suffix in (".so", ".dylib", ".dll") or ".so." in p.name) \
        if sys.platform != "win32" else []


def small_gemm_limit() -> int:
    """The largest M * N * K that numpy's float32 matmul runs with a small-product kernel; 0 where
    it has none known."""
    core = openblas_core()
    return SMALL_GEMM_MNK if core is not None and core.lower() in SMALL_GEMM_CORES else 0


def describe() -> str:
    """numpy's BLAS in a few words (e.g. "OpenBLAS SkylakeX"), for benchmark reports."""
    core = openblas_core()
    if core:
        return f"OpenBLAS {core}"
    try:
        return str(np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"])
    except (KeyError, TypeError, ValueError):
        return "unknown BLAS"
