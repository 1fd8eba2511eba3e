"""The numpy backend's prepared paths for Raster, Pool, FusedElementwise and Resize: views and
buffers built at resize and reused by every run. Checked across runs with new values, across a
resize to another shape and back, with feeds and graph outputs (arrays from outside the arena
that may change from run to run, or stay the same object while their contents change), and
bit for bit against the unprepared computations where the prepared path promises the same
values (fused programs, max pooling, Resize's phase passes)."""
import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.base import Step as ExecStep
from wgnn.backends.numpy import fused as numpy_fused
from wgnn.backends.numpy import resize as numpy_resize
from wgnn.backends.numpy.elementwise import apply_binary, apply_unary
from wgnn.backends.numpy.kernel import KERNELS, NumpyBackend, NumpyExecution
from wgnn.engine.geometry import RasterPlan, Region, finalize
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.engine.ops import load_ops
from wgnn.engine.ops.base import OPS, TensorSpec
from wgnn.engine.ops.fused import Step, encode_program
from wgnn.engine.ops.resize import AxisResize
from wgnn.models import zoo
from wgnn.models.format import model_to_bytes, read_model

import wgnn

rng = np.random.default_rng(11)


def r(*shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def onnx_model(nodes, inputs: dict, outputs: list[str], constants: dict | None = None, opset: int = 18,
               dtype=TensorProto.FLOAT):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, dtype, None) for n in outputs],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in (constants or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def sessions(model):
    """(wgnn numpy session, onnxruntime session) of one ONNX model."""
    data = model.SerializeToString()
    return (wgnn.InferenceSession(data, providers=["numpy"]),
            ort.InferenceSession(data, providers=["CPUExecutionProvider"]))


def steps_of(session, op_type: str):
    return [(step, ex) for segment in session.session.segments for step, ex in segment.steps
            if step.op.op_type == op_type]


def check_runs(model, feed_list, *, rtol=1e-6, atol=1e-6, exact=False):
    """Run the feeds in order on one wgnn session (so it resizes between shapes) and compare every
    output with onnxruntime."""
    ours, theirs = sessions(model)
    for feeds in feed_list:
        got, want = ours.run(None, feeds), theirs.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            if exact:
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return ours


# ------------------------------------------------------------------------------------ Raster
def test_raster_views_follow_a_resize_and_back():
    """Pad reads the feed and writes the arena; Transpose reads the arena and writes a graph output
    (a new array on every run); Concat reads the feed twice; Slice reverses an axis (negative
    strides). Shapes change and come back: every view is rebuilt for the new arrays."""
    nodes = [helper.make_node("Pad", ["x", "pads", "v"], ["p"], mode="constant"),
             helper.make_node("Relu", ["p"], ["q"]),
             helper.make_node("Transpose", ["q"], ["y"], perm=[0, 2, 3, 1]),
             helper.make_node("Concat", ["x", "x"], ["z"], axis=3),
             helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"])]
    constants = {"pads": np.array([0, 0, 1, 2, 0, 1, 0, 1], np.int64), "v": np.float32(1.5),
                 "starts": np.array([-1], np.int64), "ends": np.array([-1000], np.int64),
                 "axes": np.array([2], np.int64), "steps": np.array([-2], np.int64)}
    model = onnx_model(nodes, {"x": ["N", 3, "H", "W"]}, ["y", "z", "s"], constants)
    shapes = [(1, 3, 4, 5), (1, 3, 4, 5), (2, 3, 6, 3), (1, 3, 4, 5)]
    session = check_runs(model, [{"x": r(*s)} for s in shapes], exact=True)
    assert session.report()["raster_steps"] == 4


def test_raster_feeds_from_outside_the_arena():
    """The same feed object changed in place, views of one buffer at other addresses, and a
    non-contiguous feed (copied by the session): each run reads the values it was given."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]), helper.make_node("Neg", ["t"], ["y"])]
    model = onnx_model(nodes, {"x": [3, 4, 5]}, ["y"])
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])

    def check(x):
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], -x.transpose(1, 0, 2))

    x = r(3, 4, 5)
    check(x)
    x[...] = r(3, 4, 5)  # same object, same memory, new values
    check(x)
    big = r(2, 3, 4, 5)
    check(big[0])
    check(big[1])  # another address
    big[0] = r(3, 4, 5)
    check(big[0])  # a new view object over memory seen before
    check(r(3, 8, 5)[:, ::2])  # not contiguous
    check(np.asfortranarray(r(3, 4, 5)))


def raster_step(plan: RasterPlan, in_specs, out_spec) -> ExecStep:
    load_ops()
    node = Node("Raster", [f"in{i}" for i in range(len(in_specs))], ["out"], {}, name="direct")
    return ExecStep(node, OPS["Raster"], {}, node.inputs, node.outputs, in_specs, [out_spec], plan=finalize(plan))


def naive_raster(plan: RasterPlan, inputs, out: np.ndarray) -> np.ndarray:
    flat = out.reshape(-1).copy()
    if plan.fill is not None:
        flat[:] = plan.fill
    for region in plan.regions:
        src = np.ascontiguousarray(inputs[region.src]).reshape(-1)
        for index in np.ndindex(*region.size):
            flat[region.dst_offset + np.dot(index, region.dst_strides)] = \
                src[region.src_offset + np.dot(index, region.src_strides)]
    return flat.reshape(out.shape)


def test_raster_direct_calls_and_changing_arrays():
    """The kernel without prepare (as constant folding calls it), then on one execution: inputs
    that change object, a non-contiguous input and output, reversed and broadcast regions, an
    int32 source into a float32 output, and a fill."""
    plan = RasterPlan([Region(0, (3, 3), 8, (-4, 1), 0, (5, 1)),    # rows reversed
                       Region(1, (3,), 0, (0,), 4, (5,)),           # one value broadcast down a column
                       Region(0, (2,), 1, (2,), 3, (5,))], fill=-2.0)  # element 13 keeps the fill
    a, b = np.arange(12, dtype=np.float32), np.array([9], np.int32)
    step = raster_step(plan, [TensorSpec((12,), "float32"), TensorSpec((1,), "int32")], TensorSpec((3, 5), "float32"))
    direct = np.empty((3, 5), np.float32)
    KERNELS["Raster"](NumpyExecution(NumpyBackend(), step, KERNELS["Raster"]), [a, b], [direct])
    np.testing.assert_array_equal(direct, naive_raster(plan, [a, b], direct))
    ex = NumpyExecution(NumpyBackend(), step, KERNELS["Raster"])
    ex.prepare()
    for _ in range(2):
        a2 = r(24)[::2]  # not contiguous
        out = np.empty((5, 3), np.float32).T  # not contiguous either
        ex.run([a2, b + 1], [out])
        np.testing.assert_array_equal(out, naive_raster(plan, [a2, b + 1], out))
        a = r(12)
        ex.run([a, b], [direct])
        np.testing.assert_array_equal(direct, naive_raster(plan, [a, b], direct))
        a[:] = r(12)  # same object, new values
        ex.run([a, b], [direct])
        np.testing.assert_array_equal(direct, naive_raster(plan, [a, b], direct))


# -------------------------------------------------------------------------------------- Pool
def naive_max_pool(x, kernel, strides, pads, dilations=(1, 1), ceil=False):
    """Max over every window of the -inf padded input, window by window (output sizes as ONNX
    gives them: with ceil_mode a last window must start inside the input or its begin padding)."""
    sizes = []
    for n, k, s, d, b, e in zip(x.shape[2:], kernel, strides, dilations, pads[:2], pads[2:]):
        span = n + b + e - (k - 1) * d - 1
        o = (-(-span // s) if ceil else span // s) + 1
        sizes.append(o - 1 if ceil and (o - 1) * s >= n + b else o)
    (oh, ow), (kh, kw), (sh, sw), (dh, dw) = sizes, kernel, strides, dilations
    h, w = x.shape[2:]
    padded = np.full(x.shape[:2] + (h + pads[0] + kh * dh + sh * oh, w + pads[1] + kw * dw + sw * ow), -np.inf,
                     x.dtype)
    padded[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            window = padded[:, :, i * sh:i * sh + (kh - 1) * dh + 1:dh, j * sw:j * sw + (kw - 1) * dw + 1:dw]
            out[:, :, i, j] = window.max(axis=(2, 3))
    return out


@pytest.mark.parametrize(("kernel", "strides", "pads", "dilations", "ceil"), [
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),   # resnet's
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),   # unet's: no buffer, views on the input
    ((3, 2), (2, 3), (1, 0, 2, 1), (2, 1), True),    # dilated, asymmetric pads, ceil
    ((1, 3), (1, 2), (0, 1, 0, 1), (1, 1), True),    # one axis with a single tap
])
def test_max_pool_is_exact_across_resizes(kernel, strides, pads, dilations, ceil):
    """Separable max pooling gives the window maxima exactly (NaN and infinities included), on
    one session resized to another shape and back, with the same feed object changed in place."""
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads),
             "dilations": list(dilations), "ceil_mode": int(ceil)}
    model = onnx_model([helper.make_node("MaxPool", ["x"], ["y"], **attrs)], {"x": ["N", "C", "H", "W"]}, ["y"])
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    x = r(2, 3, 9, 7)
    for shape in [(2, 3, 9, 7), (1, 5, 6, 11), (2, 3, 9, 7)]:
        if shape != x.shape:
            x = r(*shape)
        x.flat[::7] = np.nan
        x.flat[3::11] = np.inf
        x.flat[5::13] = -np.inf
        for _ in range(2):
            np.testing.assert_array_equal(session.run(None, {"x": x})[0],
                                          naive_max_pool(x, kernel, strides, pads, dilations, ceil))
            x[...] = r(*x.shape)  # same object, new values


def test_pools_across_resizes_against_onnxruntime():
    """Average (both count_include_pad), Lp (p = 1, 2, 3) and max pooling with indices, chained so
    some read the feed and some the arena, over shapes that change and come back."""
    nodes = [helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              ceil_mode=1, count_include_pad=0),
             helper.make_node("AveragePool", ["a"], ["b"], kernel_shape=[2, 3], pads=[1, 1, 0, 1], count_include_pad=1),
             helper.make_node("LpPool", ["x"], ["l1"], kernel_shape=[2, 2], strides=[2, 1], p=1),
             helper.make_node("LpPool", ["b"], ["l2"], kernel_shape=[3, 2], pads=[1, 0, 1, 1], p=2),
             helper.make_node("LpPool", ["x"], ["l3"], kernel_shape=[2, 3], strides=[1, 2], p=3),
             helper.make_node("MaxPool", ["b"], ["m", "i"], kernel_shape=[2, 2], pads=[1, 1, 0, 0], storage_order=1),
             helper.make_node("MaxPool", ["x"], ["m2", "i2"], kernel_shape=[3, 2], strides=[2, 2])]
    model = onnx_model(nodes, {"x": ["N", "C", "H", "W"]}, ["b", "l1", "l2", "l3", "m", "m2"])
    model.graph.output.extend([helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ("i", "i2")])
    shapes = [(1, 3, 8, 9), (2, 5, 7, 6), (1, 3, 8, 9)]
    check_runs(model, [{"x": r(*s)} for s in shapes for _ in range(2)], rtol=1e-5, atol=1e-6)


def test_half_precision_pools():
    """float16 averages accumulate in float32 (a cast into the padded buffer); global pools too."""
    x = r(2, 3, 7, 6, dtype=np.float16)
    x32 = x.astype(np.float32)
    nodes = [helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["x"], ["g"]), helper.make_node("GlobalMaxPool", ["x"], ["m"]),
             helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2])]
    half = onnx_model(nodes, {"x": [2, 3, 7, 6]}, ["a", "g", "m", "p"], dtype=TensorProto.FLOAT16)
    full = onnx_model(nodes, {"x": [2, 3, 7, 6]}, ["a", "g", "m", "p"])
    got = wgnn.InferenceSession(half.SerializeToString(), providers=["numpy"]).run(None, {"x": x})
    want = ort.InferenceSession(full.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x32})
    for g, w in zip(got, want):
        assert g.dtype == np.float16
        np.testing.assert_array_equal(g, w.astype(np.float16))  # float32 results rounded once


# --------------------------------------------------------------------- in-place activations
def _softplus64(x):
    return np.logaddexp(x, 0.0)


# kind, alpha, beta, the ONNX formula in float64
ACTIVATIONS = [
    ("sigmoid", 0, 0, lambda x: 1 / (1 + np.exp(-x))),
    ("softplus", 0, 0, _softplus64),
    ("mish", 0, 0, lambda x: x * np.tanh(_softplus64(x))),
    ("gelu_tanh", 0, 0, lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    *[("leaky_relu", a, 0, lambda x, a=a: np.where(x >= 0, x, x * a)) for a in (0.01, 0.5, 1.0, 0.0, 1.5, -0.2)],
    ("hard_sigmoid", 0.2, 0.5, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ("hard_swish", 0, 0, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    ("softsign", 0, 0, lambda x: x / (1 + np.abs(x))),
    ("clip", -1.5, 2.0, lambda x: np.clip(x, -1.5, 2.0)),
    *[("celu", a, 0, lambda x, a=a: np.maximum(x, 0) + np.minimum(0, a * np.expm1(x / a))) for a in (1.0, 0.5, 2.0)],
    *[("elu", a, 0, lambda x, a=a: np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))) for a in (1.0, 0.3, 1.7, -0.5)],
    *[("selu", a, g, lambda x, a=a, g=g: g * np.where(x > 0, x, a * np.expm1(np.minimum(x, 0))))
      for a, g in ((1.67326319, 1.05070102), (0.5, 2.0))],
    *[("thresholded_relu", a, 0, lambda x, a=a: np.where(x > a, x, 0.0)) for a in (1.0, 0.0, -2.0)],
    *[("shrink", lambd, bias, lambda x, lambd=lambd, bias=bias: np.where(x < -lambd, x + bias,
                                                                         np.where(x > lambd, x - bias, 0.0)))
      for lambd, bias in ((0.5, 0.5), (0.75, 0.0), (0.0, 0.0), (0.5, 0.1), (0.0, 1.5), (-0.5, 0.2), (-0.5, -0.5))],
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize(("kind", "alpha", "beta", "formula"), ACTIVATIONS,
                         ids=[f"{k}-{a}" for k, a, _, _ in ACTIVATIONS])
def test_in_place_activations_match_their_formulas(kind, alpha, beta, formula, dtype):
    """The activations computed in place on one or two arrays (elementwise.py) against the ONNX
    formula in float64: special values, a large array, and 0-d inputs."""
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 3.0, -3.0, 11.0, -11.0, 30.0,
               -30.0, 80.0, -80.0, 1e4, -1e4]
    x = np.concatenate([special, np.random.default_rng(3).standard_normal(20011) * 4]).astype(dtype)
    with np.errstate(all="ignore"):
        want = formula(x.astype(np.float64))
        got = apply_unary(kind, x.reshape(1, -1), alpha, beta)
        scalar = apply_unary(kind, x[9], alpha, beta)  # 0.5
    assert got.dtype == dtype and got.shape == (1, x.size)
    got = got.ravel().astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)), kind
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]), kind
    # A few roundings of the type, relative to the input's scale: x (1 + tanh(...)) and a x + b
    # cancel where the result is small, in any arithmetic of the input's type.
    eps = float(np.finfo(dtype).eps)
    scale = np.nan_to_num(np.abs(x.astype(np.float64)), nan=0.0, posinf=np.inf)  # NaN may give 0
    bound = 8 * eps * (np.abs(want) + np.maximum(1, scale))
    error = np.abs(got[finite] - want[finite])
    assert (error <= bound[finite]).all(), (kind, float((error - bound[finite]).max()))
    assert np.ndim(scalar) == 0 and abs(float(scalar) - want[9]) <= bound[9]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_unary_into_the_input_itself_and_into_other_arrays(dtype):
    """unary_into (the Unary kernel, conv and MatMul epilogues) on every kind: written over x itself
    (a kind in IN_PLACE_SAFE computes there, the others in a new array first), into a separate
    output, and into an output of another type: always what apply_unary returns."""
    from wgnn.backends.numpy.elementwise import IN_PLACE_SAFE, UNARY_FUNCS, unary_into

    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 3.0, -3.0, 80.0, -80.0]
    base = np.concatenate([special, np.random.default_rng(9).standard_normal(4000) * 3]).astype(dtype)
    params = {"leaky_relu": (0.1, 0.0), "hard_sigmoid": (0.2, 0.5), "clip": (-1.0, 2.0), "elu": (0.7, 0.0),
              "selu": (1.67, 1.05), "celu": (1.5, 0.0), "thresholded_relu": (0.5, 0.0), "shrink": (0.5, 0.5),
              "isinf": (1.0, 1.0)}
    skipped = {"not", "bitwise_not"}  # boolean and integer kinds
    assert {"sigmoid", "erf", "tanh"} <= IN_PLACE_SAFE
    with np.errstate(all="ignore"):
        for kind in sorted(set(UNARY_FUNCS) - skipped):
            alpha, beta = params.get(kind, (0.0, 0.0))
            want = np.asarray(apply_unary(kind, base.copy(), alpha, beta))
            x = base.copy()
            unary_into(kind, x, alpha, beta, x if want.dtype == x.dtype else np.empty_like(want))
            if want.dtype == x.dtype:
                np.testing.assert_array_equal(x, want, err_msg=f"{kind} over its input")
            for out in (np.empty_like(want), np.empty(want.shape, np.float64)):
                x = base.copy()
                unary_into(kind, x, alpha, beta, out)
                np.testing.assert_array_equal(out, want.astype(out.dtype), err_msg=f"{kind} into {out.dtype}")
                np.testing.assert_array_equal(x, base, err_msg=f"{kind} wrote over its input")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_pow_squares_and_cubes_and_prelu(dtype):
    """Pow by a constant 2 or 3 is a product (x * x equals np.power's square exactly; a cube is
    within 2 ulp of it), other exponents and broadcasting exponents np.power; PRelu on two arrays
    (min(x, 0) * slope + max(x, 0)), per-channel slopes of any sign."""
    with np.errstate(over="ignore"):  # 1e15 is inf in float16
        x = np.concatenate([[np.nan, np.inf, -np.inf, 0.0, 1e-20, -1e-20, 1e15, -1e15],
                            np.random.default_rng(5).standard_normal(3 * 7 * 11 * 13 - 8) * 3]).astype(dtype)
    x = x.reshape(3, 7, 11, 13)
    eps, tiny = float(np.finfo(dtype).eps), float(np.finfo(dtype).tiny)  # subnormal results: absolute
    with np.errstate(all="ignore"):
        for exponent, shape in ((2.0, (1,)), (3.0, ()), (3.0, (1, 1, 1)), (0.5, (1,)), (3.0, (1, 1, 1, 1, 1))):
            b = np.full(shape, exponent, dtype)
            got = apply_binary("pow", x, b)
            assert got.dtype == dtype and got.shape == np.broadcast_shapes(x.shape, shape)
            if exponent == 0.5 or len(shape) > x.ndim:  # np.power itself
                np.testing.assert_array_equal(got, np.power(x, b))
                continue
            want = np.power(x.astype(np.float64), exponent).astype(dtype).astype(np.float64)  # overflows too
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=4 * eps, atol=tiny, equal_nan=True)
        np.testing.assert_array_equal(apply_binary("pow", x, np.full(1, 2.0, dtype)), np.power(x, dtype(2)))
        slope = np.array([0.25, 0.0, -0.5, 1.5, 1.0, -2.0, 0.01], dtype).reshape(7, 1, 1)
        got = apply_binary("prelu", x, slope)
        want = np.where(x.astype(np.float64) < 0, x.astype(np.float64) * slope, x.astype(np.float64))
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=eps, atol=tiny, equal_nan=True)


# (op, attributes, opset, extra inputs, arrays of x's size a run may allocate beyond what Neg does;
# Neg writes straight into the output, so that is the run's own bookkeeping)
TEMPORARIES = [
    ("Sigmoid", {}, 13, {}, 0), ("Gelu", {"approximate": "tanh"}, 20, {}, 0),
    # erf: float64 chunks of 8192 elements, 1.5 of this x's size at the peak; float32 GELU: float32
    # and index chunks, 0.64
    ("Gelu", {}, 20, {}, 0.7), ("Erf", {}, 13, {}, 1.5),
    ("Softplus", {}, 13, {}, 1), ("Mish", {}, 18, {}, 1), ("Elu", {}, 13, {}, 0),
    ("Celu", {}, 13, {}, 1), ("LeakyRelu", {}, 13, {}, 0), ("HardSwish", {}, 14, {}, 0),
    ("Selu", {}, 13, {}, 1), ("ThresholdedRelu", {}, 13, {}, 0.5),
    ("Shrink", {"lambd": 0.5, "bias": 0.5}, 13, {}, 1), ("Shrink", {"lambd": 0.5, "bias": 0.0}, 13, {}, 0.5),
    ("Shrink", {"lambd": 0.5, "bias": 0.1}, 13, {}, 1.5), ("Tanh", {}, 13, {}, 0),
    ("PRelu", {}, 13, {"slope": np.full((16, 1, 1), 0.1, np.float32)}, 1),
    ("Pow", {}, 13, {"exponent": np.array([3.0], np.float32)}, 0),
    ("GroupNormalization", {"num_groups": 4}, 21, {"scale": np.ones(16, np.float32), "bias": np.zeros(16, np.float32)},
     0.25),
    ("InstanceNormalization", {}, 13, {"scale": np.ones(16, np.float32), "bias": np.zeros(16, np.float32)}, 0.25),
    ("BatchNormalization", {}, 15, {k: np.full(16, v, np.float32) for k, v in zip("sbmv", (2, 1, 0.5, 4))},
     0.25),
    ("LRN", {"size": 3}, 13, {}, 1),
    ("MeanVarianceNormalization", {}, 13, {}, 1),  # its axes (0, 2, 3) are not trailing: a squared copy
    ("MatMul", {}, 13, {"w": np.eye(64, dtype=np.float32)}, 0),
    ("Softmax", {"axis": -1}, 13, {}, 0.25), ("Softmax", {"axis": 1}, 11, {}, 0.25),  # opset 11: flattened
    ("LogSoftmax", {"axis": 1}, 13, {}, 1),  # exp(shifted)
]


def _peak_run_bytes(op: str, attrs: dict, opset: int, extra: dict, x: np.ndarray) -> int:
    """The peak of numpy memory traced during one warm run of a one-op session (outputs in out=)."""
    import tracemalloc

    inits = [numpy_helper.from_array(v, k) for k, v in extra.items()]
    node = helper.make_node(op, ["x", *extra], ["y"], **attrs)
    info = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [info("x", TensorProto.FLOAT, x.shape)],
                              [info("y", TensorProto.FLOAT, x.shape)], inits)
    session = wgnn.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    y = np.empty_like(x)
    for _ in range(2):
        session.run(None, {"x": x}, out={"y": y})
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        session.run(None, {"x": x}, out={"y": y})
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("op", "attrs", "opset", "extra", "arrays"), TEMPORARIES,
                         ids=[f"{t[0]}-{t[1].get('approximate', t[1].get('bias', t[2]))}" for t in TEMPORARIES])
def test_activations_and_norms_allocate_few_arrays_per_run(op, attrs, opset, extra, arrays):
    """Whole-array temporaries are fresh memory mappings on every run (docs/performance.md), so
    these kernels work in place and write into the output: per run they allocate at most `arrays`
    arrays of x's size beyond what a single-ufunc op (Neg) does. The former expressions took 1-16
    more (Sigmoid 3.25, Erf 16, GroupNorm 2.1, LRN 4), and every Unary kind one more (its result,
    copied into the output)."""
    x = np.random.default_rng(11).standard_normal((1, 16, 64, 64)).astype(np.float32)
    single_ufunc = _peak_run_bytes("Neg", {}, 13, {}, x)
    assert single_ufunc < x.nbytes / 8  # Neg writes into the output
    extra_arrays = (_peak_run_bytes(op, attrs, opset, extra, x) - single_ufunc) / x.nbytes
    assert extra_arrays <= arrays + 0.1, (op, extra_arrays)


# ---------------------------------------------------------------------------- FusedElementwise
def test_ufunc_tables_match_the_elementwise_functions():
    """The fused kernel calls these ufuncs with out=; they must be what elementwise.py computes."""
    values = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -3.7, 1e-30, 80.0, -80.0, 1e30,
                       np.inf, -np.inf, np.nan], np.float64)
    with np.errstate(all="ignore"):
        for dtype in (np.float32, np.float64, np.float16):
            x = values.astype(dtype)
            y = x[::-1].copy()
            for kind, (fn, const) in numpy_fused.UNARY_UFUNCS.items():
                extra = () if const is None else (np.zeros((), dtype),)
                np.testing.assert_array_equal(fn(x, *extra), apply_unary(kind, x), err_msg=kind)
            for kind, fn in numpy_fused.BINARY_UFUNCS.items():
                np.testing.assert_array_equal(fn(x, y), apply_binary(kind, x, y), err_msg=kind)


def fused_model(steps: list[Step], inputs: dict[str, tuple], constants: dict | None = None) -> Model:
    names = list(inputs) + list(constants or {})
    node = Node("FusedElementwise", names, ["y"], encode_program(steps), name="fused")
    graph = Graph([node], [TensorInfo(n, "float32", s) for n, s in inputs.items()], [TensorInfo("y", "float32")],
                  dict(constants or {}))
    return read_model(model_to_bytes(Model(graph)))


def step_by_step(steps: list[Step], values: list[np.ndarray], shape) -> np.ndarray:
    """The program computed one step at a time with fresh arrays (the unfused computation)."""
    values = list(values)
    with np.errstate(all="ignore"):
        for step in steps:
            operands = [values[i] for i in step.operands]
            values.append(apply_unary(step.kind, operands[0], step.alpha, step.beta) if step.family == "Unary"
                          else apply_binary(step.kind, *operands))
    return np.broadcast_to(values[-1], shape)


PROGRAMS = {
    # x * x + x: an input read twice by one step, then again
    "square_plus": ([Step("Binary", "mul", (0, 0)), Step("Binary", "add", (1, 0))], {"x": (3, 5)}, {}),
    # silu, x * sigmoid(x): a non-ufunc step between two reads of x
    "silu": ([Step("Unary", "sigmoid", (0,)), Step("Binary", "mul", (0, 1))], {"x": (2, 3, 4)}, {}),
    # an intermediate read three steps later, after the output memory was reused
    "reuse": ([Step("Binary", "mul", (0, 1)),       # a = x * w   (output shaped)
               Step("Unary", "exp", (2,)),          # b = exp(a)
               Step("Unary", "relu", (3,)),         # c = relu(b)
               Step("Binary", "sub", (4, 2)),       # d = c - a
               Step("Unary", "tanh", (5,)),         # e
               Step("Binary", "mul", (6, 3))],      # e * b
              {"x": (2, 3, 4), "w": (4,)}, {}),
    # GELU as bert has it: erf (not a ufunc) in the middle, x read by the first and fourth steps
    "gelu": ([Step("Binary", "div", (0, 1)), Step("Unary", "erf", (4,)), Step("Binary", "add", (5, 2)),
              Step("Binary", "mul", (0, 6)), Step("Binary", "mul", (7, 3))],
             {"x": (1, 8, 6)}, {"s": np.float32(1.4142135), "one": np.float32(1.0), "half": np.float32(0.5)}),
    # steps smaller than the output (scalars and a row first), the last one broadcast into it
    "broadcast": ([Step("Binary", "sub", (2, 1)),   # 1 - row        (5,)
                   Step("Binary", "mul", (3, 2)),   # * k            (5,)
                   Step("Unary", "tanh", (4,)),     # (5,)
                   Step("Binary", "max", (5, 0))],  # with the column (4, 1) -> (4, 5)
                  {"col": (4, 1), "row": (5,)}, {"k": np.float32(-3.0)}),
    # row-shaped intermediates in scratch memory, freed and reused (two free at once)
    "scratch": ([Step("Binary", "mul", (0, 1)),     # u = a * b      (5,)
                 Step("Unary", "exp", (0,)),        # v = exp(a)     (5,)
                 Step("Binary", "add", (3, 4)),     # u + v: both freed here
                 Step("Unary", "tanh", (1,)),       # (5,)
                 Step("Binary", "mul", (5, 6)),     # (5,)
                 Step("Binary", "min", (7, 2))],    # with the column -> (4, 5)
                {"a": (5,), "b": (5,), "col": (4, 1)}, {}),
    # the last step is not a ufunc and reads an intermediate held in the output
    "last_generic": ([Step("Binary", "add", (0, 0)),          # a = 2x (output shaped)
                      Step("Unary", "neg", (1,)),              # b = -a
                      Step("Binary", "pow", (1, 0)),           # c = a ** x
                      Step("Binary", "add", (3, 2)),           # c + b
                      Step("Unary", "hard_swish", (4,))], {"x": (3, 7)}, {}),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_fused_in_place_is_exact(name):
    """Each program on a resized session (new shapes and back) gives the step-by-step results bit
    for bit: targets chosen at resize never overwrite a value still to be read."""
    steps, inputs, constants = PROGRAMS[name]
    model = fused_model(steps, {n: tuple(f"d{i}_{j}" for j in range(len(s))) for i, (n, s) in
                                enumerate(inputs.items())}, constants)
    session = wgnn.InferenceSession(model, providers=["numpy"])
    bigger = {n: tuple(d + 2 if d > 1 else d for d in s) for n, s in inputs.items()}
    for shapes in (inputs, inputs, bigger, inputs):
        feeds = {n: r(*s, scale=2.0) for n, s in shapes.items()}
        if name == "last_generic":
            feeds = {n: np.abs(v) + 0.5 for n, v in feeds.items()}  # a positive base for pow
        got = session.run(None, feeds)[0]
        values = list(feeds.values()) + [np.asarray(v) for v in constants.values()]
        want = step_by_step(steps, values, np.broadcast_shapes(*(v.shape for v in values)))
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_fused_uses_the_output_and_little_scratch():
    """The plan writes ufunc steps into the output or at most a couple of scratch arrays."""
    steps, inputs, constants = PROGRAMS["reuse"]
    session = wgnn.InferenceSession(fused_model(steps, inputs, constants), providers=["numpy"])
    session.run(None, {n: r(*s) for n, s in inputs.items()})
    ((_, ex),) = steps_of(session, "FusedElementwise")
    targets = [op.target for op in ex.state["ops"]]
    assert targets[-1] is numpy_fused._OUT
    scratch = {id(t) for t in targets if isinstance(t, np.ndarray)}
    assert all(t is not None for t in targets) and len(scratch) <= 2


# ------------------------------------------------------------------------------------ Resize
def reference_resize(attrs: dict, x: np.ndarray, scales) -> np.ndarray:
    """The unprepared separable computation: per axis, np.take of each tap times its weight, summed
    tap after tap, axes in the plan's order."""
    scales = [float(np.float32(s)) for s in scales]  # as the model stores them
    plan = [AxisResize(a, n, int(np.floor(n * s)), s) for a, (n, s) in enumerate(zip(x.shape, scales)) if s != 1]
    plan.sort(key=lambda p: (p.out_len / p.in_len, -p.axis))
    data = x
    with np.errstate(all="ignore"):  # NaN and infinities in the input
        for step in plan:
            table = numpy_resize.axis_table(attrs, step)
            bshape = (-1,) + (1,) * (x.ndim - step.axis - 1)
            weight = table.weight.astype(np.float32)
            result = np.take(data, table.index[:, 0], axis=step.axis) * weight[:, 0].reshape(bshape)
            for tap in range(1, table.index.shape[1]):
                result += np.take(data, table.index[:, tap], axis=step.axis) * weight[:, tap].reshape(bshape)
            data = result
    return data


RESIZE_ATTRS = {"nearest_mode": "round_prefer_floor", "exclude_outside": 0, "antialias": 0, "cubic_coeff_a": -0.75,
                "extrapolation_value": 0.0}


@pytest.mark.parametrize(("mode", "coordinates", "scales"), [
    ("linear", "half_pixel", (1, 1, 2, 2)),            # unet's
    ("linear", "asymmetric", (1, 1, 3, 2)),
    ("linear", "pytorch_half_pixel", (1, 2, 1, 4)),
    ("cubic", "half_pixel", (1, 1, 2, 3)),
    ("linear", "half_pixel", (1, 1, 1, 2)),            # the innermost axis only
])
def test_resize_phase_passes_are_exact(mode, coordinates, scales):
    """Whole-factor upsampling runs as shifted multiplies over an edge-padded buffer (no gather)
    and gives the gather's values bit for bit, NaN and infinities included, across resizes."""
    attrs = {**RESIZE_ATTRS, "mode": mode, "coordinate_transformation_mode": coordinates}
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=coordinates)
    model = onnx_model([node], {"x": ["N", "C", "H", "W"]}, ["y"], {"scales": np.array(scales, np.float32)})
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    for shape in [(1, 3, 4, 5), (2, 2, 5, 3), (1, 3, 4, 5)]:
        x = r(*shape)
        x.flat[::17] = np.nan
        x.flat[5::23] = np.inf
        got = session.run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, reference_resize(attrs, x, scales))
    ((_, ex),) = steps_of(session, "Resize")
    passes = [p[0] for p in ex.state["plan"].passes]
    assert all(isinstance(p, numpy_resize._PhasePass) for p in passes)
    if scales == (1, 1, 2, 2):  # the height pass writes all phases with one view per tap
        assert [p.grouped for p in passes] == [False, True] and passes[1].filled


@pytest.mark.parametrize(("mode", "scales"), [("linear", (1, 1, 1.7, 0.6)), ("cubic", (1, 1, 0.6, 2.5)),
                                             ("linear", (1, 3, 1, 1.5))])
def test_resize_gather_passes_are_exact(mode, scales):
    """Other scales gather the taps; the prepared buffers give the unprepared values bit for bit."""
    attrs = {**RESIZE_ATTRS, "mode": mode, "coordinate_transformation_mode": "half_pixel"}
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)
    model = onnx_model([node], {"x": ["N", "C", "H", "W"]}, ["y"], {"scales": np.array(scales, np.float32)})
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    for shape in [(1, 2, 6, 5), (2, 1, 9, 4), (1, 2, 6, 5)]:
        x = r(*shape)
        x.flat[::13] = np.inf
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], reference_resize(attrs, x, scales))
    ((_, ex),) = steps_of(session, "Resize")
    assert any(isinstance(p[0], numpy_resize._GatherPass) for p in ex.state["plan"].passes)


@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 3, 1), (1, 2, 1, 3), (2, 1, 2, 2)])
def test_resize_nearest_whole_factors(scales):
    """Nearest upsampling by whole factors is a broadcasting copy (with asymmetric/floor and with
    half_pixel/round_prefer_floor coordinates, which both read i // factor), for floats and ints."""
    for coordinates, nearest in (("asymmetric", "floor"), ("half_pixel", "round_prefer_floor")):
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                                coordinate_transformation_mode=coordinates, nearest_mode=nearest)
        for dtype, onnx_type in ((np.float32, TensorProto.FLOAT), (np.int32, TensorProto.INT32)):
            model = onnx_model([node], {"x": ["N", "C", "H", "W"]}, ["y"], {"scales": np.array(scales, np.float32)},
                               dtype=onnx_type)
            session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
            for shape in [(1, 2, 3, 4), (2, 3, 2, 5), (1, 2, 3, 4)]:
                x = (r(*shape) * 100).astype(dtype)
                want = x
                for axis, factor in enumerate(scales):
                    want = np.repeat(want, factor, axis=axis)
                np.testing.assert_array_equal(session.run(None, {"x": x})[0], want)
            ((_, ex),) = steps_of(session, "Resize")
            assert ex.state["plan"].repeat is not None


def test_resize_mixed_passes_across_resizes():
    """Downsampling (gather pass) then whole-factor upsampling (phase pass), a fractional scale,
    float16 input (cast to float32 inside) and a tf_crop_and_resize extrapolation, against
    onnxruntime over shapes that change and come back."""
    nodes = [helper.make_node("Resize", ["x", "", "s1"], ["a"], mode="linear"),
             helper.make_node("Resize", ["x", "", "s2"], ["b"], mode="cubic"),
             helper.make_node("Resize", ["x", "roi", "s3"], ["c"], mode="linear",
                              coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.0)]
    constants = {"s1": np.array([1, 1, 0.5, 2], np.float32), "s2": np.array([1, 1, 1.7, 2], np.float32),
                 "s3": np.array([1, 1, 2, 2], np.float32),
                 "roi": np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32)}
    model = onnx_model(nodes, {"x": ["N", "C", "H", "W"]}, ["a", "b", "c"], constants)
    shapes = [(1, 2, 6, 5), (2, 3, 8, 4), (1, 2, 6, 5)]
    check_runs(model, [{"x": r(*s)} for s in shapes for _ in range(2)], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------- zoo models
@pytest.mark.parametrize(("name", "shapes"), [
    ("unet", [{"input": (1, 3, 32, 32)}, {"input": (2, 3, 32, 32)}, {"input": (1, 3, 32, 32)}]),
    ("bert", [{"input_ids": (1, 8)}, {"input_ids": (2, 5)}, {"input_ids": (1, 8)}]),
    ("resnet", [{"input": (1, 3, 32, 32)}, {"input": (3, 3, 32, 32)}, {"input": (1, 3, 32, 32)}]),
])
def test_zoo_models_across_resizes(name, shapes):
    model = zoo.build(name)
    ours, theirs = sessions(model)
    for shape in shapes:
        if name == "bert":
            ids = rng.integers(0, 100, shape["input_ids"]).astype(np.int64)
            feeds = {"input_ids": ids, "attention_mask": (rng.random(ids.shape) > 0.2).astype(np.int64)}
        else:
            feeds = {"input": r(*shape["input"])}
        for got, want in zip(ours.run(None, feeds), theirs.run(None, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
