"""The numpy backend's prepared fast paths: Conv / ConvTranspose with buffers built at resize
(padded input, im2col window, widened output grid, stride phases, packed weights), the table erf, in-place
LayerNorm, and the executions' prepared output lists. Each is checked against an independent
reference (math.erf, a direct numpy convolution, onnxruntime), across runs with new values and
across resizes."""
import math
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import Const, check_op
from numpy.lib.stride_tricks import sliding_window_view
from onnx import helper, numpy_helper
from wgnn.backends.numpy import blas as numpy_blas
from wgnn.backends.numpy import conv as numpy_conv
from wgnn.backends.numpy.conv import _ConvPlan, _ConvTransposePlan
from wgnn.backends.numpy.elementwise import ERF_CHUNK, UNARY_FUNCS, erf
from wgnn.engine.graph import Graph, Model, Node, TensorInfo

import wgnn

rng = np.random.default_rng(7)
TOL = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture(autouse=True)
def numpy_plans(monkeypatch):
    """These are the numpy plans' tests: depthwise convs take them, not the compiled loop that
    stands in for them where numba is installed (tests/backends/test_numpy_compiled.py)."""
    monkeypatch.setenv("WGNN_NUMPY_COMPILED", "0")


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


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_erf_and_gelu_in_chunks(dtype):
    """Past ERF_CHUNK elements erf and GELU run chunk by chunk into one output: every chunk,
    the short last one included, lands where it belongs, special values too."""
    x = np.linspace(-8, 8, 3 * ERF_CHUNK + 5)
    x[[7, ERF_CHUNK, 2 * ERF_CHUNK + 1, -1]] = [np.inf, -np.inf, np.nan, -0.0]
    x = x.astype(dtype).reshape(1, -1)
    wide = x.astype(np.float64).ravel()
    with np.errstate(invalid="ignore"):
        want_erf = np.array([math.erf(v) for v in wide])
        want_gelu = wide * 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in wide]))
    want_gelu[7] = np.inf  # inf * (1 + 1) / 2; -inf * 0 is NaN in the formula, 0 in the limit
    with np.errstate(invalid="ignore"):  # as in a session: -inf * 0
        got_erf, got_gelu = erf(x), UNARY_FUNCS["gelu"](x, 0.0, 0.0)
    for got, want in ((got_erf, want_erf), (got_gelu, want_gelu)):
        assert got.dtype == dtype and got.shape == x.shape
        tol = 1e-3 if dtype == np.float16 else 2e-7
        np.testing.assert_allclose(got.ravel().astype(np.float64), want, rtol=tol, atol=tol, equal_nan=True)
    assert np.signbit(got_erf[0, -1]) and got_erf[0, -1] == 0


def test_gelu_float32_by_the_phi_table():
    """Float32 GELU interpolates the normal CDF on a 2^-11 grid in float32: within 1.5 ulp of
    x Phi(x) from 2 on, 8 ulp nearer 0, 1.2e-8 below -2 (where the results are under 0.05, many ulp
    off for the float64 path too), everywhere within 2e-7 (1 + |y|); zeros keep
    their sign; the grid's ends and points; in place, and into a strided output (the float64 path)."""
    from wgnn.backends.numpy.elementwise import _PHI_LIMIT, _PHI_STEP

    gelu = UNARY_FUNCS["gelu"]
    x = np.concatenate([np.linspace(-10, 10, 400_001), np.logspace(-30, 1, 4000), -np.logspace(-30, 1, 4000),
                        np.arange(-_PHI_LIMIT, _PHI_LIMIT, 37 * _PHI_STEP)]).astype(np.float32)
    got = gelu(x, 0.0, 0.0)
    assert got.dtype == np.float32
    wide = x.astype(np.float64)
    want = wide * 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in wide])
    error = np.abs(got.astype(np.float64) - want)
    ulps = error / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert ulps[wide >= 2].max() <= 1.5
    assert ulps[np.abs(wide) < 2].max() <= 8
    assert error[wide < -2].max() < 1.2e-8
    assert (error <= 2e-7 * (1 + np.abs(want))).all()
    zeros = gelu(np.array([0.0, -0.0], np.float32), 0.0, 0.0)
    assert zeros[0] == 0 and not np.signbit(zeros[0]) and np.signbit(zeros[1])
    inplace = x.copy()
    assert gelu(inplace, 0.0, 0.0, out=inplace) is inplace
    np.testing.assert_array_equal(inplace, got)
    strided = np.empty((2, x.size), np.float32)[0, ::2][:x.size // 2]
    gelu(x[:x.size // 2], 0.0, 0.0, out=strided)
    np.testing.assert_allclose(strided, got[:x.size // 2], rtol=1e-6, atol=1e-7)


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
    check_fused_epilogue(*CONV_CASES[case], kind, alpha, beta, residual)


def check_fused_epilogue(x_shape, w_shape, attrs, kind, alpha, beta, residual):
    """A Conv with the fused activation (and residual) against the reference; returns the session."""
    w, b = r(*w_shape), r(w_shape[0])
    attrs = {**attrs, "activation": kind, "activation_alpha": alpha, "activation_beta": beta}
    session = conv_session(x_shape, w, b, attrs=attrs, residual=residual)
    check_epilogue_run(session, x_shape, w, b, attrs, residual)
    return session


def check_epilogue_run(session, x_shape, w, b, attrs, residual):
    """One run of a Conv session with attrs' fused activation (and the residual) against the reference."""
    x = r(*x_shape)
    y = reference_conv(x, w, b, **_geometry(x_shape, attrs))
    feeds = {"x": x}
    if residual:
        feeds["res"] = r(*y.shape)
        y = y + feeds["res"]
    want = activate(y, attrs["activation"], attrs["activation_alpha"], attrs["activation_beta"])
    np.testing.assert_allclose(session.run(None, feeds)[0], want, **TOL)


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


@pytest.mark.parametrize("resident", [0, None])
@pytest.mark.parametrize("case", ["widened_3x3", "row_stride_plain", "groups_batch", "pointwise_expand",
                                  "conv3d_widened", "phased_regular_batch"])
def test_conv_shared_scratch(monkeypatch, case, resident):
    """Im2col and result buffers live in the backend's scratch, laid out on every run; two
    convolutions in a row share it. The padded input stays the plan's own, its zero border
    written once, up to RESIDENT_BYTES (resident=None: the default); past it (0) it is in the
    scratch too, and its padding is zeroed on every run."""
    if resident is not None:
        monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", resident)
    x_shape, w_shape, attrs = CONV_CASES.get(case) or PHASE_CASES[case.removeprefix("phased_")][:3]
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
    assert plans[0].phased == case.startswith("phased")
    for plan in plans:
        if plan.pointwise:  # no padded input
            continue
        assert (plan.first is not None) == (resident is None)
        if plan.first is not None:  # the padded input (and its zero border) outside the scratch
            padded = plan.buffer if not plan.phased else plan.fills[0][0]
            assert np.shares_memory(padded, plan.first)
            assert not np.shares_memory(plan.first, session.session.backends[0]._scratch)


def test_conv_empty_batch_takes_the_general_path():
    w = r(4, 3, 3, 3)
    session = conv_session((0, 3, 5, 5), w, r(4), attrs={"pads": [1, 1, 1, 1]})
    assert session.run(None, {"x": np.zeros((0, 3, 5, 5), np.float32)})[0].shape == (0, 4, 5, 5)
    assert conv_plans(session) == [None]


# ------------------------------------------------------------------------- Conv: im2col bands
BAND_CASES = sorted(case for case in CONV_CASES if not case.startswith(("pointwise", "one_by_one")))


def banded_session(monkeypatch, spec, rows_per_band, *, bias=True, const=True, attrs=None, residual=False):
    """A Conv session of spec (x shape, w shape, attrs), run once, whose im2col buffer holds
    rows_per_band output rows (of the plan's first pixel axis; 0: a one-byte budget, so one row);
    returns (session, its plan, w, b)."""
    x_shape, w_shape, case_attrs = spec
    attrs = {**case_attrs, **(attrs or {})}
    w, b = r(*w_shape), r(w_shape[0]) if bias else None
    feeds = {"x": r(*x_shape)}
    if residual:
        feeds["res"] = r(*reference_conv(feeds["x"], w, b, **_geometry(x_shape, attrs)).shape)
    if not const:
        feeds.update({"w": w, "b": b} if bias else {"w": w})

    def prepared(budget):
        monkeypatch.setattr(numpy_conv, "IM2COL_BAND_BYTES", budget)
        session = conv_session(x_shape, w, b, attrs=attrs, residual=residual, const=const)
        session.run(None, feeds)
        (plan,) = conv_plans(session)
        return session, plan

    budget = 1
    if rows_per_band:
        _, whole = prepared(1 << 40)
        row_bytes = (whole.sizes[1] // whole.grid * whole.row_columns if whole.phased
                     else whole.sizes[1] // whole.bands[0][1]) * 4
        budget = rows_per_band * row_bytes
    return (*prepared(budget), w, b)


@pytest.mark.parametrize("rows_per_band", [0, 2])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", BAND_CASES)
def test_conv_im2col_bands(monkeypatch, case, bias, rows_per_band):
    """An im2col buffer past IM2COL_BAND_BYTES holds one band of output rows at a time, filled and
    multiplied band after band (the last one shorter where the rows do not divide): the same
    results, run after run."""
    x_shape, _, attrs = CONV_CASES[case]
    session, plan, w, b = banded_session(monkeypatch, CONV_CASES[case], rows_per_band, bias=bias)
    for _ in range(2):
        x = r(*x_shape)
        got = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    if not plan.phased:
        rows, band = plan.bands[-1][1], rows_per_band or 1
        assert plan.bands == [(first, min(first + band, rows)) for first in range(0, rows, band)]
        assert len(plan.bands) > 1 or rows <= band


@pytest.mark.parametrize("case", ["widened_3x3", "depthwise", "groups_batch", "conv3d_widened"])
def test_conv_im2col_bands_epilogue_weights_and_scratch(monkeypatch, case):
    """Bands with the fused residual and activation through the widened crop, weights packed on
    every run, and the buffers in the shared scratch."""
    x_shape, _, attrs = CONV_CASES[case]
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 0)
    clip = {"activation": "clip", "activation_alpha": -0.5, "activation_beta": 0.75}
    session, plan, w, b = banded_session(monkeypatch, CONV_CASES[case], 2, attrs=clip, residual=True)
    assert plan.shared and len(plan.bands) > 1
    x = r(*x_shape)
    y = reference_conv(x, w, b, **_geometry(x_shape, attrs))
    res = r(*y.shape)
    np.testing.assert_allclose(session.run(None, {"x": x, "res": res})[0], np.clip(y + res, -0.5, 0.75), **TOL)
    session, plan, *_ = banded_session(monkeypatch, CONV_CASES[case], 2, const=False)
    assert plan.weights is None and len(plan.bands) > 1
    x, w, b = r(*x_shape), r(*w.shape), r(w.shape[0])
    np.testing.assert_allclose(session.run(None, {"x": x, "w": w, "b": b})[0],
                               reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)


def test_conv_im2col_bands_only_past_the_budget():
    """At the default budget the zoo-sized convs keep one band; a 3x3 64 -> 64 conv at 56 x 56 (a
    7.5 MB im2col) takes bands within the budget (2 MiB)."""
    (small,) = conv_plans(conv_session((1, 16, 16, 16), r(16, 1, 3, 3), r(16), attrs={"group": 16,
                                                                                     "pads": [1, 1, 1, 1]}))
    assert len(small.bands) == 1
    (large,) = conv_plans(conv_session((1, 64, 56, 56), r(64, 64, 3, 3), r(64), attrs={"pads": [1, 1, 1, 1]}))
    assert len(large.bands) > 1 and math.prod(large.cols_shape) * 4 <= numpy_conv.IM2COL_BAND_BYTES


# --------------------------------------------------------------- Conv: depthwise in channel chunks
# name: (x shape, w shape, attrs), all 2-D with one input channel per group
DEPTHWISE_CASES = {
    "widened_batch": ((2, 7, 6, 5), (7, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}),
    "widened_no_pads_1x3": ((1, 5, 6, 9), (5, 1, 1, 3), {"group": 5}),  # the last run reads past the chunk
    "dilated_widened": ((1, 6, 9, 10), (6, 1, 3, 3), {"group": 6, "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "stride2_asymmetric_odd": ((1, 9, 9, 7), (9, 1, 3, 3), {"group": 9, "strides": [2, 2], "pads": [0, 1, 2, 0]}),
    "stride_2_1": ((1, 5, 8, 9), (5, 1, 3, 3), {"group": 5, "strides": [2, 1], "pads": [1, 1, 1, 1]}),
    "multiplier_2_batch": ((2, 4, 7, 7), (8, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "dilated_5x5": ((1, 6, 11, 10), (6, 1, 5, 5), {"group": 6, "dilations": [2, 2], "pads": [4, 4, 4, 4]}),
    # every tap in the even phases: one grid of four
    "stride2_dilated2": ((1, 5, 10, 9), (5, 1, 3, 3), {"group": 5, "strides": [2, 2], "dilations": [2, 2],
                                                      "pads": [2, 2, 2, 2]}),
    "stride3_5x5": ((1, 4, 13, 11), (4, 1, 5, 5), {"group": 4, "strides": [3, 3], "pads": [2, 1, 2, 1]}),
    "stride_1_2_2x3": ((2, 3, 7, 10), (3, 1, 2, 3), {"group": 3, "strides": [1, 2], "pads": [0, 1, 1, 0]}),
    # 1-D, as 2-D of height 1
    "conv1d_batch_k5": ((2, 7, 40), (7, 1, 5), {"group": 7, "pads": [2, 2]}),
    "conv1d_stride2_dilated": ((1, 6, 37), (6, 1, 3), {"group": 6, "strides": [2], "dilations": [2], "pads": [1, 2]}),
    # a stride far past the kernel (the fuzzer's (2, 1048576) enumerated 2^21 phases at resize)
    "stride_far_past_kernel": ((1, 5, 6, 9), (5, 1, 3, 3), {"group": 5, "strides": [2, 4096], "pads": [1, 1, 1, 8000]}),
}


def depthwise_session(monkeypatch, case, channels_per_chunk, *, bias=True, attrs=None, residual=False,
                      const=True):
    """A Conv session of a DEPTHWISE_CASES case whose _DepthwisePlan takes channels_per_chunk
    channels per chunk (DEPTHWISE_CHUNK_BYTES set to that many channels' im2col); returns
    (session, plan, w, b)."""
    x_shape, w_shape, case_attrs = DEPTHWISE_CASES[case]
    attrs = {**case_attrs, **(attrs or {})}
    w, b = r(*w_shape), r(w_shape[0]) if bias else None
    with monkeypatch.context() as patch:  # one chunk of every channel: the size of one channel's im2col
        patch.setattr(numpy_conv, "_depthwise_chunks_fit", lambda *args: True)
        (whole,) = conv_plans(conv_session(x_shape, w, b, attrs=attrs))
    channel_bytes = whole.cols_shape[1] * whole.cols_shape[2] * 4
    monkeypatch.setattr(numpy_conv, "DEPTHWISE_CHUNK_BYTES", channels_per_chunk * channel_bytes)
    session = conv_session(x_shape, w, b, attrs=attrs, residual=residual, const=const)
    if residual:  # its shape is unknown until a run
        x = r(*x_shape)
        feeds = {"x": x, "res": r(*reference_conv(x, w, b, **_geometry(x_shape, attrs)).shape)}
        session.run(None, feeds if const else {**feeds, "w": w, "b": b})
    (plan,) = conv_plans(session)
    assert isinstance(plan, numpy_conv._DepthwisePlan) and plan.chunk == channels_per_chunk
    return session, plan, w, b


def test_depthwise_phases_come_from_the_taps(monkeypatch):
    """The chunked depthwise plan looks only at the stride phases its taps read: 2 x 3 for a 3x3
    kernel at strides (2, 4096), not the 8192 phases of the strides."""
    looked_at = []
    phase_taps = numpy_conv._phase_taps
    monkeypatch.setattr(numpy_conv, "_phase_taps", lambda *args: looked_at.append(args[-1]) or phase_taps(*args))
    _, plan, _, _ = depthwise_session(monkeypatch, "stride_far_past_kernel", 2)
    assert plan.phases_shape[0] == 6 and len(set(looked_at)) == 6


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("channels_per_chunk", [1, 2, 3])
@pytest.mark.parametrize("case", sorted(DEPTHWISE_CASES))
def test_conv_depthwise_in_chunks(monkeypatch, case, channels_per_chunk, bias):
    """Chunk after chunk of channels (the last one shorter where they do not divide), image after
    image: the same results as the direct convolution, run after run (the padding stays zero)."""
    x_shape, _, attrs = DEPTHWISE_CASES[case]
    session, plan, w, b = depthwise_session(monkeypatch, case, channels_per_chunk, bias=bias)
    channels = x_shape[1]
    assert plan.chunks == [(first, min(first + channels_per_chunk, channels))
                           for first in range(0, channels, channels_per_chunk)]
    # one phase grid per stride phase some tap reads, with stride 1; rows one grid row apart
    # (widened) except where that adds too many columns (18 for 10 outputs, 5 for 3) or none
    # (the far stride's phase rows are 2 cells for 2 outputs)
    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    kernel = DEPTHWISE_CASES[case][1][2:]
    assert plan.phases_shape[0] == math.prod(len({k * d % s for k in range(size)})
                                             for size, d, s in zip(kernel, dilations, strides))
    assert (plan.wide is None) == (case in ("dilated_5x5", "stride3_5x5", "stride_far_past_kernel"))
    for _ in range(2):
        x = r(*x_shape)
        np.testing.assert_allclose(session.run(None, {"x": x})[0],
                                   reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)


@pytest.mark.parametrize("kind,alpha,beta", [("relu", 0.0, 0.0), ("clip", -0.5, 0.75), ("leaky_relu", 0.1, 0.0),
                                             ("", 0.0, 0.0)])
@pytest.mark.parametrize("case", ["widened_batch", "multiplier_2_batch", "conv1d_batch_k5"])
@pytest.mark.parametrize("residual", [False, True])
def test_conv_depthwise_chunks_epilogue(monkeypatch, case, kind, alpha, beta, residual):
    """The fused residual and activation per chunk, through the widened crop or in the output."""
    x_shape, _, attrs = DEPTHWISE_CASES[case]
    attrs = {**attrs, "activation": kind, "activation_alpha": alpha, "activation_beta": beta}
    session, _, w, b = depthwise_session(monkeypatch, case, 3, residual=residual, attrs=attrs)
    check_epilogue_run(session, x_shape, w, b, attrs, residual)


@pytest.mark.parametrize("case", ["widened_batch", "stride2_asymmetric_odd", "conv1d_stride2_dilated"])
def test_conv_depthwise_chunks_runtime_weights_and_float16(monkeypatch, case):
    """Weights and bias as graph inputs (packed on every run); float16 throughout."""
    x_shape, w_shape, attrs = DEPTHWISE_CASES[case]
    session, plan, *_ = depthwise_session(monkeypatch, case, 2, const=False)
    assert plan.weights is None
    for _ in range(2):
        x, w, b = r(*x_shape), r(*w_shape), r(w_shape[0])
        np.testing.assert_allclose(session.run(None, {"x": x, "w": w, "b": b})[0],
                                   reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    w16, b16, x16 = r(*w_shape, dtype=np.float16), r(w_shape[0], dtype=np.float16), r(*x_shape, dtype=np.float16)
    session = conv_session(x_shape, w16, b16, attrs=attrs)
    (plan,) = conv_plans(session)
    assert isinstance(plan, numpy_conv._DepthwisePlan)
    got = session.run(None, {"x": x16})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, reference_conv(x16, w16, b16, **_geometry(x_shape, attrs)), rtol=2e-2, atol=2e-2)


def test_conv_depthwise_chunks_share_the_scratch(monkeypatch):
    """Two chunked depthwise convs around a plain conv, all in the backend's shared scratch: each
    run lays the zero padding and the row of ones out again over what the step before wrote."""
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 0)
    monkeypatch.setattr(numpy_conv, "DEPTHWISE_CHUNK_BYTES", 2 * 10 * 8 * 10 * 4)  # two channels at 8 x 8
    c = 6
    params = {"w1": r(c, 1, 3, 3), "b1": r(c), "w2": r(c, c, 3, 3), "b2": r(c), "w3": r(c, 1, 3, 3), "b3": r(c)}
    pads = {"pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h1"], group=c, **pads),
             helper.make_node("Conv", ["h1", "w2", "b2"], ["h2"], **pads),
             helper.make_node("Conv", ["h2", "w3", "b3"], ["y"], group=c, **pads)]
    graph = helper.make_graph(nodes, "three", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                             (1, c, 8, 8))],
                              [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(v, k) for k, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = wgnn.InferenceSession(wgnn.convert(model, optimize=False), providers=["numpy"])
    plans = conv_plans(session)
    assert [type(p).__name__ for p in plans] == ["_DepthwisePlan", "_ConvPlan", "_DepthwisePlan"]
    assert all(p.shared for p in plans) and plans[0].chunk == 2
    geometry = {"pads": [1, 1, 1, 1]}
    for _ in range(2):
        x = r(1, c, 8, 8)
        h = reference_conv(x, params["w1"], params["b1"], group=c, **geometry)
        h = reference_conv(h, params["w2"], params["b2"], **geometry)
        want = reference_conv(h, params["w3"], params["b3"], group=c, **geometry)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], want, **TOL)


def test_conv_paths_named_for_the_per_op_table(monkeypatch):
    """Each prepared conv path names itself (`wgnn bench --per-op`'s kernel column)."""
    def variant(session):
        (execution,) = [ex for segment in session.session.segments for _, ex in segment.steps]
        return execution.variant()

    session, *_ = depthwise_session(monkeypatch, "stride2_asymmetric_odd", 2)
    assert variant(session) == "depthwise 5x2ch, 4 phases, widened"  # 9 channels: 4 chunks of 2 and one of 1
    session, *_ = depthwise_session(monkeypatch, "dilated_5x5", 4)
    assert variant(session) == "depthwise 2x4ch"
    assert variant(conv_session((1, 7, 5, 3), r(4, 7, 1, 1))) == "matmul"
    assert variant(conv_session((1, 5, 8, 8), r(6, 5, 3, 3), attrs={"pads": [1, 1, 1, 1]})) == "im2col, widened"
    session, *_ = banded_session(monkeypatch, CONV_CASES["row_stride_plain"], 2)
    assert variant(session) == "im2col, 2 bands"  # 4 output rows (stride 2), 2 a band
    w = np.ones((2, 3, 3, 3), np.int32)
    assert variant(conv_session((1, 3, 5, 5), w)) == "general (any dtype)"


def test_conv_depthwise_chunks_rule():
    """Past DEPTHWISE_CHUNK_BYTES of im2col a 1-D or 2-D depthwise conv goes in chunks
    (MobileNetV2@224's 144 x 56x56: 18.7 MB whole); under it, or where one channel alone is past
    it, or with more than one input channel per group, or in 3-D, it takes the whole-tensor plan."""
    def plan(x_shape, w_shape, group, **attrs):
        (p,) = conv_plans(conv_session(x_shape, r(*w_shape), r(w_shape[0]), attrs={"group": group, **attrs}))
        return type(p).__name__

    pads = {"pads": [1, 1, 1, 1]}
    assert plan((1, 144, 56, 56), (144, 1, 3, 3), 144, **pads) == "_DepthwisePlan"
    assert plan((1, 96, 112, 112), (96, 1, 3, 3), 96, strides=[2, 2], **pads) == "_DepthwisePlan"
    assert plan((1, 144, 8, 8), (144, 1, 3, 3), 144, **pads) == "_ConvPlan"
    assert plan((1, 2, 200, 200), (2, 1, 3, 3), 2, **pads) == "_ConvPlan"  # 1.6 MB a channel
    assert plan((1, 144, 56, 56), (144, 2, 3, 3), 72, **pads) == "_ConvPlan"
    assert plan((1, 144, 3000), (144, 1, 3), 144, pads=[1, 1]) == "_DepthwisePlan"
    assert plan((1, 64, 16, 24, 24), (64, 1, 3, 3, 3), 64, pads=[1] * 6) == "_ConvPlan"


# ------------------------------------------------------------------------- Conv: stride phases
# name: (x shape, w shape, attrs, one folded fill copy); each is phased by the rule (use_phases)
PHASE_CASES = {
    "depthwise_even": ((1, 37, 8, 8), (37, 1, 3, 3), {"group": 37, "strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    # odd sizes: phases one row / column shorter, filled one by one; batch 2
    "depthwise_odd_batch": ((2, 29, 9, 9), (29, 1, 3, 3), {"group": 29, "strides": [2, 2], "pads": [1, 1, 1, 1]},
                            False),
    "depthwise_asymmetric_pads": ((2, 37, 8, 9), (37, 1, 3, 3), {"group": 37, "strides": [2, 2],
                                                                  "pads": [0, 1, 2, 0]}, False),
    "depthwise_no_pads": ((1, 37, 10, 10), (37, 1, 3, 3), {"group": 37, "strides": [2, 2]}, True),
    "depthwise_5x5": ((1, 13, 12, 12), (13, 1, 5, 5), {"group": 13, "strides": [2, 2], "pads": [2, 2, 2, 2]}, True),
    "depthwise_multiplier": ((1, 29, 8, 8), (58, 1, 3, 3), {"group": 29, "strides": [2, 2], "pads": [1, 1, 1, 1]},
                             True),
    # dilation 2: every tap in the even phases, the odd ones neither filled nor read
    "depthwise_dilated": ((1, 37, 10, 10), (37, 1, 3, 3), {"group": 37, "strides": [2, 2], "pads": [2, 2, 2, 2],
                                                           "dilations": [2, 2]}, False),
    "depthwise_stride_2_1": ((1, 37, 8, 7), (37, 1, 3, 3), {"group": 37, "strides": [2, 1], "pads": [1, 1, 1, 1]},
                             True),
    "regular_batch": ((2, 7, 16, 16), (6, 7, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    "groups": ((1, 15, 16, 16), (9, 5, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    "stem_7x7": ((1, 3, 16, 16), (5, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, True),
    "conv3d_depthwise": ((1, 9, 6, 6, 6), (9, 1, 3, 3, 3), {"group": 9, "strides": [2, 2, 2], "pads": [1] * 6}, True),
}


def phased_plan(session):
    (plan,) = conv_plans(session)
    assert isinstance(plan, _ConvPlan) and plan.phased
    return plan


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", sorted(PHASE_CASES))
def test_conv_stride_phases(case, bias):
    x_shape, w_shape, attrs, fold = PHASE_CASES[case]
    w = r(*w_shape)
    b = r(w_shape[0]) if bias else None
    session = conv_session(x_shape, w, b, attrs=attrs)
    for _ in range(2):  # new values each run: the phases are refilled, their zero border stays
        x = r(*x_shape)
        got = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    plan = phased_plan(session)
    assert (plan.fold is not None) == fold
    strides = attrs["strides"]
    assert plan.phases_shape[0] == math.prod(strides)
    assert sorted(plan.order) == list(range(math.prod(w_shape[2:])))  # every tap, once
    if case == "depthwise_dilated":
        assert len(plan.copies) == 1 and len(plan.fills) == 1  # only phase (0, 0) is read


@pytest.mark.parametrize("case", ["depthwise_even", "depthwise_odd_batch", "regular_batch", "stem_7x7"])
def test_conv_stride_phases_against_onnx_reference(case):
    x_shape, w_shape, attrs, _ = PHASE_CASES[case]
    check_op("Conv", [r(*x_shape), Const(r(*w_shape)), Const(r(w_shape[0]))], attrs, backends=["numpy"], **TOL)


def test_conv_stride_phases_rule():
    """The rule on the zoo's strided convs and the measured losing classes."""
    def rule(x_shape, m, kernel, strides, group=1, dilations=None, pads=0):
        n, c, *sizes = x_shape
        dilations = dilations or [1] * len(sizes)
        out = [(s + 2 * pads - (k - 1) * d - 1) // st + 1
               for s, k, d, st in zip(sizes, kernel, dilations, strides)]
        return numpy_conv.use_phases(n, c, group, m // group, kernel, strides, dilations, sizes, out)

    # MobileNetV2@32's stride-2 depthwise convs (ConvDwPwExpand stages) take phases, its stem does not
    assert rule((1, 96, 16, 16), 96, [3, 3], [2, 2], group=96, pads=1)
    assert rule((1, 144, 8, 8), 144, [3, 3], [2, 2], group=144, pads=1)
    assert not rule((1, 3, 32, 32), 16, [3, 3], [2, 2], pads=1)
    assert rule((1, 3, 32, 32), 16, [7, 7], [2, 2], pads=3)  # ResNet's stem
    assert not rule((1, 16, 8, 8), 32, [3, 3], [2, 2], pads=1)  # 32 outputs per group
    assert not rule((1, 16, 8, 8), 32, [1, 1], [2, 2])
    assert not rule((1, 8, 8, 8), 8, [3, 3], [2, 2], group=8, pads=1)  # too few rows for the extra calls
    assert not rule((1, 96, 24, 24), 96, [3, 3], [3, 3], group=96, pads=1)  # stride 3
    assert not rule((1, 128, 64), 128, [5], [2], group=128, pads=2)  # 1-D
    assert not rule((1, 96, 16, 16), 96, [3, 3], [1, 1], group=96, pads=1)  # stride 1
    # an odd input size costs one fill per phase: more rows needed
    assert rule((1, 40, 8, 8), 40, [3, 3], [2, 2], group=40, pads=1)
    assert not rule((1, 40, 9, 9), 40, [3, 3], [2, 2], group=40, pads=1)
    numpy_conv.PHASES = False
    try:
        assert not rule((1, 96, 16, 16), 96, [3, 3], [2, 2], group=96, pads=1)
    finally:
        numpy_conv.PHASES = True


FORCED_CASES = [
    # (x shape, w shape, attrs, one folded fill copy): layouts the rule does not pick, with phases forced on
    ((1, 3, 9, 8), (4, 3, 1, 1), {"strides": [2, 2]}, False),  # 1x1: one phase read
    ((1, 6, 8, 8), (4, 6, 1, 1), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, False),  # 1x1 s2 padded
    ((2, 4, 7, 8), (4, 2, 1, 1), {"group": 2, "strides": [3, 2], "pads": [1, 0, 0, 1]}, False),
    ((1, 3, 11, 10), (4, 3, 3, 3), {"strides": [3, 3], "pads": [1, 2, 2, 1]}, False),  # stride 3
    ((1, 3, 12, 9), (4, 3, 3, 3), {"strides": [3, 3], "pads": [3, 0, 3, 3]}, True),  # pads multiples of 3
    ((1, 2, 8, 8), (3, 2, 4, 4), {"strides": [4, 4]}, True),  # patches: one tap per phase
    ((1, 5, 13, 11), (5, 1, 3, 3), {"group": 5, "strides": [2, 3], "dilations": [3, 2], "pads": [3, 1, 2, 2]},
     False),
    ((1, 3, 6, 6), (4, 3, 2, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [2, 1]}, False),
    ((2, 4, 5, 6, 5), (4, 2, 3, 1, 2), {"group": 2, "strides": [2, 1, 2]}, False),  # 3-D, odd sizes
    ((1, 2, 4, 6, 4), (2, 1, 3, 3, 3), {"group": 2, "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 2, 0]}, True),
    ((1, 2, 3, 3), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, False),  # phases of 2 and 1 cells
    ((1, 3, 11), (4, 3, 3), {"strides": [2], "pads": [2, 1], "dilations": [2]}, False),  # 1-D
]


@pytest.mark.parametrize("index", range(len(FORCED_CASES)))
def test_conv_stride_phases_any_layout(monkeypatch, index):
    """The phase layout is exact for any strides, dilations, pads and sizes, also where the rule
    keeps the plain im2col; with inf and NaN inputs too (the extra columns never leak)."""
    monkeypatch.setattr(numpy_conv, "use_phases", lambda *args: max(args[5]) > 1)
    x_shape, w_shape, attrs, fold = FORCED_CASES[index]
    w, b = r(*w_shape), r(w_shape[0])
    session = conv_session(x_shape, w, b, attrs=attrs)
    for _ in range(2):
        x = r(*x_shape)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], reference_conv(x, w, b, **_geometry(x_shape, attrs)),
                                   **TOL)
    assert (phased_plan(session).fold is not None) == fold
    x = r(*x_shape)
    x.reshape(-1)[::7] = np.inf
    x.reshape(-1)[3::11] = np.nan
    got = session.run(None, {"x": x})[0]
    monkeypatch.setattr(numpy_conv, "PHASES", False)
    monkeypatch.setattr(numpy_conv, "use_phases", lambda *args: False)
    plain = conv_session(x_shape, w, b, attrs=attrs)
    want = plain.run(None, {"x": x})[0]
    assert not conv_plans(plain)[0].phased
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])


@pytest.mark.parametrize("case", ["depthwise_even", "depthwise_odd_batch", "groups"])
def test_conv_stride_phases_same_as_plain(monkeypatch, case):
    """The same products as the plain im2col, only summed in another order: equal to float32
    rounding, run after run."""
    x_shape, w_shape, attrs, _ = PHASE_CASES[case]
    w, b = r(*w_shape), r(w_shape[0])
    phased = conv_session(x_shape, w, b, attrs=attrs)
    monkeypatch.setattr(numpy_conv, "PHASES", False)
    plain = conv_session(x_shape, w, b, attrs=attrs)
    assert phased_plan(phased) and not conv_plans(plain)[0].phased
    for _ in range(2):
        x = r(*x_shape)
        np.testing.assert_allclose(phased.run(None, {"x": x})[0], plain.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["depthwise_even", "depthwise_multiplier", "regular_batch", "depthwise_dilated"])
def test_conv_stride_phases_runtime_weights(case):
    """Weights and bias as graph inputs: packed on every run in the phases' tap order."""
    x_shape, w_shape, attrs, _ = PHASE_CASES[case]
    session = conv_session(x_shape, r(*w_shape), r(w_shape[0]), attrs=attrs, const=False)
    for _ in range(2):
        x, w, b = r(*x_shape), r(*w_shape), r(w_shape[0])
        got = session.run(None, {"x": x, "w": w, "b": b})[0]
        np.testing.assert_allclose(got, reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    assert phased_plan(session).weights is None


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("kind,alpha,beta", [("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("", 0.0, 0.0)])
@pytest.mark.parametrize("case", ["depthwise_even", "depthwise_stride_2_1", "groups"])
def test_conv_stride_phases_epilogue(case, kind, alpha, beta, residual):
    """The widened result's crop goes through the fused residual and activation."""
    session = check_fused_epilogue(*PHASE_CASES[case][:3], kind, alpha, beta, residual)
    assert phased_plan(session).valid is not None


@pytest.mark.parametrize("rows_per_band", [0, 2])
@pytest.mark.parametrize("case", sorted(PHASE_CASES))
def test_conv_stride_phases_in_bands(monkeypatch, case, rows_per_band):
    """Phases whose im2col passes IM2COL_BAND_BYTES: rows span a band apart instead of a grid, each
    tap's copy takes every channel's band of its phase, band after band; then with the fused
    residual and activation on the widened crop, weights packed on every run and the buffers in
    the shared scratch."""
    x_shape, _, attrs, _ = PHASE_CASES[case]
    session, plan, w, b = banded_session(monkeypatch, PHASE_CASES[case][:3], rows_per_band)
    for _ in range(2):
        x = r(*x_shape)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], reference_conv(x, w, b, **_geometry(x_shape, attrs)),
                                   **TOL)
    rows, band = plan.bands[-1][1], rows_per_band or 1
    assert plan.phased and plan.bands == [(first, min(first + band, rows)) for first in range(0, rows, band)]
    assert len(plan.bands) > 1 and plan.span == band * plan.row_columns < plan.grid
    clip = {"activation": "clip", "activation_alpha": -0.5, "activation_beta": 0.75}
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 0)  # and in the backend's shared scratch
    session, plan, w, b = banded_session(monkeypatch, PHASE_CASES[case][:3], rows_per_band, attrs=clip,
                                         residual=True, const=False)
    x = r(*x_shape)
    y = reference_conv(x, w, b, **_geometry(x_shape, attrs))
    res = r(*y.shape)
    got = session.run(None, {"x": x, "w": w, "b": b, "res": res})[0]
    np.testing.assert_allclose(got, np.clip(y + res, -0.5, 0.75), **TOL)
    assert plan.phased and plan.shared and len(plan.bands) > 1 and plan.weights is None


@pytest.mark.parametrize("case", ["depthwise_even", "regular_batch", "conv3d_depthwise"])
def test_conv_stride_phases_one_band_is_no_band(monkeypatch, case):
    """A budget under the phases' whole-grid im2col but over its output rows' columns: one band,
    so the plan keeps the whole-grid copies."""
    x_shape, w_shape, attrs, _ = PHASE_CASES[case]
    out_rows = reference_conv(r(*x_shape), r(*w_shape), **_geometry(x_shape, attrs)).shape[2]
    session, plan, w, b = banded_session(monkeypatch, PHASE_CASES[case][:3], out_rows)
    assert plan.phased and plan.sizes[1] * 4 > numpy_conv.IM2COL_BAND_BYTES  # the whole grid is past it
    assert plan.bands == () and plan.span == plan.grid
    x = r(*x_shape)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], reference_conv(x, w, b, **_geometry(x_shape, attrs)),
                               **TOL)


def test_conv_stride_phases_resize():
    w, b = r(37, 1, 3, 3), r(37)
    attrs = {"group": 37, "strides": [2, 2], "pads": [1, 1, 1, 1]}
    session = conv_session(None, w, b, attrs=attrs, dims=("N", 37, "H", "W"))
    shapes = [(1, 37, 8, 8), (2, 37, 9, 7), (1, 37, 4, 4), (1, 37, 8, 8)]
    phased = []
    for shape in shapes:
        for _ in range(2):
            x = r(*shape)
            want = reference_conv(x, w, b, **_geometry(shape, attrs))
            np.testing.assert_allclose(session.run(None, {"x": x})[0], want, **TOL)
        phased.append(conv_plans(session)[0].phased)
    assert phased == [True, True, False, True]  # 4x4 has too few rows: the plain im2col


@pytest.mark.parametrize("case", ["depthwise_even", "depthwise_odd_batch", "groups", "depthwise_dilated",
                                  "conv3d_depthwise"])
def test_conv_stride_phases_shared_scratch(monkeypatch, case):
    """Phases, im2col and the widened result in the backend's shared scratch: the zero border and
    the row of ones are rewritten on every run, after another conv used the same memory; the views
    are built once while the scratch stays."""
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 0)
    x_shape, w_shape, attrs, _ = PHASE_CASES[case]
    w1, b1 = r(*w_shape), r(w_shape[0])
    c = w_shape[0]
    rank = len(x_shape) - 2
    w2, b2 = r(c, c, *[3] * rank) / math.sqrt(c * 3 ** rank), r(c)  # a stride-1 conv after it, sharing the scratch
    params = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}
    second = {"pads": [1] * (2 * rank)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], **attrs),
             helper.make_node("Conv", ["h", "w2", "b2"], ["y"], **second)]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
                              [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(v, k) for k, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = wgnn.InferenceSession(wgnn.convert(model, optimize=False), providers=["numpy"])
    for _ in range(3):
        x = r(*x_shape)
        h = reference_conv(x, w1, b1, **_geometry(x_shape, attrs))
        want = reference_conv(h, w2, b2, pads=second["pads"])
        np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)
    first, _ = conv_plans(session)
    assert first.phased and first.shared
    views = first.copies
    session.run(None, {"x": r(*x_shape)})
    assert first.copies is views  # not rebuilt while the scratch array stays


def test_conv_stride_phases_in_mobilenet():
    """MobileNetV2's stride-2 depthwise convs, run as Conv stages of ConvDwPwExpand, take phases;
    the model gives what it gives with the plain im2col."""
    from wgnn.models.zoo import build, example_inputs

    model = build("mobilenetv2", size=32).SerializeToString()
    feeds = example_inputs(onnx.load_from_string(model), 1)

    def plans(session):
        """Every Conv plan, also those of fused steps' Conv stages (found through the objects the
        numpy steps keep in their state)."""
        found, seen = [], set()

        def visit(obj):
            if id(obj) in seen or isinstance(obj, (np.ndarray, str, int, float)):
                return
            seen.add(id(obj))
            if isinstance(obj, _ConvPlan):
                found.append(obj)
            elif isinstance(obj, dict):
                for value in obj.values():
                    visit(value)
            elif isinstance(obj, (list, tuple)):
                for value in obj:
                    visit(value)
            elif type(obj).__module__.startswith("wgnn.backends.numpy"):
                visit(vars(obj))

        for segment in session.session.segments:
            for _, ex in segment.steps:
                visit(ex.state)
        return found

    session = wgnn.InferenceSession(model, providers=["numpy"])
    got = session.run(None, feeds)[0]
    phased = [p.phases_shape for p in plans(session) if p.phased]
    assert phased == [(4, 1, 96, 9, 9), (4, 1, 144, 5, 5)]
    numpy_conv.PHASES = False
    try:
        plain = wgnn.InferenceSession(model, providers=["numpy"])
        want = plain.run(None, feeds)[0]  # plans are built at the first run
    finally:
        numpy_conv.PHASES = True
    assert plans(plain) and not any(p.phased for p in plans(plain))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------- Conv: products cut for the BLAS's small-product kernel
SMALL_PRODUCT_CASES = {
    # name: (x shape, w shape, attrs), convs whose products have few rows (outputs per group)
    "widened_3x3": CONV_CASES["widened_3x3"],
    "groups_batch": CONV_CASES["groups_batch"],
    "conv3d_widened": CONV_CASES["conv3d_widened"],
    "phased_regular_batch": PHASE_CASES["regular_batch"][:3],
    "phased_stem_7x7": PHASE_CASES["stem_7x7"][:3],
    "pointwise_batch": ((2, 7, 5, 6), (4, 7, 1, 1), {}),
    "pointwise_expand": ((1, 3, 9, 7), (8, 3, 1, 1), {}),  # the bias rides in the product
    "pointwise_groups_batch": CONV_CASES["pointwise_groups_batch"],
}


def small_product_session(monkeypatch, case, rows_per_band, *, bias=True):
    """A Conv session of SMALL_PRODUCT_CASES[case] where numpy's BLAS has a small-product kernel
    up to a bound that fits rows_per_band output rows (pointwise convs: 8 * rows_per_band
    columns), bands of any width allowed (the patches stay for the test); returns (session,
    plan, w, b)."""
    x_shape, w_shape, attrs = SMALL_PRODUCT_CASES[case]
    w, b = r(*w_shape), r(w_shape[0]) if bias else None
    monkeypatch.setattr(numpy_blas, "SMALL_PRODUCT_COLUMNS", 1)
    monkeypatch.setattr(numpy_blas, "small_gemm_limit", lambda: 0)
    (whole,) = conv_plans(conv_session(x_shape, w, b, attrs=attrs))
    assert len(whole.bands) < 2 and not getattr(whole, "column_bands", None)
    k = whole.rows + whole.bias if not whole.pointwise else w_shape[1] + whole.bias
    columns = 8 if whole.pointwise else whole.row_columns
    limit = rows_per_band * columns * whole.mg * k
    monkeypatch.setattr(numpy_blas, "small_gemm_limit", lambda: limit)
    session = conv_session(x_shape, w, b, attrs=attrs)
    (plan,) = conv_plans(session)
    return session, plan, w, b


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", sorted(SMALL_PRODUCT_CASES))
def test_conv_bands_for_small_products(monkeypatch, case, bias):
    """Where numpy's BLAS runs products within a bound faster (blas.small_gemm_limit), convs with
    few outputs per group cut their products to it: im2col convs in bands of output rows (stride
    phases too), pointwise ones in bands of columns; the same results, run after run."""
    x_shape, _, attrs = SMALL_PRODUCT_CASES[case]
    session, plan, w, b = small_product_session(monkeypatch, case, 2, bias=bias)
    for _ in range(2):
        x = r(*x_shape)
        np.testing.assert_allclose(session.run(None, {"x": x})[0],
                                   reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    if plan.pointwise:
        pixels = math.prod(x_shape[2:])
        bands = [(first, min(first + 16, pixels)) for first in range(0, pixels, 16)]
        assert [(s.start, s.stop) for s in plan.column_bands] == bands
        assert plan.describe() == f"matmul, {len(plan.column_bands)} bands"
    else:
        rows = plan.bands[-1][1]  # of the first pixel axis (a widened 2-D grid has one: its columns)
        assert plan.bands == [(first, min(first + 2, rows)) for first in range(0, rows, 2)] and rows > 2
        assert plan.phased == case.startswith("phased")


@pytest.mark.parametrize("case", ["widened_3x3", "phased_stem_7x7", "pointwise_expand"])
def test_conv_small_product_bands_epilogue_and_runtime_weights(monkeypatch, case):
    """Bands for small products with the fused residual and Clip, and with weights and bias as
    graph inputs (packed on every run)."""
    x_shape, w_shape, attrs = SMALL_PRODUCT_CASES[case]
    small_product_session(monkeypatch, case, 2)  # the bound for 2 rows (or 16 columns) stays set

    def banded(session):
        (plan,) = conv_plans(session)
        return len(plan.bands) > 1 or len(getattr(plan, "column_bands", ())) > 1

    clip = {**attrs, "activation": "clip", "activation_alpha": -0.5, "activation_beta": 0.75}
    w, b = r(*w_shape), r(w_shape[0])
    x = r(*x_shape)
    y = reference_conv(x, w, b, **_geometry(x_shape, attrs))
    res = r(*y.shape)
    session = conv_session(x_shape, w, b, attrs=clip, residual=True)
    np.testing.assert_allclose(session.run(None, {"x": x, "res": res})[0], np.clip(y + res, -0.5, 0.75), **TOL)
    assert banded(session)
    session = conv_session(x_shape, w, b, attrs=attrs, const=False)
    for _ in range(2):
        x, w, b = r(*x_shape), r(*w_shape), r(w_shape[0])
        np.testing.assert_allclose(session.run(None, {"x": x, "w": w, "b": b})[0],
                                   reference_conv(x, w, b, **_geometry(x_shape, attrs)), **TOL)
    assert banded(session) and conv_plans(session)[0].weights is None


def test_conv_small_product_rule(monkeypatch):
    """Which convs cut their products: float32 ones with 2 to SMALL_PRODUCT_ROWS outputs per group,
    in bands at least SMALL_PRODUCT_COLUMNS wide; none where the BLAS has no such kernel."""
    def plan_of(x_shape, w_shape, attrs=None, dtype=np.float32):
        (plan,) = conv_plans(conv_session(x_shape, r(*w_shape, dtype=dtype), r(w_shape[0], dtype=dtype),
                                          attrs=attrs))
        return plan

    three = {"pads": [1, 1, 1, 1]}
    monkeypatch.setattr(numpy_blas, "small_gemm_limit", lambda: 100 ** 3)
    # ResNet@224's 16 -> 16 3x3 at 56x56: (16 x 145) @ (145 x 431) per band of the widened grid's 3248 columns
    assert len(plan_of((1, 16, 56, 56), (16, 16, 3, 3), three).bands) == 8
    assert len(plan_of((1, 16, 112, 112), (16, 16, 1, 1)).column_bands) == 4  # 3906 columns a band
    assert len(plan_of((1, 16, 56, 56), (16, 16, 1, 1)).column_bands) == 0  # one product within the bound
    assert len(plan_of((1, 16, 56, 56), (32, 16, 3, 3), three).bands) == 16  # 32 x 145: 215 columns a band
    assert len(plan_of((1, 32, 28, 28), (32, 32, 3, 3), three).bands) == 1  # 108-column bands: too narrow
    assert len(plan_of((1, 16, 112, 112), (64, 16, 1, 1)).column_bands) == 0  # 64 outputs
    assert len(plan_of((1, 16, 56, 56), (16, 16, 3, 3), three, np.float64).bands) == 2  # IM2COL_BAND_BYTES' only
    assert len(plan_of((1, 16, 16, 16), (16, 16, 3, 3), three).bands) == 1  # all 288 columns within the bound
    monkeypatch.setattr(numpy_blas, "small_gemm_limit", lambda: 0)
    assert len(plan_of((1, 16, 56, 56), (16, 16, 3, 3), three).bands) == 1
    assert len(plan_of((1, 16, 112, 112), (16, 16, 1, 1)).column_bands) == 0


def test_blas_core_found():
    """numpy's OpenBLAS names its core; the small-product bound follows it."""
    import numpy.lib  # noqa: F401  (show_config's dict)
    blas_name = str(np.show_config(mode="dicts")["Build Dependencies"]["blas"].get("name", ""))
    core = numpy_blas.openblas_core()
    if "openblas" in blas_name.lower():
        assert core, "numpy uses OpenBLAS, but its core name was not found"
        assert numpy_blas.describe() == f"OpenBLAS {core}"
        assert numpy_blas.openblas_threads() >= 1
    expected = numpy_blas.SMALL_GEMM_MNK if core and core.lower() in numpy_blas.SMALL_GEMM_CORES else 0
    assert numpy_blas.small_gemm_limit() == expected


def test_blas_numpy_library_first():
    """With another OpenBLAS loaded too (scipy's), numpy's own comes first: its thread count is
    the one numpy's products run on."""
    pytest.importorskip("scipy.linalg")
    libraries = numpy_blas._openblas_libraries()
    if not libraries:
        pytest.skip("numpy's BLAS is not an OpenBLAS found here")
    numpy_root = Path(np.__file__).parent
    assert any(d in libraries[0].parents for d in (numpy_root, numpy_root.parent / "numpy.libs"))


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
