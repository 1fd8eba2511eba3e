"""Data-movement kernels for the cases geometry lowering leaves to the CPU: Gather with run-time
(or many) indices, Pad whose fill value is only known at run time."""
from __future__ import annotations

import numpy as np

from ...engine.errors import InputError
from ...engine.ops.base import InferContext
from ...engine.ops.pad import axis_pads
from .kernel import numpy_kernel


@numpy_kernel("Gather", writes_outputs=True)
def gather(ex, inputs, outputs):
    data, indices = inputs
    axis = ex.attrs["axis"] % data.ndim
    dim = data.shape[axis]
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        raise InputError(f"{ex.step.label}: indices must lie in [{-dim}, {dim}) for axis {axis}, "
                         f"got values from {indices.min()} to {indices.max()}")
    # Within [-dim, dim) wrapping counts negative indices from the end, as ONNX does. (take's
    # checking mode would copy the whole result through a buffer of its own on every run.)
    np.take(data, indices, axis=axis, out=outputs[0], mode="wrap")


@numpy_kernel("Pad")
def pad(ex, data: np.ndarray, pads, value=None, axes=None) -> np.ndarray:
    if "pads" not in ex.state:
        step = ex.step
        ex.state["pads"] = axis_pads(InferContext(step.node, ex.attrs, step.input_specs, step.input_values))
    widths = ex.state["pads"]
    # Negative pads crop first; the mode then pads what is left.
    crop = tuple(slice(max(-b, 0), data.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(widths))
    positive = [(max(b, 0), max(e, 0)) for b, e in widths]
    mode = ex.attrs["mode"]
    if mode != "constant":
        return np.pad(data[crop], positive, mode=mode)
    fill = np.asarray(value).reshape(-1)[0] if value is not None and np.size(value) else 0
    return np.pad(data[crop], positive, mode="constant", constant_values=np.asarray(fill).astype(data.dtype))
