"""wgnn's own op case library, as data: one-node ONNX cases on edge shapes for every op type the
converter claims (channels not a multiple of 4, batch > 1, broadcasting, size-1 and empty dims,
padding, every opset form whose inputs or attributes changed).

    from wgnn.tools.conform.cases import CASES, Const
    case = CASES[0]   # OpCase(name, op_type, inputs, attrs, opset, outputs, reference, ...)

An input is an array (a graph input fed at run time), `Const(array)` (an initializer), None (an
absent optional input) or `Outer(array)` (a graph input the node does not take: its subgraphs read
it by name, in<i>; these come last). An attribute value that is a numpy array is a tensor
attribute, an onnx GraphProto a graph attribute (If, Loop, Scan). Expected outputs come from
`reference`: "onnx" (onnx.reference), "ort" (onnxruntime, where the reference is wrong or cannot
run the form) or "given" (`expected`, where neither runs it). `reference_attrs` makes the reference
run the op with other attributes (an equivalent explicit form). The data is built once at import
from fixed seeds, so every run sees the same values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import helper, numpy_helper

from ...engine.dtypes import DTYPE_TO_ONNX

INT64_MAX, INT64_MIN = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)


@dataclass(frozen=True)
class Const:
    """An input given as an initializer of the model (known at conversion), not fed at run time."""

    value: np.ndarray


@dataclass(frozen=True)
class Outer:
    """A graph input fed at run time that is no input of the node: an outer-scope tensor its
    subgraphs capture by name."""

    value: np.ndarray


@dataclass
class OpCase:
    """One op applied to fixed inputs. rtol/atol are the tolerance the case declares (tight: the
    op tests use them as they are; `wgnn conform` never compares tighter than the ONNX suite)."""

    name: str
    op_type: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    opset: int = 18
    outputs: int = 1
    reference: str = "onnx"
    rtol: float = 1e-5
    atol: float = 1e-6
    expected: list | None = None
    reference_attrs: dict | None = None
    backends: tuple[str, ...] | None = None  # None: every backend; ("numpy",): the CPU only

    def feeds(self) -> dict[str, np.ndarray]:
        """Graph inputs by name (in<i> for input i), as make_model in tests/helpers.py names them."""
        return {f"in{i}": np.asarray(x.value if isinstance(x, Outer) else x) for i, x in enumerate(self.inputs)
                if x is not None and not isinstance(x, Const)}


CASES: list[OpCase] = []
_names: dict[str, int] = {}
TOL = {"rtol": 1e-4, "atol": 1e-5}  # ops that accumulate (conv, matmul, norms, pools, resize)
CUBIC_TOL = {"rtol": 1e-4, "atol": 1e-4}  # 4x4 taps with weights outside [0, 1]


def add(op_type: str, inputs: list, attrs: dict | None = None, *, tag: str = "", **options) -> OpCase:
    """Append a case named <op>_<tag> (numbered when the name repeats)."""
    base = f"{op_type}_{tag}" if tag else op_type
    count = _names.get(base, 0)
    _names[base] = count + 1
    case = OpCase(base if count == 0 else f"{base}_{count}", op_type, list(inputs), dict(attrs or {}), **options)
    CASES.append(case)
    return case


rng = np.random.default_rng(0)


def r(*shape, dtype=np.float32) -> np.ndarray:
    """Random data: standard normal floats, ints in [-50, 50), random bools."""
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def positive(*shape) -> np.ndarray:
    return (np.abs(r(*shape)) + 0.1).astype(np.float32)


def ints(*values) -> Const:
    return Const(np.array(values, np.int64))


def onnx_type(name: str) -> int:
    return DTYPE_TO_ONNX[name]


X = r(2, 5, 3, 7)  # batch 2, C = 5: not a multiple of 4

# ------------------------------------------------------------------------------- element-wise
for op in ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "HardSwish", "Softplus"]:
    add(op, [X], tag="nchw")
for op in ["Log", "Sqrt", "Reciprocal"]:
    add(op, [np.abs(X) + 0.1], tag="positive")
add("Softplus", [np.array([-100, -20, -1, 0, 1e-3, 1, 20, 100], np.float32)], tag="extremes")
add("Erf", [np.array([0, 1e-6, -1e-3, 0.4999, 0.5, 1, -2.5, 4, 10, -10], np.float32)], tag="edges",
    rtol=1e-6, atol=1e-7)
add("LeakyRelu", [X], {"alpha": 0.3}, tag="alpha")
add("HardSigmoid", [X], {"alpha": 0.25, "beta": 0.4}, tag="alpha_beta")
for approximate in ("none", "tanh"):
    add("Gelu", [X], {"approximate": approximate}, tag=approximate, opset=20)
add("Clip", [X], {"min": -0.5, "max": 0.7}, tag="attributes", opset=6)
add("Clip", [X, Const(np.float32(-0.5)), Const(np.float32(0.5))], tag="const_bounds", opset=13)
add("Clip", [X, None, Const(np.float32(0.2))], tag="max_only", opset=13)
add("Clip", [X, np.float32(-0.1), np.float32(0.3)], tag="runtime_bounds", opset=13)
add("Clip", [np.arange(-5, 5, dtype=np.int64), Const(np.int64(-2))], tag="int64", opset=13)
for op in ["Add", "Sub", "Mul", "Div", "Max", "Min"]:
    add(op, [X, r(5, 1, 7) + 3], tag="broadcast")
    add(op, [r(1), X], tag="broadcast_1")
add("Div", [np.array([7, -7, 7, -7, 0], np.int64), np.array([2, 2, -2, -2, 3], np.int64)], tag="int_truncates")
add("Pow", [np.abs(X) + 0.5, np.float32(1.7)], tag="scalar_exponent")
add("PRelu", [X, Const(r(5, 1, 1))], tag="per_channel")
for op in ["Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual"]:
    add(op, [rng.integers(0, 3, (3, 1, 4)).astype(np.int64), rng.integers(0, 3, (2, 4)).astype(np.int64)],
        tag="int64_broadcast")
for op in ["And", "Or", "Xor"]:
    add(op, [r(3, 4, dtype=np.bool_), r(4, dtype=np.bool_)], tag="broadcast")
add("Not", [r(5, 1, 7, dtype=np.bool_)], tag="bool")
add("Where", [r(5, 1, 7, dtype=np.bool_), X, np.float32(-1)], tag="broadcast")
add("Max", [X, X[:1] * 2, np.float32(0.1)], tag="three_inputs")
add("Sum", [X, X[:, :1]], tag="broadcast", opset=13)
add("Min", [X], tag="one_input")
add("Relu", [np.zeros((0, 3), np.float32)], tag="empty")
add("Add", [np.zeros((2, 0, 3), np.float32), np.ones((3,), np.float32)], tag="empty")
add("Mod", [np.array([7, -7, 7, -7, 5], np.int64), np.array([3, 3, -3, -3, 5], np.int64)], tag="int_signs")
add("Mod", [X, np.float32(0.7)], {"fmod": 1}, tag="fmod")
add("Mod", [np.array([5.5, -5.5, 5.5, -5.5], np.float32), np.array([2, 2, -2, -2], np.float32)], {"fmod": 1},
    tag="fmod_signs")
# Every shape class on every element-wise op: 0-d, odd sizes with size-1 dims, empty.
for op in ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "HardSwish", "Softplus",
           "LeakyRelu", "HardSigmoid", "Gelu"]:
    add(op, [np.float32(0.75)], tag="scalar", opset=20)
    add(op, [r(1, 1, 9) * 3], tag="odd", opset=20)
    add(op, [np.zeros((2, 0), np.float32)], tag="empty", opset=20)
for op in ["Log", "Sqrt", "Reciprocal"]:
    add(op, [np.float32(2.5)], tag="scalar")
    add(op, [positive(1, 1, 9)], tag="odd")
for op in ["Abs", "Neg"]:
    add(op, [r(4, 3, dtype=np.int64)], tag="int64", opset=13)
    add(op, [r(3, 5, dtype=np.int32)], tag="int32", opset=13)
for op in ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"]:
    add(op, [np.float32(2.5), positive(1, 3)], tag="scalar_lhs", opset=13)
    add(op, [positive(3, 1, 5), positive(4, 1)], tag="two_way_broadcast", opset=13)
for op in ["Add", "Sub", "Mul", "Max", "Min"]:
    add(op, [r(3, 1, 5, dtype=np.int64), r(4, 1, dtype=np.int64)], tag="int64", opset=13)
    add(op, [r(2, 7, dtype=np.int32), r(7, dtype=np.int32)], tag="int32", opset=13)
for op in ["Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual"]:
    add(op, [np.round(r(2, 1, 5)), np.round(r(3, 1))], tag="float_broadcast", opset=13)
add("Equal", [r(3, 4, dtype=np.bool_), r(1, 4, dtype=np.bool_)], tag="bool", opset=13)
add("Where", [r(3, 1, 1, dtype=np.bool_), r(1, 4, 1, dtype=np.int64), r(1, 1, 5, dtype=np.int64)],
    tag="int64_three_way", opset=16)
add("Not", [np.zeros((0, 2), np.bool_)], tag="empty")
add("PRelu", [r(2, 5, 3), Const(np.float32([0.2]))], tag="scalar_slope", opset=16)
add("Sum", [X], tag="one_input", opset=13)
add("Sum", [X, X[:1], X[:, :1], np.float32(1.5)], tag="four_inputs", opset=13)

# ----------------------------------------------------------------------------------------- Conv
add("Conv", [r(2, 5, 7, 6), Const(r(6, 5, 3, 3)), Const(r(6))], {"pads": [1, 0, 2, 1]}, tag="asymmetric_pads", **TOL)
add("Conv", [r(1, 3, 9, 8), Const(r(5, 3, 3, 2))], {"strides": [2, 3], "dilations": [2, 1], "pads": [1, 2, 0, 1]},
    tag="stride_dilation", **TOL)
add("Conv", [r(2, 6, 7, 5), Const(r(4, 3, 3, 3)), Const(r(4))], {"group": 2, "pads": [1, 1, 1, 1]}, tag="groups",
    **TOL)
add("Conv", [r(1, 6, 8, 7), Const(r(6, 2, 2, 3))], {"group": 3, "strides": [2, 2], "dilations": [2, 2]},
    tag="groups", **TOL)
add("Conv", [r(2, 5, 6, 7), Const(r(5, 1, 3, 3)), Const(r(5))], {"group": 5, "pads": [1, 1, 1, 1]}, tag="depthwise",
    **TOL)
add("Conv", [r(1, 3, 7, 7), Const(r(6, 1, 3, 3))], {"group": 3, "strides": [2, 2]}, tag="depthwise_multiplier", **TOL)
for auto_pad in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
    add("Conv", [r(2, 5, 7, 6), Const(r(3, 5, 3, 2)), Const(r(3))],
        {"auto_pad": auto_pad, "strides": [2, 2], "kernel_shape": [3, 2]}, tag=f"auto_pad_{auto_pad}", **TOL)
    add("Conv", [r(1, 3, 8, 5), Const(r(4, 3, 2, 2))], {"auto_pad": auto_pad}, tag=f"auto_pad_{auto_pad}", **TOL)
add("Conv", [r(2, 5, 1, 1), Const(r(3, 5, 1, 1)), Const(r(3))], tag="1x1", **TOL)
add("Conv", [r(1, 6, 1, 1), Const(r(4, 6, 3, 3))], {"pads": [1, 1, 1, 1]}, tag="1x1_input", **TOL)
add("Conv", [r(2, 5, 4, 3), Const(r(7, 5, 1, 1))], tag="1x1_kernel", **TOL)
add("Conv", [r(2, 5, 11), Const(r(4, 5, 3)), Const(r(4))], {"strides": [2], "pads": [2, 1], "dilations": [2]},
    tag="1d", **TOL)
add("Conv", [r(1, 4, 9), Const(r(4, 2, 3))], {"group": 2, "auto_pad": "SAME_UPPER"}, tag="1d_groups", **TOL)
add("Conv", [r(2, 3, 5, 4, 3), Const(r(4, 3, 2, 2, 2)), Const(r(4))], {"pads": [1, 0, 1, 0, 1, 1]}, tag="3d", **TOL)
add("Conv", [r(1, 4, 5, 6, 5), Const(r(4, 2, 3, 1, 2))], {"group": 2, "strides": [2, 1, 2]}, tag="3d_groups", **TOL)
add("Conv", [r(2, 5, 6, 5), r(3, 5, 3, 3), r(3)], {"pads": [1, 1, 1, 1]}, tag="runtime_weights", **TOL)
add("Conv", [r(1, 3, 6, 5), Const(r(2, 3, 3, 3))], {"auto_pad": "SAME_LOWER"}, tag="opset7", opset=7, **TOL)
add("Conv", [r(1, 3, 6, 5), Const(r(2, 3, 3, 3))], tag="opset11", opset=11, **TOL)
add("Conv", [np.zeros((0, 3, 5, 5), np.float32), Const(r(2, 3, 3, 3)), Const(r(2))], tag="empty_batch",
    reference="ort")
add("Conv", [rng.standard_normal((1, 3, 5, 6)), Const(rng.standard_normal((4, 3, 3, 3)))], {"pads": [1, 1, 1, 1]},
    tag="float64", rtol=1e-10, atol=1e-12)

# -------------------------------------------------------------------------------- ConvTranspose
# onnxruntime is the reference: onnx.reference mishandles group > 1, a short output_shape, SAME_UPPER.
CT = {"reference": "ort"}
add("ConvTranspose", [r(2, 5, 4, 3), Const(r(5, 3, 3, 3)), Const(r(3))], tag="bias", **CT)
add("ConvTranspose", [r(1, 3, 4, 5), Const(r(3, 2, 3, 2))], {"strides": [2, 3]}, tag="strides", **CT)
add("ConvTranspose", [r(2, 4, 3, 3), r(4, 3, 3, 3), r(6)], {"group": 2, "strides": [2, 2]}, tag="runtime_weights",
    **CT)
add("ConvTranspose", [r(2, 6, 4, 5), Const(r(6, 2, 3, 3)), Const(r(4))], {"group": 2, "strides": [2, 3]},
    tag="groups", **CT)
add("ConvTranspose", [r(1, 6, 3, 4), Const(r(6, 1, 3, 3))], {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]},
    tag="depthwise", **CT)
add("ConvTranspose", [r(1, 3, 4, 5), Const(r(3, 2, 3, 3))],
    {"strides": [2, 2], "pads": [1, 0, 0, 2], "output_padding": [1, 1], "dilations": [2, 1]}, tag="output_padding",
    **CT)
add("ConvTranspose", [r(2, 5, 3, 3), Const(r(5, 3, 2, 2)), Const(r(3))], {"strides": [3, 2], "output_padding": [2, 1]},
    tag="output_padding", **CT)
for auto_pad in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
    x, w = r(1, 3, 4, 5), Const(r(3, 2, 3, 3))
    add("ConvTranspose", [x, w], {"strides": [2, 2], "output_shape": [8, 9], "auto_pad": auto_pad},
        tag=f"output_shape_{auto_pad}", **CT)
    add("ConvTranspose", [x, w], {"strides": [2, 2], "output_shape": [10, 12], "auto_pad": auto_pad},
        tag=f"output_shape_{auto_pad}", **CT)
    add("ConvTranspose", [x, w], {"strides": [2, 3], "auto_pad": auto_pad}, tag=f"auto_pad_{auto_pad}", **CT)
add("ConvTranspose", [r(2, 3, 5), Const(r(3, 4, 3)), Const(r(4))], {"strides": [3], "dilations": [2]}, tag="1d", **CT)
add("ConvTranspose", [r(1, 2, 3, 3, 2), Const(r(2, 2, 2, 2, 2))], {"strides": [2, 1, 2]}, tag="3d", **CT)
add("ConvTranspose", [r(2, 5, 1, 1), Const(r(5, 3, 1, 1))], tag="1x1", **CT)
add("ConvTranspose", [r(1, 5, 1, 1), Const(r(5, 3, 3, 3))], {"strides": [2, 2]}, tag="1x1_input", **CT)
add("ConvTranspose", [np.zeros((0, 3, 4, 4), np.float32), Const(r(3, 2, 2, 2))], {"strides": [2, 2]},
    tag="empty_batch", **CT)

# --------------------------------------------------------------------------------- MatMul / Gemm
for a, b in [((5, 3), (3, 6)), ((3,), (3,)), ((3,), (3, 4)), ((2, 5, 3), (3,)), ((3,), (2, 3, 4)),
             ((2, 1, 5, 3), (4, 3, 6)), ((1, 5, 3), (2, 3, 6)), ((7, 1), (1, 5)), ((2, 5, 0), (2, 0, 3)),
             ((0, 3), (3, 4))]:
    add("MatMul", [r(*a), r(*b)], tag="x".join(map(str, a)) + "_" + "x".join(map(str, b)), **TOL)
add("MatMul", [rng.integers(-5, 5, (2, 3, 4)).astype(np.int32), rng.integers(-5, 5, (4, 5)).astype(np.int32)],
    tag="int32", opset=13)
add("MatMul", [rng.integers(-5, 5, (2, 3, 4)), rng.integers(-5, 5, (4, 5))], tag="int64", opset=9)
add("MatMul", [r(4, 3), r(3, 2)], tag="opset1", opset=1, **TOL)
for trans_a in (0, 1):
    for trans_b in (0, 1):
        for c_shape in [(), (1,), (6,), (5, 1), (1, 6), (5, 6), None]:
            c = [] if c_shape is None else [r(*c_shape)]
            tag = f"t{trans_a}{trans_b}_c" + ("none" if c_shape is None else "x".join(map(str, c_shape)) or "scalar")
            add("Gemm", [r(3, 5) if trans_a else r(5, 3), r(6, 3) if trans_b else r(3, 6), *c],
                {"transA": trans_a, "transB": trans_b, "alpha": 0.5, "beta": 2.0}, tag=tag, opset=13, **TOL)
for opset in (7, 9, 11, 13):
    add("Gemm", [r(4, 3), r(3, 5), r(5)], {"transA": 0, "alpha": 1.5}, tag=f"opset{opset}", opset=opset, **TOL)
    add("Gemm", [r(3, 4), r(5, 3), r(4, 1)], {"transA": 1, "transB": 1, "beta": 0.25}, tag=f"opset{opset}",
        opset=opset, **TOL)

# ---------------------------------------------------------------------------- normalisations
# onnx.reference uses batch statistics for BatchNormalization when `momentum` is set: onnxruntime.


def bn_params(c: int, const: bool = True) -> list:
    wrap = Const if const else (lambda v: v)
    return [wrap(r(c)), wrap(r(c)), wrap(r(c)), wrap(positive(c))]


for opset in (7, 9, 14, 15):
    add("BatchNormalization", [r(2, 5, 4, 3), *bn_params(5)], {"momentum": 0.8, "epsilon": 1e-3},
        tag=f"opset{opset}", opset=opset, reference="ort")
    add("BatchNormalization", [r(2, 6, 7), *bn_params(6)], {"momentum": 0.9}, tag=f"opset{opset}_3d", opset=opset,
        reference="ort")
add("BatchNormalization", [r(3, 5), *bn_params(5)], tag="nc", opset=15, reference="ort")
add("BatchNormalization", [r(2, 3, 1, 1), *bn_params(3)], tag="1x1", opset=15, reference="ort")
add("BatchNormalization", [r(1, 3, 2, 3, 4), *bn_params(3)], tag="5d", opset=15, reference="ort")
add("BatchNormalization", [r(2, 5, 4, 3), *bn_params(5, const=False)], tag="runtime_params", opset=15,
    reference="ort")
add("BatchNormalization", [r(2, 3, 4, 5).astype(np.float16), *bn_params(3)], tag="float16_x", opset=15,
    reference="ort", rtol=2e-3, atol=2e-3)
add("BatchNormalization", [np.zeros((0, 3, 4), np.float32), *bn_params(3)], tag="empty", opset=15, reference="ort")
add("BatchNormalization", [r(2, 5, 4, 3), Const(r(5, 4, 3)), Const(r(5, 4, 3)), Const(r(5, 4, 3)),
                           Const(positive(5, 4, 3))], {"spatial": 0}, tag="spatial0", opset=7, reference="ort")
for axis in (-1, -2, 1, 0):
    x = r(2, 5, 4, 3)
    add("LayerNormalization", [x, Const(r(*x.shape[axis:])), Const(r(*x.shape[axis:]))], {"axis": axis},
        tag=f"axis{axis}", opset=17, **TOL)
add("LayerNormalization", [r(2, 6, 5), Const(r(5))], {"epsilon": 1e-2}, tag="no_bias", opset=17, **TOL)
add("LayerNormalization", [r(2, 6, 5), Const(r(1, 5)), Const(r(5))], {"axis": 1}, tag="broadcast_scale", opset=17,
    **TOL)
add("LayerNormalization", [r(2, 6, 5), r(5), r(5)], tag="runtime_scale", opset=17, **TOL)
add("LayerNormalization", [r(3, 5, 7), Const(r(7)), Const(r(7))], tag="three_outputs", outputs=3, opset=17, **TOL)
add("LayerNormalization", [r(3, 5, 7), Const(r(5, 7))], {"axis": 1}, tag="three_outputs", outputs=3, opset=17, **TOL)
# Mean and InvStdDev have the stash type (float32) as in onnxruntime; onnx.reference differs.
add("LayerNormalization", [rng.standard_normal((2, 3, 6)), Const(rng.standard_normal(6)),
                           Const(rng.standard_normal(6))], tag="float64", outputs=3, opset=17, reference="ort")
add("LayerNormalization", [rng.standard_normal((2, 3, 6)).astype(np.float16),
                           Const(rng.standard_normal(6).astype(np.float16))], tag="float16", outputs=3, opset=17,
    reference="ort", rtol=2e-3, atol=2e-3)
add("LayerNormalization", [np.zeros((0, 3, 4), np.float32), Const(r(4))], tag="empty", opset=17, reference="ort")
add("InstanceNormalization", [r(2, 5, 4, 3), Const(r(5)), Const(r(5))], {"epsilon": 1e-3}, tag="nchw", **TOL)
add("InstanceNormalization", [r(2, 3, 7), Const(r(3)), Const(r(3))], tag="3d", **TOL)
add("InstanceNormalization", [r(1, 6, 3, 2, 4), r(6), r(6)], tag="5d_runtime_params", **TOL)
add("InstanceNormalization", [r(2, 3, 1, 5), Const(r(3)), Const(r(3))], tag="opset6", opset=6, **TOL)
add("InstanceNormalization", [np.zeros((0, 3, 4), np.float32), Const(r(3)), Const(r(3))], tag="empty",
    reference="ort")

# ---------------------------------------------------------------------------------------- pools
XP = r(2, 5, 7, 6)  # C = 5, odd height
WINDOWS = [
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]},  # asymmetric pads
    {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 1, 1]},  # last ceil window starts in the padding
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [2, 3], "strides": [2, 2], "dilations": [2, 1], "pads": [1, 1, 0, 1]},
    {"kernel_shape": [1, 1]},
]
for w, window in enumerate(WINDOWS):
    for ceil_mode in (0, 1):
        add("MaxPool", [XP], {**window, "ceil_mode": ceil_mode}, tag=f"window{w}_ceil{ceil_mode}", **TOL)
        for count_include_pad in (0, 1):
            add("AveragePool", [XP], {**window, "ceil_mode": ceil_mode, "count_include_pad": count_include_pad},
                tag=f"window{w}_ceil{ceil_mode}_pad{count_include_pad}", opset=19, **TOL)
# onnxruntime: the reference gets MaxPool SAME_LOWER wrong and refuses ceil_mode with auto_pad.
XA = r(2, 3, 7, 8)
for op in ("MaxPool", "AveragePool"):
    for auto_pad in ("VALID", "SAME_UPPER", "SAME_LOWER"):
        for ceil_mode in (0, 1):
            for count_include_pad in ((0, 1) if op == "AveragePool" else (None,)):
                extra = {} if count_include_pad is None else {"count_include_pad": count_include_pad}
                for k, window in enumerate(({"kernel_shape": [3, 3], "strides": [2, 2]},
                                            {"kernel_shape": [2, 2], "strides": [3, 3]})):
                    add(op, [XA], {**window, "auto_pad": auto_pad, "ceil_mode": ceil_mode, **extra},
                        tag=f"{auto_pad}_ceil{ceil_mode}_w{k}", reference="ort")
    # SAME_* with dilations: neither oracle follows the ONNX formula, so the reference runs the
    # explicit pads the formula gives (height 8, stride 2, span 3 -> total 1; width 6, stride 1,
    # span 4 -> total 3; odd totals tell UPPER from LOWER).
    xd = r(2, 3, 8, 6)
    window = {"kernel_shape": [2, 2], "strides": [2, 1], "dilations": [2, 3]}
    if op == "AveragePool":
        window["count_include_pad"] = 1
    for auto_pad, pads in (("SAME_UPPER", [0, 1, 1, 2]), ("SAME_LOWER", [1, 2, 0, 1])):
        add(op, [xd], {**window, "auto_pad": auto_pad}, tag=f"{auto_pad}_dilations", opset=19,
            reference_attrs={**window, "pads": pads}, **TOL)
add("MaxPool", [r(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "pads": [2, 1], "ceil_mode": 1}, tag="1d", **TOL)
add("AveragePool", [r(1, 6, 10)], {"kernel_shape": [4], "strides": [3], "pads": [1, 2], "count_include_pad": 1,
                                   "ceil_mode": 1}, tag="1d", **TOL)
X3D = r(1, 3, 5, 4, 6)
add("MaxPool", [X3D], {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}, tag="3d", **TOL)
add("AveragePool", [X3D], {"kernel_shape": [3, 2, 2], "strides": [2, 2, 3], "pads": [1, 0, 1, 1, 1, 1]}, tag="3d",
    **TOL)
X11 = r(2, 5, 1, 1)
add("MaxPool", [X11], {"kernel_shape": [1, 1]}, tag="1x1", **TOL)
add("AveragePool", [X11], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, tag="1x1", **TOL)
XO = r(1, 6, 7, 5)
add("MaxPool", [XO], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, tag="opset1", opset=1, **TOL)
add("MaxPool", [XO], {"kernel_shape": [2, 2], "storage_order": 1}, tag="opset8", opset=8, **TOL)
add("MaxPool", [XO], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1, "dilations": [1, 2]}, tag="opset10",
    opset=10, **TOL)
add("AveragePool", [XO], {"kernel_shape": [3, 2], "pads": [1, 1, 1, 0], "count_include_pad": 1}, tag="opset7",
    opset=7, **TOL)
add("AveragePool", [XO], {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}, tag="opset10", opset=10, **TOL)
for dtype, low in ((np.int8, -128), (np.uint8, 0)):
    add("MaxPool", [rng.integers(low, 127, (2, 3, 5, 5)).astype(dtype)],
        {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0], "strides": [2, 2], "ceil_mode": 1}, tag=np.dtype(dtype).name,
        opset=12)
for op in ("GlobalAveragePool", "GlobalMaxPool"):
    for shape in ((2, 5, 7, 6), (2, 3, 5), (1, 6, 3, 2, 4), (2, 5, 1, 1)):
        add(op, [r(*shape)], tag="x".join(map(str, shape)), reference="ort")
EMPTY_MAP = np.zeros((0, 3, 5, 5), np.float32)
add("MaxPool", [EMPTY_MAP], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, tag="empty", reference="ort")
add("AveragePool", [EMPTY_MAP], {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}, tag="empty", reference="ort")
add("GlobalAveragePool", [EMPTY_MAP], tag="empty", reference="ort")

# ----------------------------------------------------------------------------------- reductions
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES_INPUT_SINCE = {op: 13 if op == "ReduceSum" else 18 for op in REDUCE}
XR = r(2, 5, 3, 7)
XR_POSITIVE = np.abs(XR) + 0.1  # ReduceLogSum needs a positive sum


def axes_form(op: str, opset: int, axes) -> tuple[list, dict]:
    """Extra inputs and attributes of a reduction in the form its opset uses."""
    if opset >= AXES_INPUT_SINCE[op]:
        return [None if axes is None else Const(np.array(axes, np.int64))], {}
    return [], ({} if axes is None else {"axes": axes})


def axes_tag(axes) -> str:
    return "all" if axes is None else "_".join(str(a) for a in axes)


for op in REDUCE:
    data = XR_POSITIVE if op == "ReduceLogSum" else XR
    for keepdims in (0, 1):
        for axes in ([1], [-1, 1], [0, 2, 3], [0, 1, 2, 3], None):
            extra, attrs = axes_form(op, 18, axes)
            add(op, [data, *extra], {"keepdims": keepdims, **attrs}, tag=f"axes_{axes_tag(axes)}_keep{keepdims}",
                opset=18, **TOL)
    for opset in (11, 13):
        for axes in ([2], [-3, 3], None):
            extra, attrs = axes_form(op, opset, axes)
            add(op, [data, *extra], {"keepdims": 0, **attrs}, tag=f"opset{opset}_axes_{axes_tag(axes)}", opset=opset,
                **TOL)
    # No axes: everything, or nothing with noop_with_empty_axes=1 (composite kinds still apply
    # their element-wise part: ReduceL2 gives |x|, ReduceLogSum gives log x).
    for empty_tag, axes_input in (("absent", None), ("empty", Const(np.zeros(0, np.int64)))):
        opset = AXES_INPUT_SINCE[op]
        add(op, [data, axes_input], {"noop_with_empty_axes": 0}, tag=f"no_axes_{empty_tag}", opset=opset, **TOL)
        add(op, [data, axes_input], {"noop_with_empty_axes": 1, "keepdims": 0}, tag=f"noop_{empty_tag}", opset=opset,
            **TOL)
    # Reducing a length-0 axis gives the kind's identity (0, 1, -inf, +inf, ...); the mean of
    # nothing is NaN (0/0), given explicitly (onnx.reference warns on it).
    extra, attrs = axes_form(op, 18, [1])
    empty_axis = np.zeros((2, 0, 3), np.float32)
    if op == "ReduceMean":
        add(op, [empty_axis, *extra], attrs, tag="empty_axis", opset=18, reference="given",
            expected=[np.full((2, 1, 3), np.nan, np.float32)])
    else:
        add(op, [empty_axis, *extra], attrs, tag="empty_axis", opset=18)
    if op in ("ReduceMax", "ReduceMin"):
        add(op, [np.zeros((0, 4), np.int64), *extra], {"keepdims": 0, **attrs}, tag="empty_axis_int64", opset=18)
    if op not in ("ReduceLogSum", "ReduceLogSumExp"):
        xi = rng.integers(-6, 7, (3, 5, 2)).astype(np.int64)
        add(op, [xi, *extra], attrs, tag="int64", opset=18)
        add(op, [xi, None], {"keepdims": 0}, tag="int64_all", opset=18)
XL = (rng.standard_normal((2, 3, 5)) * 10 + 500).astype(np.float32)  # exp(500) overflows float32
add("ReduceLogSumExp", [XL, Const(np.array([2], np.int64))], tag="large", opset=18, **TOL)
add("ReduceLogSumExp", [-XL, Const(np.array([0, 2], np.int64))], tag="large_negative", opset=18, **TOL)
TIES = np.array([[[3, 1, 3, 0], [2, 2, 1, 2], [0, 5, 5, 5]],
                 [[1, 1, 1, 1], [4, 0, 4, 0], [7, 7, 6, 7]]], np.float32)
for op in ("ArgMax", "ArgMin"):
    for select_last_index in (0, 1):
        for keepdims in (0, 1):
            for axis in (0, 1, 2, -1):
                add(op, [TIES], {"axis": axis, "keepdims": keepdims, "select_last_index": select_last_index},
                    tag=f"ties_axis{axis}_keep{keepdims}_last{select_last_index}", opset=13)
    add(op, [XR], tag="defaults", opset=11)
    add(op, [XR], {"axis": -3, "keepdims": 0}, tag="negative_axis", opset=11)
    add(op, [rng.integers(0, 3, (4, 6)).astype(np.int64)], {"axis": 1, "select_last_index": 1}, tag="int64",
        opset=12)
    add(op, [np.array([2.0, 9.0, 9.0], np.float32)], {"keepdims": 0}, tag="1d", opset=13)

# -------------------------------------------------------------------------------------- softmax
XS3, XS4 = r(2, 5, 7), r(2, 3, 4, 5)
for op in ("Softmax", "LogSoftmax", "Hardmax"):
    for axis in (0, 1, -1):
        add(op, [XS3], {"axis": axis}, tag=f"3d_axis{axis}", opset=13, **TOL)
        add(op, [XS4], {"axis": axis}, tag=f"4d_axis{axis}", opset=13, **TOL)
    add(op, [XS4], tag="default_axis", opset=13, **TOL)
    for axis in (0, 1, -1, None):  # before opset 13: flatten from axis on (None: the old default, 1)
        attrs = {} if axis is None else {"axis": axis}
        add(op, [XS3], attrs, tag=f"legacy_3d_axis{axis}", opset=11, reference="ort")
        add(op, [XS4], attrs, tag=f"legacy_4d_axis{axis}", opset=11, reference="ort")
for op in ("Softmax", "LogSoftmax"):  # exp(1000) overflows: the maximum must be subtracted first
    big = (XS4 * 5 + 1000).astype(np.float32)
    add(op, [big], {"axis": -1}, tag="large", opset=13, **TOL)
    add(op, [-big], {"axis": 1}, tag="large_negative", opset=13, **TOL)
    add(op, [big], {"axis": 2}, tag="large_legacy", opset=11, reference="ort")
HARDMAX_TIES = np.array([[[3, 1, 3], [2, 2, 2]], [[0, 5, 5], [1, 1, 0]]], np.float32)
for axis in (0, 1, 2):
    add("Hardmax", [HARDMAX_TIES], {"axis": axis}, tag=f"ties_axis{axis}", opset=13)
add("Softmax", [r(3, 1, 4)], {"axis": 1}, tag="single_element_axis", opset=13, **TOL)
add("LogSoftmax", [XS3.astype(np.float64)], {"axis": 1}, tag="float64", opset=13, rtol=1e-10, atol=1e-12)

# ---------------------------------------------------------------------------------------- Resize
XZ = r(2, 3, 4, 5)
COORDINATE_MODES = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
RESIZES = {  # scales or sizes for the 2x3x4x5 input: up, down, mixed non-integer, sizes, sizes of 1
    "up": ("scales", [1, 1, 1.7, 2.5]),
    "down": ("scales", [1, 1, 0.6, 0.45]),
    "mixed": ("scales", [1, 1, 0.6, 1.7]),
    "sizes": ("sizes", [2, 3, 7, 3]),
    "to_one": ("sizes", [2, 3, 1, 1]),
}
ROI = np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], np.float32)  # the last end lies outside: extrapolation


def resize_inputs(x: np.ndarray, kind: str, values, roi=None) -> list:
    scales = Const(np.array(values, np.float32)) if kind == "scales" else None
    sizes = Const(np.array(values, np.int64)) if kind == "sizes" else None
    return [x, None if roi is None else Const(roi), scales, sizes]


for mode, coordinate_mode, nearest_mode in ([("nearest", c, n) for c in COORDINATE_MODES for n in NEAREST_MODES]
                                            + [(m, c, None) for m in ("linear", "cubic") for c in COORDINATE_MODES]):
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate_mode}
    if nearest_mode:
        attrs["nearest_mode"] = nearest_mode
    roi = ROI if coordinate_mode == "tf_crop_and_resize" else None
    if roi is not None:
        attrs["extrapolation_value"] = -3.0
    for label, (kind, values) in RESIZES.items():
        add("Resize", resize_inputs(XZ, kind, values, roi), attrs,
            tag="_".join(filter(None, [mode, coordinate_mode, nearest_mode, label])), opset=19,
            **(CUBIC_TOL if mode == "cubic" else TOL))
for mode in ("nearest", "linear", "cubic"):
    tol = CUBIC_TOL if mode == "cubic" else TOL
    add("Resize", [XZ, None, Const(np.array([0.6, 1.7], np.float32)), None], {"mode": mode, "axes": [2, 3]},
        tag=f"{mode}_axes", opset=18, **tol)
    # onnx.reference cannot transpose with negative axes: onnxruntime
    add("Resize", [XZ, None, None, Const(np.array([7], np.int64))], {"mode": mode, "axes": [-2]},
        tag=f"{mode}_negative_axis", opset=18, reference="ort", **tol)
    add("Resize", [XZ, Const(np.array([0.1, 0.9], np.float32)), None, Const(np.array([4], np.int64))],
        {"mode": mode, "axes": [3], "coordinate_transformation_mode": "tf_crop_and_resize"},
        tag=f"{mode}_axes_crop", opset=18, **tol)
X5 = r(2, 3, 4, 3, 5)
for nearest_mode in NEAREST_MODES:
    add("Resize", [X5, None, Const(np.array([1, 2.0, 0.5, 1.5, 1], np.float32)), None],
        {"mode": "nearest", "nearest_mode": nearest_mode, "coordinate_transformation_mode": "asymmetric"},
        tag=f"5d_channels_{nearest_mode}", opset=19)
    add("Resize", [X5, None, None, Const(np.array([1, 5, 3, 3, 2], np.int64))],
        {"mode": "nearest", "nearest_mode": nearest_mode}, tag=f"5d_sizes_{nearest_mode}", opset=19)
XZ3 = r(3, 4, 6)
for mode in ("linear", "cubic"):
    tol = CUBIC_TOL if mode == "cubic" else TOL
    add("Resize", [XZ3, None, Const(np.array([1.7, 1, 0.5], np.float32)), None], {"mode": mode},
        tag=f"{mode}_3d", opset=19, **tol)
    add("Resize", [XZ3[0, 0], None, None, Const(np.array([11], np.int64))],
        {"mode": mode, "coordinate_transformation_mode": "align_corners"}, tag=f"{mode}_1d", opset=19, **tol)
for coordinate_mode in ("half_pixel", "align_corners", "tf_crop_and_resize"):
    for a in (-0.75, -0.5):
        attrs = {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": a,
                 "coordinate_transformation_mode": coordinate_mode}
        roi = ROI if coordinate_mode == "tf_crop_and_resize" else None
        for label, (kind, values) in RESIZES.items():
            add("Resize", resize_inputs(XZ, kind, values, roi), attrs,
                tag=f"cubic_exclude_outside_{coordinate_mode}_a{a}_{label}", opset=19, **CUBIC_TOL)
add("Resize", resize_inputs(XZ, "scales", [1, 1, 1.7, 2.5]),
    {"mode": "nearest", "nearest_mode": "floor", "exclude_outside": 1}, tag="nearest_exclude_outside", opset=19)
CROP = np.array([0, 0, -0.3, 0.25, 1, 1, 0.8, 0.75], np.float32)
for mode in ("nearest", "linear", "cubic"):
    tol = CUBIC_TOL if mode == "cubic" else TOL
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 7.5}
    add("Resize", [XZ, Const(CROP), None, Const(np.array([2, 3, 5, 4], np.int64))], attrs, tag=f"{mode}_crop",
        opset=19, **tol)
    add("Resize", [XZ, Const(CROP), None, Const(np.array([2, 3, 1, 1], np.int64))], attrs, tag=f"{mode}_crop_to_one",
        opset=19, **tol)
for policy in ("not_larger", "not_smaller"):
    for mode in ("nearest", "linear"):
        add("Resize", [XZ, None, None, Const(np.array([7, 7], np.int64))],
            {"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy}, tag=f"{mode}_{policy}_axes",
            opset=18, **TOL)
        add("Resize", [XZ, None, None, Const(np.array([3, 9, 9, 3], np.int64))],
            {"mode": mode, "keep_aspect_ratio_policy": policy}, tag=f"{mode}_{policy}", opset=18, **TOL)
XAA = r(1, 2, 9, 11)
for mode in ("linear", "cubic"):
    for k, scales in enumerate(([1, 1, 0.5, 0.3], [1, 1, 0.8, 1.5])):
        add("Resize", [XAA, None, Const(np.array(scales, np.float32)), None], {"mode": mode, "antialias": 1},
            tag=f"{mode}_antialias_{k}", opset=18, **CUBIC_TOL)
    add("Resize", [XAA, None, None, Const(np.array([4, 3], np.int64))],
        {"mode": mode, "antialias": 1, "axes": [2, 3], "exclude_outside": 1}, tag=f"{mode}_antialias_sizes",
        opset=18, **CUBIC_TOL)
XU8 = rng.integers(0, 256, (1, 3, 4, 5)).astype(np.uint8)
add("Resize", resize_inputs(XU8, "scales", [1, 1, 1.7, 2.5]), {"mode": "nearest"}, tag="uint8_nearest", opset=19)
add("Resize", resize_inputs(XU8, "scales", [1, 1, 0.6, 1.7]), {"mode": "linear"}, tag="uint8_linear", opset=19)
add("Resize", resize_inputs(XU8, "sizes", [1, 3, 9, 4]), {"mode": "cubic"}, tag="uint8_cubic", opset=19)
EMPTY_F = Const(np.zeros(0, np.float32))
add("Resize", [XZ, EMPTY_F, Const(np.array([1, 1, 1.7, 0.6], np.float32))], {"mode": "linear"}, tag="opset11",
    opset=11, **TOL)
add("Resize", [XZ, EMPTY_F, EMPTY_F, Const(np.array([2, 3, 3, 8], np.int64))], {"mode": "cubic"},
    tag="opset11_sizes", opset=11, **CUBIC_TOL)
add("Resize", [XZ, Const(ROI), Const(np.array([1, 1, 1.5, 1.5], np.float32))],
    {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, tag="opset11_crop", opset=11, **TOL)
add("Resize", [XZ, None, Const(np.array([1, 1, 2, 2], np.float32))], {"mode": "nearest"}, tag="opset13", opset=13)
add("Resize", [XZ, EMPTY_F, EMPTY_F, Const(np.array([2, 3, 2, 9], np.int64))], {"mode": "nearest"},
    tag="opset13_sizes", opset=13)
add("Resize", [XZ, EMPTY_F, Const(np.array([1, 1, 1.7, 0.6], np.float32))],
    {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn"}, tag="tf_half_pixel_for_nn",
    opset=11, reference="ort")
for mode in ("nearest", "linear"):
    for k, scales in enumerate(([1, 1, 0.6, 1.7], [1, 1, 2, 3], [1, 1, 0.5, 0.45])):
        add("Resize", [XZ, Const(np.array(scales, np.float32))], {"mode": mode}, tag=f"opset10_{mode}_{k}", opset=10,
            reference="ort")
add("Resize", [np.zeros((0, 3, 4, 5), np.float32), None, Const(np.array([1, 1, 2, 0.5], np.float32)), None],
    {"mode": "linear"}, tag="empty_batch", opset=19)
add("Upsample", [XZ, Const(np.array([1, 1, 2, 3], np.float32))], {"mode": "nearest"}, tag="opset9", opset=9)
add("Upsample", [XZ, Const(np.array([1, 2, 1, 2], np.float32))], {"mode": "nearest"}, tag="opset9_channels", opset=9)
for mode in ("nearest", "linear"):
    add("Upsample", [XZ, Const(np.array([1, 1, 1.5, 2.5], np.float32))], {"mode": mode}, tag=f"fractional_{mode}",
        opset=9, reference="ort")
    add("Upsample", [XZ], {"mode": mode, "scales": [1.0, 1.0, 1.7, 2.0]}, tag=f"opset7_{mode}", opset=7,
        reference="ort")

# ---------------------------------------------------------------------------------- data movement
# onnxruntime where the reference lacks a form (Reshape-1, empty Flatten, negative pads).
rng = np.random.default_rng(1)
for opset in (5, 13, 14, 19, 21):
    add("Reshape", [r(2, 5, 3, 1), ints(0, -1, 3)], tag=f"opset{opset}", opset=opset)
    add("Reshape", [r(7), ints(7, 1, 1, 1, 1)], tag=f"opset{opset}_rank5", opset=opset)
    add("Reshape", [r(2, 3, 4, 5, 1, dtype=np.int64), ints(-1)], tag=f"opset{opset}_int64", opset=opset)
add("Reshape", [r(0, 3), ints(3, 0)], {"allowzero": 1}, tag="allowzero", opset=14)
add("Reshape", [r(0, 3), ints(3, -1)], tag="empty", opset=14)
add("Reshape", [r(2, 3, 4, dtype=np.bool_), ints(0, 0, 2, 2)], {"allowzero": 0}, tag="bool_copy_dims", opset=14)
add("Reshape", [r(2, 6)], {"shape": [3, 4]}, tag="opset4_attribute", opset=4, reference="ort")
for axis in (0, 1, 3, 4, -1, -4):
    add("Flatten", [r(2, 5, 1, 3)], {"axis": axis}, tag=f"axis{axis}", opset=13)
add("Flatten", [r(2, 5, 3)], tag="opset9", opset=9)
add("Flatten", [r(2, 5, 3, dtype=np.int64)], {"axis": -2}, tag="int64", opset=21)
add("Flatten", [r(0, 5, 3)], {"axis": 2}, tag="empty", opset=11, reference="ort")
for opset in (11, 13, 21):
    xq = r(1, 5, 1, 3, 1)
    for axes in ((0,), (-1, 2), (0, 2, 4)):
        inputs, attrs = ([xq], {"axes": list(axes)}) if opset < 13 else ([xq, ints(*axes)], {})
        add("Squeeze", inputs, attrs, tag=f"opset{opset}_axes_{axes_tag(axes)}", opset=opset)
    add("Squeeze", [xq], tag=f"opset{opset}_all", opset=opset)
    for axes in ((0,), (-1,), (0, 3), (-1, 1), (1, 3, 4)):
        y = r(5, 3, dtype=np.int64)
        inputs, attrs = ([y], {"axes": list(axes)}) if opset < 13 else ([y, ints(*axes)], {})
        add("Unsqueeze", inputs, attrs, tag=f"opset{opset}_axes_{axes_tag(axes)}", opset=opset)
add("Unsqueeze", [np.array(3.5, np.float32), ints(0, 1)], tag="scalar", opset=13)
add("Squeeze", [r(1, 1, 1, dtype=np.bool_), ints(0, 1, 2)], tag="bool_to_scalar", opset=13)
for shape, perm in [((7,), [0]), ((3, 5), None), ((2, 5, 3), [1, 0, 2]), ((2, 5, 3, 7), [0, 2, 3, 1]),
                    ((2, 1, 5, 3, 2), [4, 2, 0, 3, 1]), ((0, 3, 2), [2, 0, 1])]:
    attrs = {"perm": perm} if perm is not None else {}
    tag = "x".join(map(str, shape)) + ("_reverse" if perm is None else "_" + "".join(map(str, perm)))
    add("Transpose", [r(*shape)], attrs, tag=tag, opset=13)
    add("Transpose", [r(*shape, dtype=np.int64)], attrs, tag=f"{tag}_int64", opset=21)
    add("Transpose", [r(*shape, dtype=np.bool_)], attrs, tag=f"{tag}_bool", opset=1)
for opset in (4, 11, 13):
    add("Concat", [r(2, 5, 3), r(2, 1, 3), r(2, 0, 3)], {"axis": 1}, tag=f"opset{opset}_empty_part", opset=opset)
    add("Concat", [r(2, 5, 3), r(2, 5, 4)], {"axis": -1}, tag=f"opset{opset}_last_axis", opset=opset)
    add("Concat", [r(3, dtype=np.int64), r(0, dtype=np.int64), r(1, dtype=np.int64)], {"axis": 0},
        tag=f"opset{opset}_int64", opset=opset)
    add("Concat", [r(1, 2, 3, 1, 2, dtype=np.bool_), r(2, 2, 3, 1, 2, dtype=np.bool_)], {"axis": -5},
        tag=f"opset{opset}_bool_rank5", opset=opset)
add("Concat", [r(2, 3)], {"axis": 0}, tag="single_input")
XSL = r(4, 5, 6)
add("Slice", [XSL], {"starts": [1, 0], "ends": [3, -1]}, tag="opset1_attributes", opset=1)
add("Slice", [XSL], {"starts": [-2, 1], "ends": [INT64_MAX, 100], "axes": [2, 0]}, tag="opset9_axes", opset=9)
for opset in (10, 13):
    xs = r(4, 5, 6, 3)
    add("Slice", [xs, ints(1, 0), ints(3, -1)], tag=f"opset{opset}", opset=opset)
    add("Slice", [xs, ints(-1, 10), ints(-100, 0), ints(2, 1), ints(-2, -1)], tag=f"opset{opset}_negative_steps",
        opset=opset)
    add("Slice", [xs, ints(INT64_MAX, -1), ints(INT64_MIN, INT64_MIN), ints(0, -1), ints(-1, -1)],
        tag=f"opset{opset}_reverse_all", opset=opset)
    add("Slice", [xs, ints(0, 2), ints(INT64_MAX, INT64_MAX), ints(-1, 1), ints(2, 3)], tag=f"opset{opset}_steps",
        opset=opset)
    add("Slice", [xs, ints(3), ints(1), ints(1)], tag=f"opset{opset}_empty", opset=opset)
    add("Slice", [xs, ints(-100), ints(100), ints(3)], tag=f"opset{opset}_clamped", opset=opset)
    add("Slice", [xs.astype(np.int64), *[Const(np.array(v, np.int32)) for v in ([1], [4], [2], [2])]],
        tag=f"opset{opset}_int32_operands", opset=opset)
add("Slice", [r(2, 1, 5, 3, 4, dtype=np.bool_), ints(0, -2, 1), ints(1, 0, 4), ints(0, 2, -1), ints(1, -1, 2)],
    tag="bool_rank5")
add("Slice", [r(0, 5), ints(1), ints(4), ints(1)], tag="empty_input")
XSP = r(2, 7, 3)
add("Split", [XSP], {"axis": 1, "split": [2, 4, 1]}, tag="opset2_attribute", outputs=3, opset=2)
add("Split", [XSP], {"axis": -2, "split": [3, 0, 4]}, tag="opset11_empty_part", outputs=3, opset=11)
add("Split", [r(6, 2, dtype=np.int64)], tag="opset11_equal", outputs=3, opset=11)
XSP2 = r(2, 7, 5)
add("Split", [XSP2, ints(1, 4)], {"axis": -1}, tag="opset13_input", outputs=2, opset=13)
add("Split", [XSP2[:, :6], None], {"axis": 1}, tag="opset13_equal", outputs=2, opset=13)
add("Split", [XSP2], {"axis": 1, "num_outputs": 3}, tag="opset18_num_outputs", outputs=3, opset=18)  # 3, 3, 1
add("Split", [r(2, 5, dtype=np.bool_)], {"axis": 1, "num_outputs": 2}, tag="opset18_bool", outputs=2, opset=18)
XPD = r(2, 5, 3)
add("Pad", [XPD], {"pads": [0, 1, 2, 1, 0, 1], "value": 1.5}, tag="opset2_value", opset=2)
add("Pad", [XPD], {"pads": [0, 2, 2, 1, 0, 1], "mode": "reflect"}, tag="opset2_reflect", opset=2)
add("Pad", [XPD], {"pads": [1, 0, 0, 0, 3, 2], "mode": "edge"}, tag="opset2_edge", opset=2)
for mode in ("constant", "reflect", "edge"):
    xp = r(2, 5, 4, 7)
    add("Pad", [xp, ints(0, 0, 2, 3, 1, 0, 1, 2)], {"mode": mode}, tag=f"{mode}_opset11", opset=11)
    add("Pad", [xp, ints(1, 2, 3, 2), None, ints(-1, 1)], {"mode": mode}, tag=f"{mode}_axes", opset=18)
    add("Pad", [xp[0, 0], ints(3, 1, 2, 4)], {"mode": mode}, tag=f"{mode}_2d_corners", opset=13)
    add("Pad", [r(6, dtype=np.int64), ints(2, 3)], {"mode": mode}, tag=f"{mode}_int64", opset=13)
XPC = r(2, 3, 4)
add("Pad", [XPC, ints(1, 0, 2, 0, 2, 1), Const(np.float32(-2.5))], tag="constant_value", opset=11)
add("Pad", [r(3, 4, dtype=np.int64), ints(1, 2, 0, 1), Const(np.array(7, np.int64))], tag="int64_value", opset=13)
add("Pad", [r(3, 4, dtype=np.bool_), ints(1, 1, 1, 1), Const(np.array(True))], tag="bool_value", opset=13)
add("Pad", [XPC, ints(1, 0, 0, 0, 0, 1), np.float32(3.25)], tag="runtime_value", opset=11)
add("Pad", [r(0, 3), ints(1, 1, 2, 0)], tag="empty_input", opset=11)
add("Pad", [XPC, ints(0, 2, 3, 0, 4, 1)], {"mode": "wrap"}, tag="wrap", opset=19)
add("Pad", [XPC, ints(0, 7, 5, 0, 6, 9)], {"mode": "wrap"}, tag="wrap_more_than_once", opset=19)
add("Pad", [XPC, ints(0, 5, 4, 0, 6, 7)], {"mode": "reflect"}, tag="reflect_more_than_once", opset=18)
for mode in ("constant", "reflect", "edge", "wrap"):  # np.pad (the reference) rejects negative pads
    add("Pad", [r(2, 6, 5), ints(0, -1, 2, 0, 3, -2)], {"mode": mode}, tag=f"{mode}_negative_crops", opset=19,
        reference="ort")
for opset in (8, 13):
    add("Expand", [r(2, 1, 4), ints(2, 1, 1, 5, 1)], tag=f"opset{opset}_higher_rank", opset=opset)
    add("Expand", [r(3, 1), ints(2, 1, 6)], tag=f"opset{opset}", opset=opset)
    add("Expand", [r(2, 1, 5), ints(3, 1)], tag=f"opset{opset}_lower_rank_shape", opset=opset)
    add("Expand", [r(1, dtype=np.int64), ints(0, 3)], tag=f"opset{opset}_empty", opset=opset)
    add("Expand", [r(4, 1, dtype=np.bool_), ints(4, 3)], tag=f"opset{opset}_bool", opset=opset)
    add("Expand", [np.array(2.0, np.float32), ints(2, 3)], tag=f"opset{opset}_scalar", opset=opset)
for shape, repeats in [((5,), (3,)), ((2, 3), (2, 1)), ((2, 1, 3), (1, 4, 2)), ((1, 5, 3, 2), (2, 1, 1, 3)),
                       ((2, 3), (0, 2)), ((1, 2, 1, 2, 1), (2, 1, 3, 1, 2))]:
    tag = "x".join(map(str, shape)) + "_by_" + "x".join(map(str, repeats))
    add("Tile", [r(*shape), ints(*repeats)], tag=tag, opset=13)
    add("Tile", [r(*shape, dtype=np.int64), ints(*repeats)], tag=f"{tag}_int64", opset=6)
for mode in ("DCR", "CRD"):
    for shape, b in [((2, 8, 3, 5), 2), ((1, 18, 2, 1), 3), ((3, 4, 1, 1), 2)]:
        add("DepthToSpace", [r(*shape)], {"blocksize": b, "mode": mode}, tag=f"{mode}_" + "x".join(map(str, shape)),
            opset=13)
add("DepthToSpace", [r(2, 12, 3, 2)], {"blocksize": 2}, tag="opset1", opset=1)
add("DepthToSpace", [r(2, 8, 3, 2, dtype=np.int64)], {"blocksize": 2, "mode": "CRD"}, tag="int64", opset=11)
for shape, b in [((2, 3, 4, 6), 2), ((1, 5, 6, 3), 3), ((2, 1, 2, 2), 2)]:
    add("SpaceToDepth", [r(*shape)], {"blocksize": b}, tag="x".join(map(str, shape)), opset=13)
    add("SpaceToDepth", [r(*shape, dtype=np.int64)], {"blocksize": b}, tag="x".join(map(str, shape)) + "_int64",
        opset=1)
for axis in (0, 1, -1):
    xg = r(3, 5, 7)
    add("Gather", [xg, ints(0, -1, 2)], {"axis": axis}, tag=f"axis{axis}", opset=13)
    add("Gather", [xg, Const(np.array([[1, 0], [-2, 2]], np.int32))], {"axis": axis}, tag=f"axis{axis}_int32_2d",
        opset=11)
    add("Gather", [xg, Const(np.array(-1, np.int64))], {"axis": axis}, tag=f"axis{axis}_scalar", opset=13)
    add("Gather", [xg.astype(np.int64), Const(np.zeros((0,), np.int64))], {"axis": axis}, tag=f"axis{axis}_empty",
        opset=13)
XGR = r(6, 5, 4)
add("Gather", [XGR, np.array([[5, -6], [0, 3]], np.int64)], {"axis": 0}, tag="runtime_indices", opset=13)
add("Gather", [XGR > 0, np.array([1, -1, 0], np.int32)], {"axis": -2}, tag="runtime_bool", opset=13)
add("Gather", [XGR, Const(rng.integers(-4, 4, (10, 9)).astype(np.int64))], {"axis": 2}, tag="many_indices", opset=13)
add("Gather", [r(7), Const(np.array(3, np.int64))], tag="opset1_scalar", opset=1)
XID = r(2, 5, 3)
add("Identity", [XID], tag="float", opset=13)
add("Identity", [XID.astype(np.int64)], tag="int64", opset=21)
add("Dropout", [XID], {"ratio": 0.3}, tag="opset10", opset=10)
add("Dropout", [XID], tag="mask", outputs=2, opset=12)
add("Dropout", [XID, Const(np.float32(0.5)), Const(np.array(False))], tag="opset13_inputs", outputs=2, opset=13)
# Before opset 10 the mask has the input's type; the spec's inference mask keeps every element
# (onnx.reference returns bool, onnxruntime zeros).
add("Dropout", [XID], tag="opset7_mask", outputs=2, opset=7, reference="given",
    expected=[XID, np.ones(XID.shape, np.float32)])

# -------------------------------------------------------------------------- shapes, casts, constants
rng = np.random.default_rng(2)
XSH = r(2, 5, 3, 7)
for opset in (1, 13, 19, 21):
    add("Shape", [XSH], tag=f"opset{opset}", opset=opset)
    add("Size", [XSH.astype(np.int64)], tag=f"opset{opset}", opset=opset)
    add("Shape", [np.zeros((0, 3), np.bool_)], tag=f"opset{opset}_empty", opset=opset)
    add("Size", [np.zeros((0, 3), np.float32)], tag=f"opset{opset}_empty", opset=opset)
    add("Shape", [np.float32(1.0)], tag=f"opset{opset}_scalar", opset=opset)
for start, end in [(1, None), (-2, None), (0, -1), (1, 3), (-10, 10), (3, 1), (5, 6)]:
    add("Shape", [XSH], {"start": start} | ({"end": end} if end is not None else {}), tag=f"start{start}_end{end}",
        opset=15)
for opset in (9, 20, 21):
    add("ConstantOfShape", [ints(2, 5, 3)], tag=f"opset{opset}_default", opset=opset)
    add("ConstantOfShape", [ints(4, 1)], {"value": np.array([7], np.int64)}, tag=f"opset{opset}_int64", opset=opset)
    add("ConstantOfShape", [ints(3)], {"value": np.array([True])}, tag=f"opset{opset}_bool", opset=opset)
    add("ConstantOfShape", [ints(2, 0)], {"value": np.array([1.5], np.float32)}, tag=f"opset{opset}_empty",
        opset=opset)
    add("ConstantOfShape", [Const(np.zeros(0, np.int64))], {"value": np.array([-2.5], np.float64)},
        tag=f"opset{opset}_scalar", opset=opset)
for dtype in (np.int32, np.int64):
    for start, limit, delta in [(0, 10, 3), (10, -3, -3), (5, 5, 1), (5, 1, 2), (-7, 9, 4)]:
        add("Range", [Const(dtype(start)), Const(dtype(limit)), Const(dtype(delta))],
            tag=f"{np.dtype(dtype).name}_{start}_{limit}_{delta}", opset=11)
for dtype in (np.float32, np.float64):
    for start, limit, delta in [(0.5, 3.2, 0.7), (1.0, -2.0, -0.25), (2.0, 2.5, -1.0)]:
        add("Range", [Const(dtype(start)), Const(dtype(limit)), Const(dtype(delta))],
            tag=f"{np.dtype(dtype).name}_{start}_{limit}_{delta}", opset=11)
VALUES = np.array([-2.7, -1.5, -0.5, -0.0, 0.0, 0.4, 1.5, 2.5, 3.9, 100.2], np.float32)
CASTS = [
    (VALUES, "int32"), (VALUES, "int64"), (VALUES, "int8"), (VALUES, "bool"), (VALUES, "float64"),
    (VALUES, "float16"), (np.abs(VALUES), "uint8"), (VALUES > 0, "float32"), (VALUES > 0, "int64"),
    (np.array([-3, 0, 7, 2**31 - 1], np.int64), "int32"), (np.array([-3, 0, 7], np.int64), "float32"),
    (np.array([0, 2, -1], np.int32), "bool"), (VALUES.astype(np.float16), "float32"),
]
for opset in (6, 13, 19, 21):
    for x, to in CASTS:
        add("Cast", [x], {"to": onnx_type(to)}, tag=f"opset{opset}_{x.dtype.name}_to_{to}", opset=opset)
# The GPU keeps int64 as int32 and refuses such feeds by design: numpy only.
add("Cast", [np.array([-3, 2**40 + 5, -(2**33)], np.int64)], {"to": onnx_type("int32")}, tag="int64_past_int32",
    opset=13, backends=("numpy",))
add("Cast", [XSH], {"to": onnx_type("int64"), "saturate": 1}, tag="saturate", opset=19)
add("Cast", [np.zeros((2, 0, 3), np.float32)], {"to": onnx_type("int32")}, tag="empty", opset=13)
add("Cast", [np.float32(-3.7)], {"to": onnx_type("int64")}, tag="scalar", opset=13)
# Cast-1 names the type as a string; neither reference runs opset 1 Cast.
add("Cast", [VALUES], {"to": "INT32"}, tag="opset1_type_name", opset=1, reference="given",
    expected=[VALUES.astype(np.int32)])
add("CastLike", [XSH, Const(np.zeros(1, np.int32))], tag="to_int32", opset=15)
add("CastLike", [XSH > 0, np.zeros((2,), np.float64)], tag="bool_to_float64", opset=19)
for label, attrs in [("tensor_float", {"value": np.array([[1.5, 2]], np.float32)}),
                     ("tensor_int64", {"value": np.array([3, 4], np.int64)}),
                     ("value_float", {"value_float": 2.5}), ("value_floats", {"value_floats": [1.0, -2.0]}),
                     ("value_int", {"value_int": 7}), ("value_ints", {"value_ints": [1, 2, 3]})]:
    add("Constant", [], attrs, tag=label, opset=13)

# ------------------------------------------------------------------------- more element-wise
# Signed zeros, halves (round half to even), a float32 tie near 2^23, tiny values, NaN, infinities.
rng = np.random.default_rng(3)
XE = r(2, 5, 3, 7) * 3
SPECIAL = np.array([-3.5, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, 8388607.5, -1e-30, 1e-30, np.nan,
                    np.inf, -np.inf], np.float32)
for op in ["Sign", "Round", "Softsign", "Elu", "Selu", "Celu", "Mish", "ThresholdedRelu", "Shrink", "Sin", "Cos",
           "Atan", "Sinh", "Cosh", "Asinh"]:
    add(op, [XE], tag="nchw")
for op in ["Sign", "Round", "IsNaN", "IsInf", "Softsign", "Elu", "Selu", "Celu", "Mish", "ThresholdedRelu", "Shrink"]:
    add(op, [SPECIAL], tag="special")
# Domains and their edges (|x| = 1, acosh(1)); large arguments (range reduction, exp growth).
add("Asin", [np.linspace(-1, 1, 41, dtype=np.float32)], tag="domain")
add("Acos", [np.linspace(-1, 1, 41, dtype=np.float32).reshape(1, 41)], tag="domain")
add("Atanh", [np.linspace(-0.99, 0.99, 37, dtype=np.float32)], tag="domain")
add("Acosh", [np.concatenate([[1.0], np.geomspace(1.0001, 500, 30)]).astype(np.float32)], tag="domain")
add("Tan", [np.linspace(-1.5, 1.5, 31, dtype=np.float32)], tag="domain")
add("Sin", [np.linspace(-1000, 1000, 33, dtype=np.float32)], tag="large")
add("Sinh", [np.linspace(-20, 20, 41, dtype=np.float32)], tag="large")
add("Asinh", [np.concatenate([-np.geomspace(1e-3, 1e4, 12), np.geomspace(1e-3, 1e4, 12)]).astype(np.float32)],
    tag="wide")
for op, opset in [("Sin", 7), ("Cos", 22), ("Tan", 7), ("Asin", 22), ("Acos", 7), ("Atan", 22), ("Sinh", 9),
                  ("Cosh", 22), ("Asinh", 9), ("Atanh", 22)]:
    add(op, [np.linspace(-0.9, 0.9, 13, dtype=np.float32).reshape(13, 1)], tag=f"opset{opset}", opset=opset)
add("Acosh", [np.linspace(1, 9, 13, dtype=np.float32)], tag="opset9", opset=9)
for op, attrs, opset in [("Elu", {"alpha": 0.3}, 22), ("Selu", {"alpha": 2.0, "gamma": 0.5}, 22),
                         ("Celu", {"alpha": -0.7}, 12), ("ThresholdedRelu", {"alpha": -0.5}, 10),
                         ("Shrink", {"lambd": 1.0, "bias": 0.3}, 9), ("Mish", {}, 22), ("Softsign", {}, 1),
                         ("Round", {}, 22), ("Sign", {}, 9)]:
    tag = "_".join([f"opset{opset}", *(f"{k}{v}" for k, v in attrs.items())])
    add(op, [XE[:1, :, :2]], attrs, tag=tag, opset=opset)
add("IsNaN", [SPECIAL.reshape(4, 4)], tag="opset9", opset=9)
for negative, positive_, opset in ((1, 0, 10), (0, 1, 20), (0, 0, 20)):
    add("IsInf", [SPECIAL.reshape(2, 8)], {"detect_negative": negative, "detect_positive": positive_},
        tag=f"opset{opset}_negative{negative}_positive{positive_}", opset=opset)
add("Mish", [np.linspace(-30, 30, 61, dtype=np.float32)], tag="tails", rtol=1e-4, atol=1e-6)
add("Sin", [np.zeros((0, 3), np.float32)], tag="empty")
add("IsNaN", [np.zeros((2, 0), np.float32)], tag="empty")
add("Round", [np.float32(-2.5)], tag="scalar")
XEI = np.array([[-7, -2, -1, 0], [1, 2, 5, 100]], np.int32)
add("Sign", [XEI], tag="int32")
add("Sign", [XEI.astype(np.int64)], tag="int64")
add("Shrink", [XEI], {"lambd": 1.5, "bias": 2.0}, tag="int32")
add("Shrink", [XEI.astype(np.int64)], {"lambd": -1.5, "bias": 1.0}, tag="int64_negative_lambd")
# The GPU refuses a fractional bias on integers (it would truncate differently): a CPU fallback.
add("Shrink", [np.arange(-4, 5, dtype=np.int32)], {"lambd": 1.0, "bias": 0.5}, tag="int32_fractional_bias")

# Bitwise ops and shifts: the type limits, broadcasting, shift amounts at and past the width.
INT_LIMITS = np.array([-2 ** 31, -7, -1, 0, 1, 6, 2 ** 31 - 1], np.int32)
add("BitwiseNot", [INT_LIMITS.reshape(-1, 1)], tag="int32")
add("BitwiseNot", [INT_LIMITS.astype(np.int64)], tag="int64")
for dtype in (np.uint8, np.uint64):
    top = np.iinfo(dtype).max
    add("BitwiseNot", [np.array([0, 1, 7, top, top // 3], dtype)], tag=np.dtype(dtype).name)
add("BitwiseNot", [np.zeros((3, 0), np.int32)], tag="empty")
for op, broadcast_dtype, const_dtype in (("BitwiseAnd", np.int32, np.uint8), ("BitwiseOr", np.int64, np.uint32),
                                         ("BitwiseXor", np.uint8, np.int32)):
    for dtype, form in ((broadcast_dtype, "broadcast"), (const_dtype, "const")):
        info = np.iinfo(np.int32 if dtype == np.int64 else dtype)  # GPU int64 values stay within int32
        a = rng.integers(info.min, info.max, (3, 1, 5), dtype=dtype, endpoint=True)
        b = (rng.integers(info.min, info.max, (4, 1), dtype=dtype, endpoint=True) if form == "broadcast"
             else Const(np.array(info.max // 5, dtype)))
        add(op, [a, b], tag=f"{np.dtype(dtype).name}_{form}")
WIDE = rng.integers(-2 ** 63, 2 ** 63 - 1, (2, 3), dtype=np.int64)  # past int32: the CPU only
add("BitwiseXor", [WIDE, WIDE[:, ::-1].copy()], tag="int64_wide", backends=("numpy",))
for direction in ("LEFT", "RIGHT"):
    for dtype, shape in ((np.uint8, (6,)), (np.uint32, (2, 3, 1)), (np.uint64, (6,))):
        bits = np.iinfo(dtype).bits
        xb = np.array([0, 1, 3, np.iinfo(dtype).max, 1 << (bits - 1), 100], dtype).reshape(shape)
        yb = np.array([0, 1, bits - 1, bits, bits + 3, 2], dtype)
        yb = yb if len(shape) == 1 else yb[2:5]  # broadcast: amounts around the width
        add("BitShift", [xb, yb], {"direction": direction}, tag=f"{direction}_{np.dtype(dtype).name}", opset=11)
    # Signed shifts (opset 28): arithmetic right shifts; negative or too large amounts.
    xs = np.repeat(INT_LIMITS, 3)
    ys = np.tile(np.array([1, 31, 40], np.int32), 7)
    ys[::5] = -1
    add("BitShift", [xs, ys], {"direction": direction}, tag=f"{direction}_int32", opset=28)
    add("BitShift", [xs.astype(np.int64), (ys * 2).astype(np.int64)], {"direction": direction},
        tag=f"{direction}_int64", opset=28)

# Mean: onnx.reference accumulates into its first input, so it cannot broadcast that one: onnxruntime.
MEAN_INPUTS = [r(3, 1, 5), r(1, 4, 1), r(5), r()]
add("Mean", MEAN_INPUTS, tag="broadcast", opset=13, reference="ort")
add("Mean", [MEAN_INPUTS[0], Const(MEAN_INPUTS[1])], tag="opset8_const", opset=8, reference="ort")
add("Mean", [MEAN_INPUTS[0]], tag="one_input", opset=13)
add("Mean", [XE, XE * 0.5, -XE], tag="opset6", opset=6)
add("Mean", [XE.astype(np.float64), XE[:1].astype(np.float64)], tag="float64", opset=13)
add("Mean", [np.zeros((0, 3), np.float32), np.ones((3,), np.float32)], tag="empty", opset=13)

# --------------------------------------------------------------------------------- gather / scatter
# onnxruntime where onnx.reference lacks the form: negative GatherElements axes, indices smaller
# than the data, repeated scatter targets (applied in index order), float OneHot depth or indices.
rng = np.random.default_rng(4)


def idx(low: int, high: int, shape: tuple, dtype=np.int64) -> np.ndarray:
    return rng.integers(low, high, shape).astype(dtype)


for k, (shape, axis) in enumerate([((7,), 0), ((4, 5), -2), ((2, 3, 5), 1), ((2, 1, 3, 5), -1), ((2, 3, 1, 4), 2)]):
    dim, ishape = shape[axis], list(shape)
    ishape[axis] = 3
    tag = "x".join(map(str, shape)) + f"_axis{axis}"
    if k % 2:  # int64 data, constant int32 indices (opset 11)
        add("GatherElements", [r(*shape, dtype=np.int64), Const(idx(-dim, dim, ishape, np.int32))], {"axis": axis},
            tag=f"{tag}_int64", opset=11, reference="ort")
    else:
        add("GatherElements", [r(*shape), idx(-dim, dim, ishape)], {"axis": axis}, tag=tag, opset=13,
            reference="ort")
add("GatherElements", [r(4, 6, 3), idx(-6, 6, (2, 5, 1))], {"axis": 1}, tag="smaller_indices", reference="ort")
add("GatherElements", [r(3, 5, dtype=np.bool_), idx(0, 3, (2, 5))], {"axis": 0}, tag="bool", reference="ort")
add("GatherElements", [r(3, 4), np.zeros((3, 0), np.int64)], {"axis": 1}, tag="empty", opset=13)
XND = r(4, 3, 5, 2)
add("GatherND", [XND, idx(-4, 4, (6, 1))], tag="opset11_slices", opset=11)
add("GatherND", [XND, Const(np.array([[1, 2, -1, 0], [3, 0, 4, 1]], np.int64))], tag="opset11_elements", opset=11)
add("GatherND", [XND, idx(0, 3, (2, 3, 2), np.int32)], tag="int32", opset=13)
add("GatherND", [r(7, dtype=np.int64), idx(-7, 7, (5, 1))], tag="1d_int64", opset=13)
XBD = r(2, 3, 4, 5)
add("GatherND", [XBD, idx(-3, 3, (2, 3, 1))], {"batch_dims": 1}, tag="batch_dims1", opset=12)
add("GatherND", [XBD.astype(np.int64), Const(idx(0, 4, (2, 3, 2, 2, 2), np.int32))], {"batch_dims": 2},
    tag="batch_dims2_int64", opset=13)
add("GatherND", [r(3, 4), np.zeros((0, 1), np.int64)], tag="empty", opset=13)
for k, reduction in enumerate(("none", "add", "mul", "max", "min")):  # updates twice the axis: repeated targets
    if k % 2:
        add("ScatterElements", [r(6, 3, dtype=np.int64), Const(idx(0, 6, (9, 2), np.int32)), r(9, 2, dtype=np.int64)],
            {"axis": 0, "reduction": reduction}, tag=f"{reduction}_int64", reference="ort")
        points = np.stack(np.unravel_index(rng.permutation(60)[:11], (5, 3, 4)), -1).astype(np.int64)
        add("ScatterND", [r(5, 3, 4, dtype=np.int64), Const(points), r(11, dtype=np.int64)], {"reduction": reduction},
            tag=f"{reduction}_elements_int64", reference="ort")
    else:
        add("ScatterElements", [r(3, 4, 5), idx(-4, 4, (3, 8, 5)), r(3, 8, 5)], {"axis": 1, "reduction": reduction},
            tag=f"{reduction}_repeats", reference="ort")
        add("ScatterND", [r(5, 3, 4), idx(-5, 5, (7, 1)), r(7, 3, 4)], {"reduction": reduction},
            tag=f"{reduction}_row_repeats", reference="ort")
for shape, axis in [((7,), 0), ((4, 5), -1), ((2, 1, 3, 5), 2)]:
    dim, ishape = shape[axis], list(shape)
    ishape[axis] = 1  # one update per line: no repeats, so onnx.reference applies
    add("ScatterElements", [r(*shape), idx(-dim, dim, ishape), r(*ishape)], {"axis": axis},
        tag="x".join(map(str, shape)) + f"_axis{axis}", opset=13)
add("ScatterElements", [r(2, 3, 5, dtype=np.bool_), idx(0, 2, (1, 3, 5), np.int32), r(1, 3, 5, dtype=np.bool_)],
    tag="bool", opset=11, reference="ort")
add("ScatterElements", [r(4, 3), np.array([[1, 0, 2], [3, 1, 0]], np.int64), r(2, 3)], {"reduction": "mul"},
    tag="opset16", opset=16)
add("ScatterElements", [r(3, 4), np.zeros((0, 4), np.int64), r(0, 4)], tag="empty", opset=13)
add("ScatterND", [r(4, 3, 5), Const(np.array([[[0, 2]], [[3, -1]]], np.int64)), r(2, 1, 5)], tag="opset11",
    opset=11)
add("ScatterND", [r(9), np.array([[4], [-1], [0]], np.int64), r(3)], tag="opset13_1d", opset=13)
add("ScatterND", [r(4, 3, 5), np.array([[1, 0, 4]], np.int64), r(1)], tag="opset16_element", opset=16)
add("ScatterND", [r(2, 1, 3, 2, dtype=np.int64), Const(np.array([[1]], np.int32)), r(1, 1, 3, 2, dtype=np.int64)],
    tag="opset18_int64", opset=18)
add("ScatterND", [r(3, 4), np.zeros((0, 1), np.int64), r(0, 4)], tag="empty", opset=13)
add("Scatter", [r(4, 5), idx(-4, 4, (2, 5)), r(2, 5)], {"axis": 0}, tag="opset9", opset=9, reference="ort")
add("Scatter", [r(4, 5), Const(np.array([[1, 3]], np.int64)), r(1, 2)], tag="opset10_default_axis", opset=10,
    reference="ort")
ONE_HOT = np.array([[1, -1, 4], [0, 7, -5]], np.int64)  # 7 and -5 lie outside [-4, 4): all off
for axis in (-1, 1, -3):
    add("OneHot", [ONE_HOT, Const(np.array(4, np.int64)), np.array([-2, 3], np.float32)], {"axis": axis},
        tag=f"axis{axis}", opset=11)
add("OneHot", [idx(-3, 5, (3, 1, 2), np.int32), Const(np.array(5, np.int64)), np.array([0, 1], np.int64)],
    tag="int32_indices", opset=11)
add("OneHot", [idx(-3, 5, (3, 1, 2), np.int32), Const(np.array([5.0], np.float32)), np.array([0, 1], np.float32)],
    tag="float_depth", opset=11, reference="ort")
# The spec casts float indices to int64 (truncation: 0, 2, -1); onnxruntime 1.32 agrees, while
# onnxruntime 1.30 (on the device machine, 2026-12-04) gave other positions, so this case fails there.
add("OneHot", [np.array([0.7, 2.2, -1.5], np.float32), Const(np.array(3.0, np.float32)),
               np.array([0.5, 1.0], np.float32)], {"axis": 0}, tag="float_indices", opset=11, reference="ort")
add("OneHot", [idx(0, 6, (5,)), Const(np.array(6, np.int64)), np.array([1.0, 0.0], np.float32)], tag="opset9",
    opset=9)
add("OneHot", [idx(-3, 3, (2, 3)), np.array(3, np.int64), np.array([0, 1], np.float32)], tag="runtime_depth",
    opset=11)
add("OneHot", [np.zeros((2, 0), np.int64), Const(np.array(3, np.int64)), np.array([0, 1], np.float32)],
    tag="empty", opset=11)
for k in (0, 1, -2, 99):
    add("EyeLike", [r(4, 6)], {"k": k}, tag=f"k{k}", opset=9)
add("EyeLike", [r(5, 3, dtype=np.int64)], {"k": -1}, tag="int64", opset=22)
add("EyeLike", [r(3, 5)], {"dtype": onnx_type("int64")}, tag="dtype_int64", opset=9)
add("EyeLike", [r(4, 4, dtype=np.int32)], {"dtype": onnx_type("float32"), "k": -1}, tag="dtype_float32", opset=22)
add("EyeLike", [r(1, 1)], tag="1x1", opset=9)
for upper, ks in ((0, (1, -4, 9)), (1, (-1, 3, -9))):
    for k in ks:
        add("Trilu", [r(4, 6), Const(np.array(k, np.int64))], {"upper": upper}, tag=f"upper{upper}_k{k}", opset=14)
add("Trilu", [r(2, 3, 5, 3, dtype=np.int64), np.array(-1, np.int64)], {"upper": 0}, tag="runtime_k_int64", opset=14)
add("Trilu", [r(3, 5, 4), Const(np.array(2 ** 40, np.int64))], {"upper": 0}, tag="huge_k", opset=14)
add("Trilu", [r(3, 5, 4)], tag="default_k", opset=14)
add("Trilu", [r(2, 1, 5)], {"upper": 0}, tag="single_row", opset=14)
add("Trilu", [r(0, 3)], tag="empty", opset=14)
add("CumSum", [r(3, 7, 2), Const(np.array(1, np.int64))], tag="axis1", opset=14)
add("CumSum", [r(9), Const(np.array(0, np.int32))], {"exclusive": 1}, tag="exclusive_int32_axis", opset=11)
add("CumSum", [r(2, 3, 1, 5, dtype=np.int64), Const(np.array(-1, np.int64))], {"reverse": 1}, tag="reverse_int64",
    opset=14)
add("CumSum", [r(1, 4), Const(np.array([-2], np.int64))], {"exclusive": 1, "reverse": 1},
    tag="exclusive_reverse_axis_1d", opset=14, reference="ort")
add("CumSum", [r(4, 3, 5), np.array(-3, np.int64)], {"reverse": 1}, tag="runtime_axis", opset=14)
add("CumSum", [r(2, 5, 3, dtype=np.int32), np.array(2, np.int32)], {"exclusive": 1}, tag="runtime_axis_int32",
    opset=14)
add("CumSum", [r(0, 3), Const(np.array(0, np.int64))], {"exclusive": 1}, tag="empty", opset=14)
for k, (shape, batch_axis) in enumerate([((4, 3), 1), ((3, 5), 0), ((5, 2, 3), 1), ((2, 4, 3, 2), 0)]):
    time_axis = 1 - batch_axis
    lens = rng.integers(0, shape[time_axis] + 1, shape[batch_axis]).astype(np.int64)
    lens[0] = shape[time_axis]
    attrs, tag = {"batch_axis": batch_axis, "time_axis": time_axis}, "x".join(map(str, shape))
    if k % 2:
        add("ReverseSequence", [r(*shape, dtype=np.int64), Const(lens.astype(np.int32))], attrs, tag=f"{tag}_int64",
            opset=10)
    else:
        add("ReverseSequence", [r(*shape), lens], attrs, tag=tag, opset=10)
add("ReverseSequence", [r(0, 2), np.array([0, 0], np.int64)], tag="empty", opset=10, reference="ort")

# ------------------------------------------------------------------------------------------ select
# NonZero, Compress and NonMaxSuppression outputs have data-dependent shapes: constant deciding
# inputs fold at conversion, graph inputs run at the session's run-time sync point.
rng = np.random.default_rng(5)
DUPS = rng.integers(0, 4, (2, 5, 7)).astype(np.float32)  # few distinct values: ties, ordered by index
for axis, largest, k in ((-1, 1, 2), (1, 0, 5), (0, 1, 1), (-3, 0, 2)):
    add("TopK", [DUPS, ints(k)], {"axis": axis, "largest": largest}, tag=f"axis{axis}_largest{largest}_k{k}",
        outputs=2, opset=11)
XTK = rng.integers(-3, 3, (3, 6)).astype(np.int64)
add("TopK", [XTK, ints(4)], {"sorted": 0}, tag="unsorted_int64", outputs=2, opset=11)
add("TopK", [XTK, ints(3)], {"largest": 0, "axis": -2}, tag="smallest_int64", outputs=2, opset=11)
add("TopK", [DUPS], {"axis": 1, "k": 3}, tag="opset1_attribute", outputs=2, opset=1)
add("TopK", [DUPS, ints(3)], {"axis": -1}, tag="opset10", outputs=2, opset=10)
add("TopK", [DUPS, ints(2)], {"axis": 2, "largest": 0}, tag="opset24", outputs=2, opset=24)
add("TopK", [DUPS, ints(0)], {"axis": 1}, tag="k0", outputs=2, opset=11)
add("TopK", [rng.integers(-20, 20, (3, 301)).astype(np.float32), ints(7)], {"largest": 0}, tag="long_rows",
    outputs=2, opset=11)
for label, x in [("int64", np.array([[1, 0, 3], [0, 0, -2]], np.int64)), ("bool", r(4, 5, dtype=np.bool_)),
                 ("all_zero", np.zeros((3, 2), np.float32)), ("scalar", np.array(3.0, np.float32))]:
    add("NonZero", [Const(x)], tag=label, opset=13)
add("NonZero", [(rng.integers(0, 2, (2, 3, 5)) * r(2, 3, 5)).astype(np.float32)], tag="runtime_3d", opset=9)
for axis, label, condition in ((0, "short", [False, True]), (1, "random", rng.random(5) > 0.4),
                               (-1, "none", np.zeros(7, bool)), (None, "random", rng.random(DUPS.size) > 0.4)):
    attrs = {} if axis is None else {"axis": axis}
    add("Compress", [DUPS, Const(np.array(condition, bool))], attrs, tag=f"axis{axis}_{label}", opset=11)
XCO = r(3, 40)
add("Compress", [XCO, Const(np.arange(40) % 2 == 0)], {"axis": 1}, tag="many_runs", opset=11)
add("Compress", [XCO, Const(np.array([False, True, True]))], {"axis": 0}, tag="opset9", opset=9)
add("Compress", [Const(XCO), Const(np.arange(40) % 3 == 0)], {"axis": -1}, tag="folded", opset=11)
add("Compress", [DUPS, np.array([True, False, True, True, False])], {"axis": 1}, tag="runtime_condition", opset=11)
BOXES = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9], [0.0, 10.0, 1.0, 11.0],
                   [1.0, 10.1, 0.0, 11.1], [0.0, 100.0, 1.0, 101.0]]], np.float32)  # one with flipped corners
CENTERS = np.array([[[0.5, 0.5, 1.0, 1.0], [0.5, 0.6, 1.0, 1.0], [0.5, 0.4, 1.0, 1.0], [0.5, 10.5, 1.0, 1.0],
                     [0.5, 10.6, 1.0, 1.0], [0.5, 100.5, 1.0, 1.0]]], np.float32)
SCORES = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)
MANY_BOXES = rng.uniform(0, 10, (2, 9, 4)).astype(np.float32)
MANY_SCORES = rng.integers(0, 4, (2, 3, 9)).astype(np.float32) / 4  # many equal scores


def nms_inputs(boxes, scores, max_boxes=None, iou=None, score=None, *, const=True) -> list:
    wrap = Const if const else (lambda v: v)
    inputs = [wrap(boxes), wrap(scores), None if max_boxes is None else Const(np.array([max_boxes], np.int64)),
              None if iou is None else Const(np.array([iou], np.float32)),
              None if score is None else Const(np.array([score], np.float32))]
    while inputs[-1] is None:
        inputs.pop()
    return inputs


for label, args, attrs in [("score_threshold", (BOXES, SCORES, 3, 0.5, 0.4), {}),
                           ("iou0", (BOXES, SCORES, 10, 0.0), {}),
                           ("center_point_box", (CENTERS, SCORES, 3, 0.5), {"center_point_box": 1}),
                           ("equal_scores", (BOXES, np.full((1, 1, 6), 0.7, np.float32), 6, 0.3), {}),
                           ("batches_classes", (MANY_BOXES, MANY_SCORES, 4, 0.2, 0.2), {}),
                           ("no_boxes", (MANY_BOXES[:, :0], MANY_SCORES[:, :, :0], 5, 0.5), {})]:
    add("NonMaxSuppression", nms_inputs(*args), attrs, tag=label, opset=11)
# onnx.reference cannot run it without max_output_boxes_per_class: onnxruntime (nothing selected).
add("NonMaxSuppression", nms_inputs(BOXES, SCORES), tag="no_max", opset=11, reference="ort")
add("NonMaxSuppression", nms_inputs(BOXES, SCORES, 3, 0.5, const=False), tag="runtime", opset=10)
EINSUM = [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
          ("ij->i", [(3, 5)]), ("i,j->ij", [(3,), (5,)]), ("ii->i", [(4, 4)]), ("i,i->", [(7,), (7,)]),
          ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 2, 3)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
          ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
          ("ba", [(3, 4)]),
          ("ij,ij->", [(1, 3), (2, 3)])]  # broadcasts a contracted size-1 dim: stays Einsum (numpy's einsum)
for equation, shapes in EINSUM:
    tag = equation.replace("...", "E").replace(",", "_").replace("->", "_to_")
    add("Einsum", [r(*s) for s in shapes], {"equation": equation}, tag=tag, opset=12, **TOL)
add("Einsum", [rng.integers(-5, 5, (3, 4)).astype(np.int64), Const(rng.integers(-5, 5, (4, 2)).astype(np.int64))],
    {"equation": "ij,jk"}, tag="int64_implicit_output", opset=12)

# -------------------------------------------------------------------------------------------- grid
# onnxruntime for GridSample-16 (onnx.reference knows opset 20's mode names only) and for cubic
# with border padding (onnx.reference clamps the coordinate, not each tap as PyTorch and
# onnxruntime do, and as wgnn does).
rng = np.random.default_rng(6)
XGS = r(2, 5, 4, 7)
GRID = rng.uniform(-2.6, 2.6, (2, 3, 6, 2)).astype(np.float32)  # inside and well outside [-1, 1]
GRID[0, 0, :, 0] = [-1.0, 1.0, 0.0, 0.5, -0.5, -0.75]  # centres, edges, half-pixel ties
GRID[0, 0, :, 1] = [-1.0, 1.0, 0.0, 0.25, -0.25, 0.75]
XGS3, GRID3 = r(2, 5, 3, 4, 5), rng.uniform(-1.8, 1.8, (2, 2, 3, 4, 3)).astype(np.float32)
for m, (mode, old_mode) in enumerate({"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}.items()):
    tol = CUBIC_TOL if mode == "cubic" else TOL
    for p, padding in enumerate(("zeros", "border", "reflection")):
        reference = "ort" if (mode, padding) == ("cubic", "border") else "onnx"
        for align in (0, 1) if padding == "reflection" else ((m + p) % 2,):
            attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
            add("GridSample", [XGS, GRID], attrs, tag=f"{mode}_{padding}_align{align}", opset=20, reference=reference,
                **tol)
    # Volumetric (cubic with border padding has no 3-D reference: onnxruntime samples cubic in 2-D).
    padding = ("border", "reflection", "zeros")[m]
    add("GridSample", [XGS3, GRID3], {"mode": mode, "padding_mode": padding, "align_corners": m % 2},
        tag=f"{mode}_{padding}_3d", opset=20, **tol)
    add("GridSample", [XGS, GRID], {"mode": old_mode, "padding_mode": ("reflection", "zeros", "border")[m],
                                    "align_corners": 1}, tag=f"opset16_{old_mode}", opset=16, reference="ort", **tol)
    add("GridSample", [r(1, 9, 1, 5), rng.uniform(-1.2, 1.2, (1, 1, 1, 2)).astype(np.float32)],
        {"mode": mode, "padding_mode": ("zeros", "border", "reflection")[m]}, tag=f"{mode}_one_pixel", opset=20,
        **tol)
# 1-D sampling: the GPU kernel samples 2-D and 3-D images only (a CPU fallback by design).
add("GridSample", [r(2, 3, 6), rng.uniform(-1.5, 1.5, (2, 4, 1)).astype(np.float32)],
    {"mode": "linear", "padding_mode": "reflection"}, tag="linear_1d", opset=20, **TOL)
add("GridSample", [XGS, GRID], tag="opset16_defaults", opset=16, reference="ort", **TOL)
add("GridSample", [XGS, GRID[:, :0]], tag="empty_grid", opset=20, reference="ort")  # the reference returns no array
add("AffineGrid", [r(2, 2, 3), ints(2, 5, 3, 7)], {"align_corners": 0}, tag="2d", opset=20, **TOL)
add("AffineGrid", [r(3, 3, 4), ints(3, 1, 2, 5, 3)], {"align_corners": 1}, tag="3d_align_corners", opset=20, **TOL)
add("AffineGrid", [r(1, 2, 3), ints(1, 2, 1, 6)], {"align_corners": 1}, tag="one_row", opset=20, **TOL)
add("AffineGrid", [Const(r(1, 2, 3)), ints(1, 2, 4, 1)], tag="one_column_folded", opset=20, **TOL)
for k, (n, c, image, block, attrs) in enumerate([
        (2, 3, [5, 6], [2, 2], {}),
        (1, 5, [5, 6], [2, 3], {"strides": [2, 2], "pads": [1, 0, 1, 1], "dilations": [2, 1]}),
        (2, 2, [7, 4], [3, 1], {"strides": [1, 2], "pads": [2, 1, 0, 1]}),
        (1, 2, [9], [3], {"strides": [2], "dilations": [2], "pads": [1, 2]}),
        (1, 2, [3, 4, 5], [2, 2, 3], {"pads": [1, 0, 1, 0, 1, 1]})]):
    rank = len(image)
    pads = attrs.get("pads", [0] * 2 * rank)
    strides, dilations = attrs.get("strides", [1] * rank), attrs.get("dilations", [1] * rank)
    count = int(np.prod([(image[i] + pads[i] + pads[i + rank] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
                         for i in range(rank)]))
    add("Col2Im", [r(n, c * int(np.prod(block)), count), ints(*image), ints(*block)], attrs,
        tag=f"{rank}d_" + "x".join(map(str, block)) + f"_{k}", **TOL)

# ------------------------------------------------------------------------------- more normalisations
# onnxruntime where onnx.reference is wrong: LpNormalization p=1 (it sums x, not |x|), LRN (it
# runs across the batch axis; right only when N == C, and onnxruntime takes odd sizes only).
rng = np.random.default_rng(7)
XN = r(2, 5, 3, 7)
for axis in (1, -2):
    add("LpNormalization", [XN], {"axis": axis, "p": 2}, tag=f"l2_axis{axis}", **TOL)
for axis in (0, -1):
    add("LpNormalization", [XN[0]], {"axis": axis, "p": 1}, tag=f"l1_axis{axis}", reference="ort", **TOL)
XZR = r(4, 6)
XZR[1] = 0  # a zero norm gives zeros, not NaN
add("LpNormalization", [XZR], tag="opset1_zero_row", opset=1, **TOL)
add("LpNormalization", [XZR], {"axis": 0, "p": 1}, tag="opset22_l1_zero_row", opset=22, reference="ort", **TOL)
add("LpNormalization", [np.zeros((0, 5), np.float32)], {"axis": 1}, tag="empty", **TOL)
add("MeanVarianceNormalization", [XN], tag="opset9", opset=9, **TOL)
for axes in ([1, 3], [-1], [0, 1, 2, 3]):
    add("MeanVarianceNormalization", [XN], {"axes": axes}, tag="axes_" + axes_tag(axes), opset=13, **TOL)
add("MeanVarianceNormalization", [r(2, 3, 2, 3, 4)], {"axes": [0, 2, 4]}, tag="5d", opset=13, **TOL)
XCR = r(2, 3, 4, 5)
XCR[:, 1] = 2.5  # zero variance: (x - mean) / (0 + epsilon) = 0
add("MeanVarianceNormalization", [XCR], tag="constant_channel", opset=13, **TOL)
for shape, groups in [((2, 6, 3, 5), 3), ((2, 6, 3, 5), 6), ((3, 5, 7), 5), ((1, 4, 2, 3, 3), 2)]:
    add("GroupNormalization", [r(*shape), Const(r(shape[1])), Const(r(shape[1]))], {"num_groups": groups},
        tag="x".join(map(str, shape)) + f"_groups{groups}", opset=21, **TOL)
add("GroupNormalization", [r(2, 6, 4, 4), r(6), r(6)], {"num_groups": 2, "epsilon": 1e-2}, tag="runtime_params",
    opset=21, **TOL)
add("GroupNormalization", [r(2, 6, 5).astype(np.float16), Const(r(6).astype(np.float16)),
                           Const(r(6).astype(np.float16))], {"num_groups": 3}, tag="float16", opset=21,
    reference="ort", rtol=2e-3, atol=2e-3)
# Both references fail on an empty batch: the output is the empty input.
add("GroupNormalization", [np.zeros((0, 6, 3), np.float32), Const(r(6)), Const(r(6))], {"num_groups": 2},
    tag="empty", opset=21, reference="given", expected=[np.zeros((0, 6, 3), np.float32)])
for axis in (0, 2, -1):
    add("RMSNormalization", [XN, Const(r(*XN.shape[axis:]))], {"axis": axis}, tag=f"axis{axis}", opset=23, **TOL)
XRM = r(3, 5, 6)
add("RMSNormalization", [XRM, Const(r(1, 6))], {"axis": 1, "epsilon": 1e-2}, tag="broadcast_scale", opset=23, **TOL)
add("RMSNormalization", [XRM, r(6)], tag="runtime_scale", opset=23, **TOL)
add("RMSNormalization", [XRM.astype(np.float16), Const(r(6).astype(np.float16))], tag="float16", opset=23,
    reference="ort", rtol=2e-3, atol=2e-3)
# float64 statistics (stash_type 11): the GPU keeps float32 statistics and refuses (a CPU fallback).
add("RMSNormalization", [XRM, Const(r(6))], {"stash_type": 11}, tag="stash_float64", opset=23, reference="ort",
    **TOL)
for size in (1, 5):
    add("LRN", [XN], {"size": size, "alpha": 0.02, "beta": 0.6, "bias": 1.5}, tag=f"size{size}", reference="ort",
        **TOL)
add("LRN", [r(1, 6, 4, 4)], {"size": 3}, tag="opset1_defaults", opset=1, reference="ort", **TOL)
add("LRN", [r(4, 4, 3, 5)], {"size": 4, "alpha": 0.05, "beta": 0.5, "bias": 2.0}, tag="even_size", **TOL)


def lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """LRN by the ONNX formula (across channels, for any rank): neither reference runs ranks other
    than 4. The window covers channels c - floor((size-1)/2) .. c + ceil((size-1)/2)."""
    squares, x2, c = np.zeros(x.shape), x.astype(np.float64) ** 2, x.shape[1]
    for offset in range(-((size - 1) // 2), -(-(size - 1) // 2) + 1):
        squares[:, max(0, -offset):c - max(0, offset)] += x2[:, max(0, offset):c + min(0, offset)]
    return (x / (bias + alpha / size * squares) ** beta).astype(x.dtype)


for shape in ((2, 7, 5), (2, 5, 3, 2, 3), (3, 6)):
    x = r(*shape)
    add("LRN", [x], {"size": 3, "alpha": 0.1, "beta": 0.75, "bias": 1.0}, tag=f"rank{len(shape)}", reference="given",
        expected=[lrn(x, 3, 0.1, 0.75, 1.0)], **TOL)
add("LRN", [XN], {"size": 2, "alpha": 0.05, "beta": 0.5, "bias": 2.0}, tag="even_size_n_not_c", reference="given",
    expected=[lrn(XN, 2, 0.05, 0.5, 2.0)], **TOL)

# ------------------------------------------------------------------------- LpPool, MaxPool indices, MaxUnpool
# onnxruntime for MaxPool's Indices (onnx.reference numbers them wrongly when strides and dilations
# are all 1) and for MaxUnpool with output_shape: the indices address the output_shape tensor, as in
# onnxruntime and PyTorch (onnx.reference scatters into the inferred shape and pads that at the end).
rng = np.random.default_rng(8)
XLP = r(2, 5, 7, 6)
LP_WINDOWS = [
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]},  # asymmetric pads
    {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1},  # ceil window in padding
    {"kernel_shape": [2, 3], "strides": [2, 1], "dilations": [2, 1], "pads": [1, 1, 0, 1]},
    {"kernel_shape": [2, 2]},  # strides and dilations 1
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
]
for w, window in enumerate(LP_WINDOWS):
    p, storage_order = w % 3 + 1, w % 2
    add("LpPool", [XLP], {**window, "p": p}, tag=f"window{w}_p{p}", reference="ort", **TOL)
    add("MaxPool", [XLP], {**window, "storage_order": storage_order}, tag=f"indices_window{w}_order{storage_order}",
        outputs=2, reference="ort", **TOL)
XLO = r(1, 6, 7, 5)
add("LpPool", [XLO], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "p": 2.0}, tag="opset1_float_p", opset=1, **TOL)
add("LpPool", [XLO], {"kernel_shape": [2, 3], "strides": [2, 1], "p": 3}, tag="opset2", opset=2, **TOL)
add("LpPool", [XLO], {"kernel_shape": [2, 2], "dilations": [2, 2], "p": 2}, tag="opset18_dilations", opset=18, **TOL)
add("LpPool", [XLO], {"kernel_shape": [2, 2], "strides": [2, 2], "p": 4}, tag="opset22", opset=22, **TOL)
add("LpPool", [r(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "pads": [2, 1], "ceil_mode": 1, "p": 2}, tag="1d",
    reference="ort", **TOL)
XL3 = r(1, 3, 5, 4, 6)
WINDOW3 = {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}
add("LpPool", [XL3], {**WINDOW3, "p": 3}, tag="3d", reference="ort", **TOL)
add("LpPool", [np.zeros((0, 3, 5, 5), np.float32)], {"kernel_shape": [2, 2], "p": 2}, tag="empty", reference="ort")
add("MaxPool", [r(1, 3, 6, 5)], {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "storage_order": 1},
    tag="indices_opset8", outputs=2, opset=8, reference="ort", **TOL)
add("MaxPool", [rng.integers(0, 3, (2, 3, 6, 7)).astype(np.float32)],  # ties: the first in tap order wins
    {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [1, 1, 1, 1], "storage_order": 1}, tag="indices_ties",
    outputs=2, opset=12, reference="ort")
add("MaxPool", [XL3], {**WINDOW3, "storage_order": 1}, tag="indices_3d", outputs=2, reference="ort", **TOL)
add("MaxPool", [r(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "pads": [2, 1], "ceil_mode": 1},
    tag="indices_1d", outputs=2, reference="ort", **TOL)


def unpool_indices(pooled_shape: tuple, image: tuple) -> np.ndarray:
    """Distinct positions of an (N, C, *image) tensor for each pooled value (flat indices over the
    whole tensor, as MaxPool's Indices), drawn at random: MaxUnpool scatters wherever they say."""
    n, c, spots = pooled_shape[0], pooled_shape[1], int(np.prod(pooled_shape[2:]))
    size = int(np.prod(image))
    chosen = np.argsort(rng.random((n, c, size)), axis=-1)[..., :spots]
    planes = np.arange(n * c).reshape(n, c, 1) * size
    return (chosen + planes).reshape(pooled_shape).astype(np.int64)


# 5x5 pooled to 3x3 by a 3x3 window, stride 2, pads 1: unpooled back to 5x5.
add("MaxUnpool", [r(2, 5, 3, 3), unpool_indices((2, 5, 3, 3), (5, 5))],
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, tag="opset9", opset=9)
add("MaxUnpool", [r(2, 5, 3, 3), Const(unpool_indices((2, 5, 3, 3), (6, 6)))],
    {"kernel_shape": [2, 2], "strides": [2, 2]}, tag="opset22_const_indices", opset=22)
# Odd sizes: pooling forgot the last row and column, output_shape brings them back.
add("MaxUnpool", [r(2, 3, 3, 2), unpool_indices((2, 3, 3, 2), (7, 5)), ints(2, 3, 7, 5)],
    {"kernel_shape": [2, 2], "strides": [2, 2]}, tag="output_shape", opset=11, reference="ort")
add("MaxUnpool", [r(2, 3, 3, 2), unpool_indices((2, 3, 3, 2), (7, 5)), np.array([2, 3, 7, 5], np.int64)],
    {"kernel_shape": [2, 2], "strides": [2, 2]}, tag="runtime_output_shape", opset=11, reference="ort")
add("MaxUnpool", [r(2, 5, 5), unpool_indices((2, 5, 5), (9,))], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]},
    tag="1d", reference="ort")
add("MaxUnpool", [r(1, 3, 2, 2, 3), unpool_indices((1, 3, 2, 2, 3), (4, 5, 6)), ints(1, 3, 4, 5, 6)],
    {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, tag="3d_output_shape", reference="ort")

# ------------------------------------------------------------------------------------- quantization
# onnxruntime for DequantizeLinear before opset 19 (onnx.reference lacks it) and where the reference
# casts NaN. QuantizeLinear's integer outputs are no GPU tensor type: a CPU fallback by design.
rng = np.random.default_rng(9)
TIES = np.array([0.0, 0.5, 1.5, 2.5, -2.5, 3.5, -3.5, -0.5, 0.49, 1000.0, -1000.0, 127.5, -128.5], np.float32)
XQ = r(2, 3, 5) * 4


def q8(*shape, dtype=np.int8) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def quant_scale(*shape) -> np.ndarray:
    return (rng.random(shape) * 0.2 + 0.05).astype(np.float32)


for opset in (10, 13, 19, 21):  # ties round half to even, +-1000 saturate
    add("QuantizeLinear", [TIES, Const(np.float32(1.0)), Const(np.int8(0))], tag=f"opset{opset}_ties", opset=opset)
add("QuantizeLinear", [TIES, Const(np.float32(0.5)), Const(np.uint8(128))], tag="uint8", opset=13)
add("QuantizeLinear", [XQ, np.float32(0.1), np.uint8(100)], tag="runtime_params", opset=10)
add("QuantizeLinear", [XQ, Const(np.float32(0.05))], tag="no_zero_point", opset=19)
for axis, opset, zero in ((1, 13, np.int8), (-2, 19, np.uint8), (0, 21, None), (-1, 13, np.int8)):
    c = XQ.shape[axis]
    zero_point = [] if zero is None else [Const(q8(c, dtype=zero))]
    add("QuantizeLinear", [XQ, Const(quant_scale(c)), *zero_point], {"axis": axis}, tag=f"axis{axis}_opset{opset}",
        opset=opset)
    add("DequantizeLinear", [q8(2, 3, 5, dtype=zero or np.uint8), Const(quant_scale(c)), *zero_point],
        {"axis": axis}, tag=f"axis{axis}_opset{opset}", opset=opset, reference="ort" if opset < 19 else "onnx")
add("QuantizeLinear", [XQ, Const(np.array([0.1], np.float32)), Const(np.array([-3], np.int8))], {"axis": 2},
    tag="one_element_scale", opset=13)
add("QuantizeLinear", [XQ, Const(np.array([0.1], np.float32)), Const(np.int8(-3))], tag="scale_1_zero_0d", opset=19)
add("QuantizeLinear", [XQ.astype(np.float16), Const(np.float16(0.125)), Const(np.int8(1))], {"saturate": 1},
    tag="float16", opset=19)
XQW = r(3, 7) * 3000
add("QuantizeLinear", [XQW, Const(np.float32(0.25)), Const(np.array(100, np.int16))], tag="int16", opset=21)
add("QuantizeLinear", [XQW, Const(np.float32(0.01))], {"output_dtype": onnx_type("uint16")},
    tag="uint16_output_dtype", opset=21)
add("QuantizeLinear", [TIES, Const(np.float32(1.0))], {"output_dtype": onnx_type("int8")}, tag="int8_output_dtype",
    opset=21)
for axis, block in ((1, 2), (-1, 4), (0, 3)):  # a partial last block where block does not divide
    shape = [4, 6]
    shape[axis] = -(-shape[axis] // block)
    attrs = {"axis": axis, "block_size": block}
    add("QuantizeLinear", [r(4, 6) * 3, Const(quant_scale(*shape)), *([Const(q8(*shape))] if block != 4 else [])],
        attrs, tag=f"blocked_axis{axis}_block{block}", opset=21)
    add("DequantizeLinear", [q8(4, 6), Const(quant_scale(*shape)), *([Const(q8(*shape))] if block != 3 else [])],
        attrs, tag=f"blocked_axis{axis}_block{block}", opset=21)
add("QuantizeLinear", [np.array([[-700, -3, 0, 5, 1000]], np.int32), Const(np.float32(2.0)), Const(np.int8(1))],
    tag="int32_input", opset=13)
add("QuantizeLinear", [np.array([np.nan, np.inf, -np.inf, 3.0], np.float32), Const(np.float32(1.0)),
                       Const(np.uint8(10))], tag="nan_infinity", opset=19, reference="ort")
add("QuantizeLinear", [np.zeros((0, 3), np.float32), Const(np.float32(0.1)), Const(np.int8(2))], tag="empty",
    opset=13)
add("QuantizeLinear", [np.array(-2.5, np.float32), Const(np.float32(1.0)), Const(np.int8(2))], tag="scalar",
    opset=13)
add("DequantizeLinear", [q8(2, 3, 5), Const(np.float32(0.25)), Const(np.int8(-3))], tag="opset10", opset=10,
    reference="ort")
add("DequantizeLinear", [q8(2, 3, 5, dtype=np.uint8), np.float32(0.5), np.uint8(128)], tag="opset13_runtime_params",
    opset=13, reference="ort")
add("DequantizeLinear", [q8(7, dtype=np.uint8), Const(np.float32(0.1))], tag="opset19_no_zero_point", opset=19)
add("DequantizeLinear", [q8(0, 3), Const(np.float32(0.1)), Const(np.int8(1))], tag="empty", opset=21)
add("DequantizeLinear", [np.array([-70000, -1, 0, 123456], np.int32), Const(np.float32(1e-3))], tag="int32",
    opset=19)
add("DequantizeLinear", [q8(3, 7, dtype=np.uint16), Const(np.float32(0.01)), Const(np.array(995, np.uint16))],
    tag="uint16", opset=21)
add("DequantizeLinear", [q8(3, 4), Const(np.float16(0.0625)), Const(np.int8(2))], tag="float16_scale", opset=19)
add("DequantizeLinear", [q8(2, 3), Const(np.array([0.1], np.float32)), Const(np.int8(-3))], tag="scale_1_zero_0d",
    opset=19)
add("DequantizeLinear", [q8(3, 4), Const(np.float32(0.125)), Const(np.int8(2))],
    {"output_dtype": onnx_type("float16")}, tag="opset23_output_dtype", opset=23)
add("DequantizeLinear", [np.array(-7, np.int8), Const(np.float32(0.5)), Const(np.int8(2))], tag="scalar", opset=19)

# -------------------------------------------------------------------------------------- recurrent
# onnx.reference for what it implements (directions, initial states, layout 1, peepholes, GRU
# linear_before_reset, W/R/B fed at run time); onnxruntime where the reference ignores the
# attribute or input (sequence_lens, clip, activations, input_forget).
rng = np.random.default_rng(10)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
RNN_OUTPUTS = {"RNN": 2, "GRU": 2, "LSTM": 3}


def rnn_inputs(op: str, direction: str = "forward", *, steps: int = 4, batch: int = 3, size: int = 3,
               hidden: int = 5, layout: int = 0, lens=None, initial: bool = True, bias: bool = True,
               peepholes: bool = False, const: bool = True, weight_scale: float = 0.5,
               initial_scale: float = 0.5) -> list:
    """X, W, R, B, sequence_lens, initial_h (, initial_c, P) of an ONNX recurrent node."""
    dirs, gh = 2 if direction == "bidirectional" else 1, GATES[op] * hidden
    wrap = Const if const else (lambda v: v)
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    inputs = [r(steps, batch, size) * 0.5 if layout == 0 else r(batch, steps, size) * 0.5,
              wrap(r(dirs, gh, size) * weight_scale), wrap(r(dirs, gh, hidden) * 0.5),
              wrap(r(dirs, 2 * gh) * 0.5) if bias else None, None if lens is None else np.asarray(lens, np.int32),
              r(*state) * initial_scale if initial else None]
    if op == "LSTM":
        inputs += [r(*state) * initial_scale if initial else None,
                   Const(r(dirs, 3 * hidden) * 0.5) if peepholes else None]
    while inputs[-1] is None:
        inputs.pop()
    return inputs


def add_rnn(op: str, inputs: list, attrs: dict, *, tag: str, opset: int = 14, reference: str = "onnx") -> None:
    hidden = (inputs[2].value if isinstance(inputs[2], Const) else inputs[2]).shape[-1]
    add(op, inputs, {"hidden_size": hidden, **attrs}, tag=tag, outputs=RNN_OUTPUTS[op], opset=opset,
        reference=reference, **TOL)


RNN_ACTIVATIONS = {  # alphas/betas go, in order, to the functions that take one
    "LSTM": {"direction": "reverse", "activations": ["HardSigmoid", "Elu", "Softsign"], "activation_alpha": [0.3, 0.7],
             "activation_beta": [0.4]},
    "GRU": {"direction": "bidirectional", "activations": ["HardSigmoid", "LeakyRelu", "sigmoid", "thresholdedrelu"],
            "activation_alpha": [0.3, 0.1, 0.2, 0.9], "activation_beta": [0.6, 0.5]},
    "RNN": {"direction": "bidirectional", "activations": ["Affine", "ScaledTanh"], "activation_alpha": [0.8, 1.2],
            "activation_beta": [0.1, 0.6]},
}
for op in GATES:
    add_rnn(op, rnn_inputs(op, batch=1, initial=False), {}, tag="forward_batch1")
    add_rnn(op, rnn_inputs(op, "reverse", steps=5, hidden=7), {"direction": "reverse"}, tag="reverse_hidden7")
    add_rnn(op, rnn_inputs(op, "bidirectional", batch=2, hidden=4, bias=False, steps=1),
            {"direction": "bidirectional"}, tag="bidirectional_one_step")
    add_rnn(op, rnn_inputs(op, "bidirectional", steps=5, lens=[5, 2, 3], hidden=7), {"direction": "bidirectional"},
            tag="bidirectional_lens", reference="ort")
    add_rnn(op, rnn_inputs(op, "reverse", lens=[1, 4, 0], peepholes=True), {"direction": "reverse"},
            tag="reverse_lens_zero", reference="ort")  # onnxruntime: zero states for an empty sequence
    add_rnn(op, rnn_inputs(op, "bidirectional", layout=1, steps=3, peepholes=True),
            {"direction": "bidirectional", "layout": 1}, tag="bidirectional_layout1")
    add_rnn(op, rnn_inputs(op, "bidirectional", const=False, hidden=6), {"direction": "bidirectional"},
            tag="runtime_weights", opset=7)
    add_rnn(op, rnn_inputs(op, "reverse"), {"direction": "reverse"}, tag="opset22", opset=22)
    # Large weights push the gate inputs past the clip; a large initial cell must not be clipped.
    add_rnn(op, rnn_inputs(op, "bidirectional", weight_scale=2.0, initial_scale=3.0),
            {"direction": "bidirectional", "clip": 0.7}, tag="clip", reference="ort")
    add_rnn(op, rnn_inputs(op, RNN_ACTIVATIONS[op]["direction"], lens=[4, 3, 1], peepholes=True),
            RNN_ACTIVATIONS[op], tag="activations", reference="ort")
    add_rnn(op, rnn_inputs(op, "forward", steps=3, batch=2, size=2, hidden=70, lens=[3, 2]), {}, tag="hidden70",
            reference="ort")
add_rnn("LSTM", rnn_inputs("LSTM", "bidirectional", peepholes=True, lens=[4, 1, 3]),
        {"direction": "bidirectional", "input_forget": 1}, tag="input_forget", reference="ort")
add_rnn("LSTM", rnn_inputs("LSTM", "forward", peepholes=True, hidden=7), {}, tag="peepholes")
for linear_before_reset in (0, 1):
    add_rnn("GRU", rnn_inputs("GRU", "bidirectional", hidden=7),
            {"direction": "bidirectional", "linear_before_reset": linear_before_reset},
            tag=f"linear_before_reset{linear_before_reset}")
add_rnn("GRU", rnn_inputs("GRU", "forward", lens=[2, 4, 3]), {"linear_before_reset": 1},
        tag="linear_before_reset1_lens", reference="ort")

# ------------------------------------------------------------------------------------ control flow
# Graph attributes are onnx GraphProtos (helper.make_node takes them as they are). Subgraphs read
# Outer graph inputs (in<i>) by name, as outer-scope captures.
rng = np.random.default_rng(11)


def value(name: str, shape, dtype: str = "float32"):
    return helper.make_tensor_value_info(name, onnx_type(dtype), shape)


def subgraph(nodes: list, name: str, inputs: list, outputs: list, initializers: dict | None = None):
    return helper.make_graph(nodes, name, inputs, outputs,
                             [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])


XIF = r(2, 5)
# then: in1 + in1 and in1 itself passed through; else: -in1 and |-in1|: two outputs, outer captures.
THEN = subgraph([helper.make_node("Add", ["in1", "in1"], ["t0"]), helper.make_node("Identity", ["in1"], ["t1"])],
                "then", [], [value("t0", [2, 5]), value("t1", [2, 5])])
ELSE = subgraph([helper.make_node("Neg", ["in1"], ["e0"]), helper.make_node("Abs", ["e0"], ["e1"])], "else", [],
                [value("e0", [2, 5]), value("e1", [2, 5])])
for condition in (True, False):
    add("If", [np.array(condition), Outer(XIF)], {"then_branch": THEN, "else_branch": ELSE},
        tag=f"runtime_{condition}", outputs=2, opset=13)
    add("If", [Const(np.array(condition)), Outer(XIF)], {"then_branch": THEN, "else_branch": ELSE},
        tag=f"const_{condition}", outputs=2, opset=17)
# Nested: the inner If reads the outer graph's second condition.
INNER_THEN = subgraph([helper.make_node("Sub", ["in1", "in1"], ["it"])], "inner_then", [], [value("it", [2, 5])])
INNER_ELSE = subgraph([helper.make_node("Mul", ["in1", "three"], ["ie"])], "inner_else", [], [value("ie", [2, 5])],
                      {"three": np.float32(3)})
NESTED = subgraph([helper.make_node("If", ["in2"], ["nested"], then_branch=INNER_THEN, else_branch=INNER_ELSE)],
                  "nested_then", [], [value("nested", [2, 5])])
PLAIN = subgraph([helper.make_node("Relu", ["in1"], ["plain"])], "plain_else", [], [value("plain", [2, 5])])
for c1, c2 in ((True, True), (True, False)):
    add("If", [np.array(c1), Outer(XIF), Outer(np.array(c2))], {"then_branch": NESTED, "else_branch": PLAIN},
        tag=f"nested_{c1}_{c2}", opset=16)


def loop_body(with_condition: bool):
    """v = v * 0.5 + in3 (an outer capture) each iteration, scan output v + i; with_condition: stop
    once sum(v) passes in4 (also captured)."""
    nodes = [helper.make_node("Mul", ["v_in", "half"], ["halved"]),
             helper.make_node("Add", ["halved", "in3"], ["v_out"]),
             helper.make_node("Cast", ["i"], ["i_float"], to=onnx_type("float32")),
             helper.make_node("Add", ["v_out", "i_float"], ["scan"])]
    if with_condition:
        nodes += [helper.make_node("ReduceSum", ["v_out"], ["total"], keepdims=0),
                  helper.make_node("Less", ["total", "in4"], ["cond_out"])]
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    return subgraph(nodes, "body", [value("i", [], "int64"), value("cond_in", [], "bool"), value("v_in", [3])],
                    [value("cond_out", [], "bool"), value("v_out", [3]), value("scan", [3])], {"half": np.float32(0.5)})


XLOOP, V0 = Outer(r(3)), r(3)
POSITIVE_STEP = Outer(np.abs(XLOOP.value) + 0.5)
# onnx.reference cannot stack zero iterations' scan outputs: onnxruntime for those.
for trips in (0, 4):
    add("Loop", [np.array(trips, np.int64), np.array(True), V0, XLOOP], {"body": loop_body(False)},
        tag=f"trips{trips}", outputs=2, opset=13, reference="ort" if trips == 0 else "onnx")
add("Loop", [Const(np.array(3, np.int64)), Const(np.array(True)), V0, XLOOP], {"body": loop_body(False)},
    tag="const_trips", outputs=2, opset=16)
add("Loop", [np.array(100, np.int64), np.array(True), np.zeros(3, np.float32), POSITIVE_STEP,
             Outer(np.float32(6.0))], {"body": loop_body(True)}, tag="body_condition", outputs=2, opset=13)
add("Loop", [None, np.array(True), np.zeros(3, np.float32), POSITIVE_STEP, Outer(np.float32(4.0))],
    {"body": loop_body(True)}, tag="no_trip_count", outputs=2, opset=13)
add("Loop", [np.array(5, np.int64), np.array(False), V0, XLOOP], {"body": loop_body(False)}, tag="false_at_start",
    outputs=2, opset=13, reference="ort")


def scan_body(states: int = 1):
    """Running sums of the scanned rows (one state), or sums and products (two states)."""
    nodes = [helper.make_node("Add", ["sum_in", "row"], ["sum_out"]),
             helper.make_node("Identity", ["sum_out"], ["out"])]
    inputs, outputs = [value("sum_in", [3])], [value("sum_out", [3])]
    if states == 2:
        nodes.append(helper.make_node("Mul", ["prod_in", "row"], ["prod_out"]))
        inputs.append(value("prod_in", [3]))
        outputs.append(value("prod_out", [3]))
    return subgraph(nodes, "body", [*inputs, value("row", [3])], [*outputs, value("out", [3])])


XSCAN = r(4, 3)
add("Scan", [np.zeros(3, np.float32), XSCAN], {"body": scan_body(), "num_scan_inputs": 1}, tag="cumulative_sum",
    outputs=2, opset=11)
add("Scan", [np.ones(3, np.float32), np.ones(3, np.float32), XSCAN], {"body": scan_body(2), "num_scan_inputs": 1},
    tag="two_states", outputs=3, opset=16)
# Other scan axes (with reversed directions): onnx.reference scans axis 0 only.
for directions in ((1, 0), (0, 1)):
    add("Scan", [np.zeros(3, np.float32), XSCAN.T.copy()],
        {"body": scan_body(), "num_scan_inputs": 1, "scan_input_directions": [directions[0]],
         "scan_output_directions": [directions[1]], "scan_input_axes": [1], "scan_output_axes": [-1]},
        tag=f"axis1_directions{directions[0]}{directions[1]}", outputs=2, opset=11, reference="ort")
