"""wgnn's own op case library, as data: one-node ONNX cases on edge shapes for every op type the
converter claims (channels not a multiple of 4, batch > 1, broadcasting, size-1 and empty dims,
padding, every opset form whose inputs or attributes changed).

    from wgnn.tools.conform.cases import CASES, Const
    case = CASES[0]   # OpCase(name, op_type, inputs, attrs, opset, outputs, reference, ...)

An input is an array (a graph input fed at run time), `Const(array)` (an initializer) or None (an
absent optional input). An attribute value that is a numpy array is a tensor attribute. Expected
outputs come from `reference`: "onnx" (onnx.reference), "ort" (onnxruntime, where the reference is
wrong or cannot run the form) or "given" (`expected`, where neither runs it). `reference_attrs`
makes the reference run the op with other attributes (an equivalent explicit form). The data is
built once at import from fixed seeds, so every run sees the same values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...engine.dtypes import DTYPE_TO_ONNX

INT64_MAX, INT64_MIN = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)


@dataclass(frozen=True)
class Const:
    """An input given as an initializer of the model (known at conversion), not fed at run time."""

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
        return {f"in{i}": np.asarray(x) for i, x in enumerate(self.inputs)
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
