"""Element types: wgnn names them with numpy's names ("float32", "int64", "bool", ...)."""
from __future__ import annotations

import numpy as np

from .errors import ModelError

# Stable codes used by the .wgnn file format; never renumber.
DTYPE_CODES: dict[str, int] = {
    "float32": 1,
    "float16": 2,
    "float64": 3,
    "int8": 4,
    "uint8": 5,
    "int16": 6,
    "uint16": 7,
    "int32": 8,
    "uint32": 9,
    "int64": 10,
    "uint64": 11,
    "bool": 12,
}
CODE_DTYPES = {code: name for name, code in DTYPE_CODES.items()}

# ONNX TensorProto.DataType numbers (stable in the ONNX spec).
ONNX_DTYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
}
DTYPE_TO_ONNX = {name: code for code, name in ONNX_DTYPES.items()}


def onnx_type_name(code: int) -> str:
    """The ONNX name of a TensorProto.DataType number ("FLOAT8E4M3FN"), or "code N" where this
    onnx package knows none (a newer or corrupt model)."""
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(code)
    except ValueError:
        return f"code {code}"


FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"})


def dtype_name(dtype) -> str:
    """Canonical name of a numpy dtype (or name)."""
    name = np.dtype(dtype).name
    if name not in DTYPE_CODES:
        raise ModelError(f"unsupported element type {name!r}; wgnn supports {sorted(DTYPE_CODES)}")
    return name


def itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize
