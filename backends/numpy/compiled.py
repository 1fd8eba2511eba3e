"""Compiled loops for the numpy backend, where numpy's one pass over memory per call costs most: a
depthwise convolution with its bias, residual and Relu / Clip in one loop, float32 convolutions
without im2col (their sums held in registers: compiled_loops.vectorized_loop), the Relu / Clip
epilogue of the other convs and matmuls, float32 LayerNorm and GELU, and attention over a few
tokens (numba, an optional dependency: `pip install wgnn[cpu]`; backends/numpy/compiled_loops.py).
Without numba, or with WGNN_NUMPY_COMPILED=0, the backend runs its numpy plans, which the loops
are tested against.

Measured (docs/performance.md, "Compiled depthwise convolutions" and the three sections after it):
a 3x3 depthwise + Clip in x0.44-0.67 of the numpy plan's time at MobileNetV2's shapes, then its
nine taps in one pass x0.63-0.94 of that; the compiled Clip x0.45-0.6 of ndarray.clip's; zoo bert
x0.5 of its time at 1 and 8 tokens; zoo resnet at 224x224 x0.74 with its convs without im2col.
The first call of each dtype compiles (about 2 s); numba caches the machine code on disk, so later
processes load it (about 0.4 s with numba's import).
"""
from __future__ import annotations

import functools
import os
import sys

COMPILED_ENV = "WGNN_NUMPY_COMPILED"  # "0": the numpy plans only (tests, A/B runs)
# Activations the loop applies itself (the rest run as numpy after it): kind -> code.
ACTIVATIONS = {None: 0, "relu": 1, "clip": 2}


def enabled() -> bool:
    """Whether compiled loops may run: numba installed and WGNN_NUMPY_COMPILED not "0"."""
    if os.environ.get(COMPILED_ENV, "").strip() == "0":
        return False
    return _numba() is not None


def started() -> bool:
    """Whether this process has imported the compiled loops already (for another step): one more
    loop then costs no start of numba."""
    return f"{__package__}.compiled_loops" in sys.modules


def describe() -> str:
    """Whether the compiled loops run here, for reports: "numba 0.68.1", or why not."""
    if _numba() is None:
        return "off (numba not installed)"
    if not enabled():
        return f"off ({COMPILED_ENV}=0)"
    return f"numba {_numba().__version__}"


@functools.cache
def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba


def loops():
    """The compiled loops' module (each loop compiled per dtype at its first call, cached on disk)."""
    from . import compiled_loops

    return compiled_loops
