"""The numpy backend's prepared fast paths: Conv / ConvTranspose with buffers built at resize
(padded input, im2col window, widened output grid, packed weights), the table erf, in-place
LayerNorm, and the executions' prepared output lists. Each is checked against an independent
reference (math.erf, a direct numpy convolution, onnxruntime), across runs with new values and
across resizes."""
import math
import warnings

import numpy as np
import onnx
import pytest
from helpers import Const, check_op
from numpy.lib.stride_tricks import sliding_window_view
from onnx import helper, numpy_helper
from wgnn.backends.numpy import conv as numpy_conv
from wgnn.backends.numpy.conv import _ConvPlan, _ConvTransposePlan
from wgnn.backends.numpy.elementwise import erf
from wgnn.engine.graph import Graph, Model, Node, TensorInfo

import wgnn

rng = np.random.default_rng(7)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------------------------ erf
def test_erf_accuracy_over_its_range():
    x = np.linspace(-6, 6, 240_001)
    want = np.array([math.erf(v) for v in x])
    assert np.abs(erf(x) - want).max() < 2e-7
    x32 = x.astype(np.float32)
    want32 = np.array([math.erf(float(v)) for v in x32])
    got32 = erf(x32)
    assert got32.dtype == np.float32
    assert np.abs(got32.astype(np.float64) - want32).max() < 2e-7


def test_erf_edges():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 6.0, -6.5, 7.0, 1e30, -1e30], np.float32)
    got = erf(x)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:3], [1, -1])
    assert got[3] == 0 and not np.signbit(got[3]) and got[4] == 0 and np.signbit(got[4])
    np.testing.assert_allclose(got[5:7], [2 / math.sqrt(math.pi) * 1e-30, -2 / math.sqrt(math.pi) * 1e-30],
                               rtol=1e-6)
    np.testing.assert_array_equal(got[7:], [1, -1, 1, 1, -1])
    assert erf(np.float32(0.5)).shape == () and abs(float(erf(np.array(0.5))) - math.erf(0.5)) < 1e-7
    assert erf(np.zeros((0, 3), np.float32)).shape == (0, 3)
    half = erf(np.array([[0.25, -2.0]], np.float16))
    assert half.dtype == np.float16 and half.shape == (1, 2)
    np.testing.assert_allclose(half, [[math.erf(0.25), math.erf(-2.0)]], rtol=1e-3)
    # non-contiguous input
    strided = np.linspace(-3, 3, 21)[::2]
    np.testing.assert_allclose(erf(strided), [math.erf(v) for v in strided], atol=1e-7, rtol=0)


def test_erf_and_gelu_ops():
    x = np.concatenate([np.linspace(-7, 7, 57), [np.inf, -np.inf, np.nan, 0.0]]).astype(np.float32).reshape(1, 61)
    check_op("Erf", [x], rtol=1e-6, atol=2e-7)
    check_op("Gelu", [r(3, 5, 7) * 3], opset=20, rtol=1e-6, atol=2e-7)


# ------------------------------------------------------------------------------------- Conv
def reference_conv(x, w, b=None, *, strides=None, pads=None, dilations=None, group=1):
    """Direct convolution in float64: pad, sliding windows, one einsum per group."""
    rank = x.ndim - 2
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    pads = pads or [0] * (2 * rank)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *zip(pads[:rank], pads[rank:])])
    kernel = w.shape[2:]
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    windows = sliding_window_view(xp, extent, axis=tuple(range(2, 2 + rank)))
    windows = windows[(..., *(slice(None, None, d) for d in dilations))]
    windows = windows[(slice(None), slice(None), *(slice(None, None, s) for s in strides))]
    c = x.shape[1]
    m, cg = w.shape[0], c // group
    letters = "ijkl"[:rank]
    ys = [np.einsum(f"nc{'xyzw'[:rank]}{letters},mc{letters}->nm{'xyzw'[:rank]}",
                    windows[:, g * cg:(g + 1) * cg], w[g * (m // group):(g + 1) * (m // group)].astype(np.float64))
          for g in range(group)]
    y = np.concatenate(ys, axis=1)
    if b is not None:
        y += b.reshape((-1,) + (1,) * rank)
    return y


def conv_session(x_shape, w, b=None, *, attrs=None, residual=False, const=True, dims=None):
    """An IR Conv session: x (and the residual) are graph inputs; w and b initializers when const,
    else graph inputs. dims overrides x's declared shape (symbolic dims for resizes)."""
    attrs = dict(attrs or {})
    dtype = w.dtype.name
    inputs = [TensorInfo("x", dtype, tuple(dims or x_shape))]
    names = ["x", "w", "b" if b is not None else ""]
    initializers = {}
    for name, value in (("w", w), ("b", b)):
        if value is None:
            continue
        if const:
            initializers[name] = value
        else:
            inputs.append(TensorInfo(name, dtype, value.shape))
    if residual:
        names.append("res")
        inputs.append(TensorInfo("res", dtype, None))
    node = Node("Conv", names, ["y"], attrs, name="c")
    graph = Graph(nodes=[node], inputs=inputs, outputs=[TensorInfo("y", dtype)], initializers=initializers)
    return wgnn.InferenceSession(Model(graph), providers=["numpy"])


def conv_plans(session, op="Conv"):
    return [ex.state.get("conv" if op == "Conv" else "conv_transpose")
            for segment in session.session.segments for step, ex in segment.steps if step.op.op_type == op]


def activate(y, kind, alpha=0.0, beta=0.0):
    if kind == "relu":
        return np.maximum(y, 0)
    if kind == "clip":
        return np.clip(y, alpha, beta)
    if kind == "leaky_relu":
        return np.where(y >= 0, y, y * alpha)
    return y


CONV_CASES = {
    # name: (x shape, w shape, attrs); the comment says which prepared path runs
    "widened_3x3": ((1, 5, 8, 8), (6, 5, 3, 3), {"pads": [1, 1, 1, 1]}),  # rows 10 wide for 8 outputs
    "not_widened_small": ((1, 3, 2, 2), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),  # 4 wide for 2: plain grid
    "widened_column_stride": ((1, 3, 5, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [1, 2]}),
    "row_stride_plain": ((2, 3, 7, 6), (4, 3, 3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1]}),
    "dilated_widened": ((1, 4, 9, 9), (3, 4, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "asymmetric_no_pad": ((2, 3, 6, 7), (5, 3, 2, 3), {}),
    "groups_batch": ((2, 6, 7, 5), (4, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "depthwise": ((2, 5, 6, 7), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}),
    "depthwise_multiplier_stride": ((1, 3, 9, 9), (6, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "pointwise": ((1, 7, 5, 3), (4, 7, 1, 1), {}),
    "pointwise_groups_batch": ((3, 6, 4, 5), (4, 3, 1, 1), {"group": 2}),
    # more outputs than inputs: the bias rides in the matmul (a copy of x with a row of ones)
    "pointwise_expand": ((1, 3, 4, 5), (8, 3, 1, 1), {}),
    "pointwise_expand_groups_batch": ((2, 4, 3, 3), (6, 2, 1, 1), {"group": 2}),
    "one_by_one_strided": ((1, 4, 7, 7), (3, 4, 1, 1), {"strides": [2, 2]}),
    "conv1d": ((2, 5, 11), (4, 5, 3), {"strides": [2], "pads": [2, 1], "dilations": [2]}),
    "conv3d_widened": ((1, 3, 4, 5, 6), (4, 3, 2, 3, 3), {"pads": [1, 1, 1, 0, 1, 1]}),
    "conv3d_groups": ((2, 4, 5, 6, 5), (4, 2, 3, 1, 2), {"group": 2, "strides": [2, 1, 2]}),
}


def _geometry(x_shape, attrs):
    rank = len(x_shape) - 2
    return {"strides": attrs.get("strides"), "pads": attrs.get("pads"), "dilations": attrs.get("dilations"),
            "group": attrs.get("group", 1)} if rank else {}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_prepared_paths(case, bias):
    x_shape, w_shape, attrs = CONV_CASES[case]
    w = r(*w_shape)
    b = r(w_shape[0]) if bias else None
    session = conv_session(x_shape, w, b, attrs=attrs)
    for _ in range(2):  # new values each run: the interior is recopied, the border stays zero
        x = r(*x_shape)
        got = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    (plan,) = conv_plans(session)
    assert isinstance(plan, _ConvPlan)
    if case.startswith("widened") or case.endswith("widened"):
        assert plan.valid is not None
    if case.startswith("not_widened") or case == "row_stride_plain":
        assert not plan.pointwise and plan.valid is None
    assert plan.pointwise == case.startswith("pointwise")
    if plan.pointwise:
        assert plan.bias == (bias and "expand" in case)


@pytest.mark.parametrize("case", ["widened_3x3", "groups_batch", "pointwise_groups_batch", "pointwise_expand",
                                  "pointwise_expand_groups_batch", "depthwise", "conv1d"])
def test_conv_runtime_weights_and_bias(case):
    """Weights (and bias) as graph inputs: packed on every run, not at resize."""
    x_shape, w_shape, attrs = CONV_CASES[case]
    session = conv_session(x_shape, r(*w_shape), r(w_shape[0]), attrs=attrs, const=False)
    for _ in range(2):
        x, w, b = r(*x_shape), r(*w_shape), r(w_shape[0])
        got = session.run(None, {"x": x, "w": w, "b": b})[0]
        np.testing.assert_allclose(got, reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    (plan,) = conv_plans(session)
    assert plan.weights is None


@pytest.mark.parametrize("kind,alpha,beta", [("relu", 0.0, 0.0), ("clip", -0.5, 0.75), ("leaky_relu", 0.1, 0.0),
                                             ("", 0.0, 0.0)])
@pytest.mark.parametrize("case", ["widened_3x3", "pointwise", "pointwise_expand", "row_stride_plain", "depthwise"])
@pytest.mark.parametrize("residual", [False, True])
def test_conv_fused_epilogue(case, kind, alpha, beta, residual):
    x_shape, w_shape, attrs = CONV_CASES[case]
    w, b = r(*w_shape), r(w_shape[0])
    attrs = {**attrs, "activation": kind, "activation_alpha": alpha, "activation_beta": beta}
    session = conv_session(x_shape, w, b, attrs=attrs, residual=residual)
    x = r(*x_shape)
    y = reference_conv(x, w, b, **_geometry(x_shape, attrs))
    feeds = {"x": x}
    if residual:
        feeds["res"] = r(*y.shape)
        y = y + feeds["res"]
    got = session.run(None, feeds)[0]
    np.testing.assert_allclose(got, activate(y, kind, alpha, beta), **TOL)


def test_conv_resize_to_a_new_shape_and_back():
    w, b = r(4, 3, 3, 3), r(4)
    attrs = {"pads": [1, 1, 1, 1], "activation": "relu"}
    session = conv_session(None, w, b, attrs=attrs, dims=("N", 3, "H", "W"))
    plans = []
    for shape in [(1, 3, 8, 8), (2, 3, 5, 7), (1, 3, 8, 8)]:
        for _ in range(2):
            x = r(*shape)
            got = session.run(None, {"x": x})[0]
            np.testing.assert_allclose(got, np.maximum(reference_conv(x, w, b, pads=[1, 1, 1, 1]), 0), **TOL)
        (plan,) = conv_plans(session)
        assert plan.buffer.shape == (shape[0], 3, shape[2] + 2, shape[3] + 2)
        plans.append(plan)
    assert session.session.resize_count == 3
    assert plans[0] is not plans[2]  # rebuilt at the resize back, not stale buffers of another shape


def test_conv_float64_and_float16():
    w64, x64 = r(4, 3, 3, 3, dtype=np.float64), r(2, 3, 6, 5, dtype=np.float64)
    session = conv_session(x64.shape, w64, None, attrs={"pads": [1, 1, 1, 1]})
    np.testing.assert_allclose(session.run(None, {"x": x64})[0], reference_conv(x64, w64, pads=[1, 1, 1, 1]),
                               rtol=1e-12, atol=1e-12)
    assert isinstance(conv_plans(session)[0], _ConvPlan)
    w16, b16, x16 = r(4, 3, 3, 3, dtype=np.float16), r(4, dtype=np.float16), r(1, 3, 6, 5, dtype=np.float16)
    session = conv_session(x16.shape, w16, b16, attrs={"pads": [1, 1, 1, 1]})
    got = session.run(None, {"x": x16})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, reference_conv(x16, w16, b16, pads=[1, 1, 1, 1]), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("case", ["widened_3x3", "row_stride_plain", "groups_batch", "pointwise_expand",
                                  "conv3d_widened"])
def test_conv_shared_scratch(monkeypatch, case):
    """Buffers past RESIDENT_BYTES live in the backend's scratch, laid out (and the padding zeroed)
    on every run; two convolutions in a row share it."""
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 0)
    x_shape, w_shape, attrs = CONV_CASES[case]
    w1, b1 = r(*w_shape), r(w_shape[0])
    group = attrs.get("group", 1)
    w2, b2 = r(2 * group, w_shape[0] // group, *w_shape[2:]), r(2 * group)
    params = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], **attrs),
             helper.make_node("Conv", ["h", "w2", "b2"], ["y"], **attrs)]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
                              [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(v, k) for k, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    # Unoptimized: two 1x1 convs would otherwise fuse into one ConvPw.
    session = wgnn.InferenceSession(wgnn.convert(model, optimize=False), providers=["numpy"])
    geometry = _geometry(x_shape, attrs)
    for _ in range(2):
        x = r(*x_shape)
        h = reference_conv(x, w1, b1, **geometry)
        want = reference_conv(h, w2, b2, **geometry)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], want, **TOL)
    plans = conv_plans(session)
    assert len(plans) == 2 and all(p.shared == (p.nbytes > 0) for p in plans) and plans[0].shared
    assert session.session.backends[0].scratch_bytes == max(p.nbytes for p in plans)


def test_conv_empty_batch_takes_the_general_path():
    w = r(4, 3, 3, 3)
    session = conv_session((0, 3, 5, 5), w, r(4), attrs={"pads": [1, 1, 1, 1]})
    assert session.run(None, {"x": np.zeros((0, 3, 5, 5), np.float32)})[0].shape == (0, 4, 5, 5)
    assert conv_plans(session) == [None]


# ------------------------------------------------------------------------------ ConvTranspose
CONV_TRANSPOSE_CASES = [
    ((1, 4, 5, 5), (4, 3, 2, 2), {"strides": [2, 2]}),  # taps tile the output: copies, no fill
    ((2, 4, 3, 4), (4, 3, 2, 2), {"strides": [2, 2], "output_padding": [1, 1]}),  # tiles + untouched margin
    ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # overlapping taps
    ((2, 4, 3, 3), (4, 1, 3, 2), {"group": 2, "dilations": [2, 1], "strides": [1, 2]}),
    ((1, 2, 5), (2, 3, 4), {"strides": [3], "output_padding": [2]}),
]


def conv_transpose_model(x_shape, w, b, attrs, activation=None, const=True):
    nodes = [helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if b is not None else []),
                              ["y" if activation is None else "t"], **attrs)]
    if activation:
        nodes.append(helper.make_node(activation, ["t"], ["y"]))
    params = {"w": w} | ({"b": b} if b is not None else {})
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)]
    if not const:
        inputs += [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape) for k, v in params.items()]
    initializers = [numpy_helper.from_array(v, k) for k, v in params.items()] if const else []
    graph = helper.make_graph(nodes, "ct", inputs, [onnx.ValueInfoProto(name="y")], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("activation", [None, "Relu"])
@pytest.mark.parametrize("index", range(len(CONV_TRANSPOSE_CASES)))
def test_conv_transpose_prepared(index, activation):
    import onnxruntime as ort

    x_shape, w_shape, attrs = CONV_TRANSPOSE_CASES[index]
    w, b = r(*w_shape), r(w_shape[1] * attrs.get("group", 1))
    model = conv_transpose_model(x_shape, w, b, attrs, activation)
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for _ in range(2):
        x = r(*x_shape)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], **TOL)
    (plan,) = conv_plans(session, "ConvTranspose")
    assert isinstance(plan, _ConvTransposePlan)
    assert plan.tiles == (index < 2)


def test_conv_transpose_runtime_weights():
    import onnxruntime as ort

    x_shape, w_shape, attrs = CONV_TRANSPOSE_CASES[3]
    channels = w_shape[1] * attrs["group"]
    model = conv_transpose_model(x_shape, r(*w_shape), r(channels), attrs, const=False)
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for _ in range(2):
        feeds = {"x": r(*x_shape), "w": r(*w_shape), "b": r(channels)}
        np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0], **TOL)


@pytest.mark.parametrize("index", range(len(CONV_TRANSPOSE_CASES)))
def test_conv_transpose_shared_scratch(monkeypatch, index):
    import onnxruntime as ort

    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 0)
    x_shape, w_shape, attrs = CONV_TRANSPOSE_CASES[index]
    w, b = r(*w_shape), r(w_shape[1] * attrs.get("group", 1))
    model = conv_transpose_model(x_shape, w, b, attrs)
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for _ in range(2):
        x = r(*x_shape)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], **TOL)
    assert conv_plans(session, "ConvTranspose")[0].shared



# --------------------------------------------------------------------------------- LayerNorm
def test_layer_norm_in_place_runs_twice_and_all_outputs():
    x1, x2 = r(2, 3, 7), r(2, 3, 7) * 5 + 3
    for x in (x1, x2):
        check_op("LayerNormalization", [x, Const(r(7)), Const(r(7))], outputs=3, opset=17, **TOL)
        check_op("LayerNormalization", [x, Const(r(3, 7))], {"axis": 1}, outputs=3, opset=17, **TOL)
        check_op("LayerNormalization", [x, Const(r(1, 7))], {"axis": 1}, opset=17, **TOL)  # broadcast scale


def test_layer_norm_stash_and_input_types_differ():
    x = rng.standard_normal((3, 6))  # float64 input, float32 statistics: the casting path
    check_op("LayerNormalization", [x, Const(rng.standard_normal(6))], outputs=3, opset=17, reference="ort",
             rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------------------- executions
def test_outputs_prepared_dedicated_and_absent():
    """Pooled outputs come from the prepared list, graph outputs and requested intermediates are
    fresh arrays, and an absent optional output (LayerNorm's mean) gets scratch storage."""
    x = r(2, 5)
    scale, bias = r(5), r(5)
    nodes = [Node("LayerNorm", ["x", "s", "b"], ["y", "", "inv"], {"axis": -1}, name="ln"),
             Node("Unary", ["y"], ["z"], {"kind": "relu"}, name="relu"),
             Node("Binary", ["z", "inv"], ["out"], {"kind": "mul"}, name="mul")]
    graph = Graph(nodes=nodes, inputs=[TensorInfo("x", "float32", (2, 5))],
                  outputs=[TensorInfo("out", "float32")], initializers={"s": scale, "b": bias})
    session = wgnn.InferenceSession(Model(graph), providers=["numpy"])
    mean = x.mean(axis=-1, keepdims=True)
    inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    y = (x - mean) * inv * scale + bias
    want = np.maximum(y, 0) * inv
    first = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(first, want, **TOL)
    again = session.run(["out", "y"], {"x": x})
    np.testing.assert_allclose(again[0], want, **TOL)
    np.testing.assert_allclose(again[1], y, **TOL)
    assert first is not again[0]


def test_no_floating_point_warnings_from_a_run():
    x = np.array([[1.0, -1.0, 0.0, 3e38]], np.float32)
    nodes = [Node("Binary", ["x", "zero"], ["q"], {"kind": "div"}, name="div"),
             Node("Binary", ["q", "x"], ["y"], {"kind": "mul"}, name="mul")]
    graph = Graph(nodes=nodes, inputs=[TensorInfo("x", "float32", (1, 4))], outputs=[TensorInfo("y", "float32")],
                  initializers={"zero": np.zeros((1, 4), np.float32)})
    session = wgnn.InferenceSession(Model(graph), providers=["numpy"])
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = session.run(None, {"x": x})[0]
    assert np.isinf(y[0, 0]) and np.isinf(y[0, 1]) and np.isnan(y[0, 2])
    assert np.geterr() == before  # the errstate did not leak out of the run
