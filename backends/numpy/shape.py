"""Shape, Size, Range and Cast on numpy. Shape and Size read the input's spec, never its data:
at resize their input is not computed yet."""
from __future__ import annotations

import numpy as np

from ...engine.ops.shape import shape_slice
from .kernel import numpy_kernel


@numpy_kernel("Shape")
def shape(ex, data) -> np.ndarray:
    return np.array(shape_slice(ex.attrs, ex.step.input_specs[0].shape), dtype=np.int64)


@numpy_kernel("Size")
def size(ex, data) -> np.ndarray:
    return np.array(ex.step.input_specs[0].size, dtype=np.int64)


@numpy_kernel("Range")
def range_(ex, start, limit, delta) -> np.ndarray:
    spec = ex.step.output_specs[0]
    dtype = np.dtype(spec.dtype)
    start, delta = np.asarray(start, dtype).reshape(()), np.asarray(delta, dtype).reshape(())
    return (start + np.arange(spec.shape[0], dtype=dtype) * delta).astype(dtype)


@numpy_kernel("Cast", writes_outputs=True)
def cast(ex, inputs, outputs):
    # numpy's float -> int conversion truncates toward zero, as ONNX specifies; NaN and
    # out-of-range values are undefined in ONNX, so numpy's warning about them is silenced.
    # Converted straight into the output (astype's cast, without astype's array).
    with np.errstate(invalid="ignore", over="ignore"):
        np.copyto(outputs[0], inputs[0], casting="unsafe")
