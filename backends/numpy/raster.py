"""Raster: every data-movement op after geometry lowering, as strided-view copies."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .kernel import numpy_kernel


def strided_view(flat: np.ndarray, offset: int, size, strides, *, writeable: bool) -> np.ndarray:
    """View of a flat array; negative strides reach back from offset, inside the array."""
    return as_strided(flat[offset:] if offset else flat, shape=size,
                      strides=[s * flat.itemsize for s in strides], writeable=writeable)


@numpy_kernel("Raster", writes_outputs=True)
def raster(ex, inputs, outputs):
    plan = ex.step.plan
    out = outputs[0]
    flat_out = out.reshape(-1)
    if plan.fill is not None:
        flat_out.fill(plan.fill)
    flats = [np.asarray(x, order="C").reshape(-1) if x is not None else None for x in inputs]
    for region in plan.regions:
        src = flats[region.src]
        if src.dtype != out.dtype:
            src = src.astype(out.dtype)
        dst_view = strided_view(flat_out, region.dst_offset, region.size, region.dst_strides,
                                writeable=True)
        dst_view[...] = strided_view(src, region.src_offset, region.size, region.src_strides,
                                     writeable=False)
