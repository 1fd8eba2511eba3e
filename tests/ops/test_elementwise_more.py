"""Unary/Binary kinds of issue 6: Sign, Round, IsNaN, IsInf, Elu family, Mish, Shrink, trigonometric and
hyperbolic functions, bitwise ops and shifts, Mod sign rules, variadic Sum/Mean/Max/Min; on numpy and
every GPU adapter (tests/helpers.check_op), plus GPU-only checks (NC4HW4, fused epilogues, uint32)."""
import warnings

import numpy as np
import onnx
import pytest
from helpers import Const, check_op, gpu_adapters, make_model, reference_outputs, run_wgnn
from helpers import test_backends as target_backends
from onnx import TensorProto, helper
from wgnn.engine.errors import ShapeError
from wgnn.engine.graph import Node
from wgnn.engine.ops.base import OPS, InferContext, TensorSpec

import wgnn

rng = np.random.default_rng(6)
X = rng.standard_normal((2, 5, 3, 7)).astype(np.float32) * 3  # C = 5: not a multiple of 4
# Halves (round half to even), signed zero, infinities and NaN.
SPECIAL = np.array([-3.5, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, 8388607.5, -1e-30, 1e-30,
                    np.nan, np.inf, -np.inf], np.float32)
ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # NaN/Inf cases warn in onnx.reference
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# ------------------------------------------------------------------------------------ unary
FLOAT_UNARY = ["Sign", "Round", "Softsign", "Elu", "Selu", "Celu", "Mish", "ThresholdedRelu", "Shrink",
               "Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh"]


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary(op):
    check_op(op, [X])


@pytest.mark.parametrize("op", ["Sign", "Round", "IsNaN", "IsInf", "Softsign", "Elu", "Selu", "Celu", "Mish",
                                "ThresholdedRelu", "Shrink"])
def test_special_values(op):
    """NaN propagates (GPU max/min would drop it), infinities saturate, halves round to even."""
    check_op(op, [SPECIAL])


def test_trig_and_hyperbolic_in_domain():
    # Mesa's asin/acos are polynomial fits ~4e-4 off; the GPU uses atan2 instead (~3e-6 absolute,
    # inside the default GPU tolerance). Domain edges included: |x| = 1, acosh(1).
    edge = np.linspace(-1, 1, 41).astype(np.float32)
    check_op("Asin", [edge])
    check_op("Acos", [edge.reshape(1, 41)])
    check_op("Atanh", [np.linspace(-0.99, 0.99, 37).astype(np.float32)])
    check_op("Acosh", [np.concatenate([[1.0], np.geomspace(1.0001, 500, 30)]).astype(np.float32)])
    check_op("Tan", [np.linspace(-1.5, 1.5, 31).astype(np.float32)])
    check_op("Sin", [np.linspace(-1000, 1000, 33).astype(np.float32)])  # range reduction
    # Large arguments: sinh/cosh grow as exp, compared relatively; asinh keeps its sign and precision.
    check_op("Sinh", [np.linspace(-20, 20, 41).astype(np.float32)])
    check_op("Asinh", [np.concatenate([-np.geomspace(1e-3, 1e4, 12), np.geomspace(1e-3, 1e4, 12)]).astype(np.float32)])


@pytest.mark.parametrize("opset", [7, 22])
@pytest.mark.parametrize("op", ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan"])
def test_trig_opsets(op, opset):
    check_op(op, [np.linspace(-0.95, 0.95, 11).astype(np.float32)], opset=opset)


@pytest.mark.parametrize("opset", [9, 22])
@pytest.mark.parametrize("op", ["Sinh", "Cosh", "Asinh", "Atanh"])
def test_hyperbolic_opsets(op, opset):
    check_op(op, [np.linspace(-0.9, 0.9, 13).astype(np.float32)], opset=opset)
    if op == "Asinh":
        check_op("Acosh", [np.linspace(1, 9, 13).astype(np.float32)], opset=opset)


def test_empty_and_scalar_inputs():
    check_op("Sin", [np.zeros((0, 3), np.float32)])
    check_op("IsNaN", [np.zeros((2, 0), np.float32)])
    check_op("Round", [np.float32(-2.5)])
    check_op("BitwiseNot", [np.zeros((3, 0), np.int32)], opset=18)


@pytest.mark.parametrize(("op", "attrs", "opset"), [
    ("Elu", {}, 6), ("Elu", {"alpha": 0.3}, 22), ("Selu", {}, 6), ("Selu", {"alpha": 2.0, "gamma": 0.5}, 22),
    ("Celu", {}, 12), ("Celu", {"alpha": 2.5}, 12), ("Celu", {"alpha": -0.7}, 12),
    ("ThresholdedRelu", {}, 10), ("ThresholdedRelu", {"alpha": -0.5}, 22),
    ("Shrink", {}, 9), ("Shrink", {"lambd": 1.0, "bias": 0.3}, 9), ("Mish", {}, 18), ("Mish", {}, 22),
    ("Softsign", {}, 1), ("Softsign", {}, 22), ("Round", {}, 11), ("Round", {}, 22), ("Sign", {}, 9),
    ("Sign", {}, 13),
])
def test_parameters_and_opsets(op, attrs, opset):
    check_op(op, [X[:1, :, :2]], attrs, opset=opset)


@pytest.mark.parametrize("opset", [9, 13, 20])
def test_isnan_opsets(opset):
    check_op("IsNaN", [SPECIAL.reshape(4, 4)], opset=opset)


@pytest.mark.parametrize("flags", [(1, 1), (1, 0), (0, 1), (0, 0)])
@pytest.mark.parametrize("opset", [10, 20])
def test_isinf_flags(flags, opset):
    (out,) = check_op("IsInf", [SPECIAL], {"detect_negative": flags[0], "detect_positive": flags[1]}, opset=opset)
    assert out.dtype == np.bool_ and out.sum() == sum(flags)


def test_mish_tails():
    check_op("Mish", [np.linspace(-30, 30, 61).astype(np.float32)], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_sign_and_shrink(dtype):
    x = np.array([[-7, -2, -1, 0], [1, 2, 5, 100]], dtype)
    check_op("Sign", [x])
    check_op("Shrink", [x], {"lambd": 1.5, "bias": 2.0})
    check_op("Shrink", [x])  # lambd 0.5: everything but 0 moves by bias 0
    check_op("Shrink", [x], {"lambd": -1.5, "bias": 1.0})  # x < 1.5 wins over x > -1.5


def test_integer_shrink_fractional_bias_runs_on_cpu():
    # The GPU kernel refuses a fractional bias on integers (truncation of x -+ bias in float64): deliberate.
    check_op("Shrink", [np.arange(-4, 5, dtype=np.int32)], {"lambd": 1.0, "bias": 0.5}, allow_fallback=True)


# ---------------------------------------------------------------------------------- bitwise
INT_LIMITS = np.array([-2 ** 31, -7, -1, 0, 1, 6, 2 ** 31 - 1], np.int32)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_bitwise_not(dtype):
    x = INT_LIMITS.astype(dtype) if np.issubdtype(dtype, np.signedinteger) else \
        np.array([0, 1, 7, np.iinfo(dtype).max, np.iinfo(dtype).max // 3], dtype)
    check_op("BitwiseNot", [x.reshape(-1, 1)], opset=18)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.uint32])
def test_bitwise_binary(op, dtype):
    info = np.iinfo(np.int32 if dtype == np.int64 else dtype)  # GPU inputs: int64 values within int32
    a = rng.integers(info.min, info.max, (3, 1, 5), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (4, 1), dtype=dtype, endpoint=True)
    check_op(op, [a, b], opset=18)
    check_op(op, [a, Const(np.array(info.max // 5, dtype))], opset=18)
    if dtype == np.int64:
        wide = rng.integers(-2 ** 63, 2 ** 63 - 1, (2, 3), dtype=np.int64)
        check_op(op, [wide, wide[:, ::-1].copy()], opset=18, backends=["numpy"])


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bit_shift_unsigned(direction, dtype):
    bits = np.iinfo(dtype).bits
    x = np.array([0, 1, 3, np.iinfo(dtype).max, 1 << (bits - 1), 100], dtype)
    y = np.array([0, 1, bits - 1, bits, bits + 3, 2], dtype)  # amounts >= the width give 0
    check_op("BitShift", [x, y], {"direction": direction}, opset=11)
    check_op("BitShift", [x.reshape(2, 3, 1), y[:2]], {"direction": direction}, opset=11)  # broadcasting


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift_signed(direction):
    """Signed shifts (BitShift-28): arithmetic right shift of negatives (GLSL's >> sign-extends too),
    amounts that are negative or past the width give the sign fill / 0."""
    x = np.repeat(INT_LIMITS, 3)
    y = np.tile(np.array([1, 31, 40], np.int32), 7)
    y[::5] = -1
    check_op("BitShift", [x, y], {"direction": direction}, opset=28)
    # int64 runs narrowed to int32 on the GPU: right shifts are exact for values in range; the GPU
    # refuses left shifts of int64 (bits past 32 would be dropped), deliberately.
    check_op("BitShift", [x.astype(np.int64), (y * 2).astype(np.int64)], {"direction": direction}, opset=28,
             allow_fallback=direction == "LEFT")


def test_bit_shift_rejects_unknown_direction():
    with pytest.raises(wgnn.WgnnError, match="direction"):
        wgnn.convert(make_model("BitShift", [np.zeros(2, np.uint8), np.zeros(2, np.uint8)], {"direction": "UP"},
                                opset=11))


# --------------------------------------------------------------------------------------- mod
@pytest.mark.parametrize("opset", [10, 13])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_mod_sign_rules(dtype, opset):
    a = np.array([7, -7, 7, -7, 0, 6, -6, 2 ** 31 - 1, -2 ** 31 + 1], dtype).reshape(9, 1)
    b = np.array([3, -3, 5, -1], dtype)
    check_op("Mod", [a, b], opset=opset)  # sign of the divisor
    check_op("Mod", [a, b], {"fmod": 1}, opset=opset)  # sign of the dividend


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.int8])
def test_narrow_integer_mod(dtype):
    a = np.array([0, 1, 7, 100, 127], dtype)
    check_op("Mod", [a, np.array([3, 1, 2, 7, 10], dtype)], opset=13)


@pytest.mark.parametrize("fmod", [0, 1])
def test_float_mod_exact(fmod):
    """Float remainders are exact in IEEE arithmetic; the GPU computes them exactly too (a quotient
    past 2^24 or rounded up broke the x - y * trunc(x / y) formula)."""
    a = (rng.standard_normal(257) * 10.0 ** rng.uniform(-2, 5, 257)).astype(np.float32)
    b = (rng.standard_normal(257) * 10.0 ** rng.uniform(-3, 2, 257)).astype(np.float32)
    model = make_model("Mod", [a, b], {"fmod": fmod}, opset=13)
    feeds = {"in0": a, "in1": b}
    (want,) = reference_outputs(model, feeds)
    for backend in target_backends():
        (got,) = run_wgnn(model, feeds, backend)
        np.testing.assert_array_equal(got, want, err_msg=backend)


@pytest.mark.parametrize("fmod", [0, 1])
def test_float_mod_special_values(fmod):
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, 3.0, -3.0, np.inf, -np.inf, 2.0, np.nan, 1.0, 7.0, 1e-40],
                 np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, np.inf, np.inf, 2.0, 3.0, 0.0, 1.0, np.nan, -np.inf, 3e-41],
                 np.float32)
    check_op("Mod", [a, b], {"fmod": fmod}, opset=13)
    check_op("Mod", [X, np.float32(-0.7)], {"fmod": fmod}, opset=10)


# ---------------------------------------------------------------------------------- variadic
SHAPES = [(3, 1, 5), (1, 4, 1), (5,), ()]


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_broadcasting(op):
    inputs = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    # onnx.reference's Mean accumulates in place into the first input: it cannot broadcast that one up.
    reference = "ort" if op == "Mean" else "onnx"
    check_op(op, inputs, opset=13, reference=reference)
    check_op(op, inputs[:2], opset=8, reference=reference)
    check_op(op, [inputs[0]], opset=13)  # a single input
    check_op(op, [inputs[0], Const(inputs[1]), inputs[2]], opset=13, reference=reference)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_opset6_same_shapes(op):
    check_op(op, [X, X * 0.5, -X], opset=6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_variadic_integers(dtype):
    a = np.array([[1, 9, 3]], dtype)
    b = np.array([[4], [2]], dtype)
    for op in ("Max", "Min"):  # integer types since opset 12 (Sum and Mean are float only)
        check_op(op, [a, b, Const(np.array(5, dtype))], opset=13)


def test_mean_types_and_edges():
    check_op("Mean", [X.astype(np.float64), X[:1].astype(np.float64)], opset=13)
    check_op("Mean", [np.zeros((0, 3), np.float32), np.ones((3,), np.float32)], opset=13)
    check_op("Mean", [Const(np.float32(4)), X], opset=13, reference="ort")  # see test_variadic_broadcasting


def test_mean_of_undeclared_intermediates():
    """Mean of tensors the graph gives no type for: the count is cast like the inputs (CastLike),
    which the converter folds once shape inference knows their type (tools/convert/simplify.py)."""
    x = X[0]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Mean", ["r", "n", "x"], ["y"])]
    graph = helper.make_graph(nodes, "mean", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    (want,) = reference_outputs(model, {"x": x})
    assert "Cast" not in [n.op_type for n in wgnn.convert(model).graph.nodes]
    for backend in target_backends():
        (got,) = run_wgnn(model, {"x": x}, backend)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=backend)


# ------------------------------------------------------------------------------------ engine
def infer(op_type: str, attrs: dict, *specs: TensorSpec) -> list[TensorSpec]:
    op = OPS[op_type]
    node = Node(op_type, [f"i{i}" for i in range(len(specs))], ["o"], attrs, name="n")
    return op.infer(InferContext(node, op.resolve_attrs(node), list(specs), [None] * len(specs)))


def test_predicates_infer_bool_and_types_are_checked():
    f = TensorSpec((2, 3), "float32")
    assert infer("Unary", {"kind": "isnan"}, f)[0].dtype == "bool"
    assert infer("Unary", {"kind": "isinf", "alpha": 1.0}, f)[0] == TensorSpec((2, 3), "bool")
    assert infer("Unary", {"kind": "elu"}, f)[0].dtype == "float32"
    assert infer("Unary", {"kind": "bitwise_not"}, TensorSpec((4,), "uint16"))[0].dtype == "uint16"
    for kind, dtype in (("bitwise_not", "float32"), ("sin", "int32"), ("isnan", "int64"), ("sign", "bool")):
        with pytest.raises(ShapeError, match=kind):
            infer("Unary", {"kind": kind}, TensorSpec((2,), dtype))
    with pytest.raises(ShapeError, match="integer"):
        infer("Binary", {"kind": "bitwise_and"}, f, f)
    u = TensorSpec((3, 1), "uint8")
    assert infer("Binary", {"kind": "shift_left"}, u, TensorSpec((4,), "uint8"))[0] == TensorSpec((3, 4), "uint8")


def test_predicates_are_not_fused_activations():
    from wgnn.engine.ops.conv import check_activation

    node = Node("Conv", ["x", "w"], ["y"], {"activation": "isnan"}, name="c")
    ctx = InferContext(node, {"activation": "isnan"}, [TensorSpec((1, 1, 2, 2), "float32")] * 2, [None, None])
    with pytest.raises(ShapeError, match="isnan"):
        check_activation(ctx)
    check_activation(InferContext(node, {"activation": "mish"}, ctx.inputs, [None, None]))


# --------------------------------------------------------------------------------------- GPU
GPU_FLOAT_KINDS = [("sign", 0.0, 0.0), ("round", 0.0, 0.0), ("softsign", 0.0, 0.0), ("elu", 0.7, 0.0),
                   ("selu", 1.67, 1.05), ("celu", 1.5, 0.0), ("mish", 0.0, 0.0), ("thresholded_relu", 0.2, 0.0),
                   ("shrink", 0.5, 0.1), ("sin", 0.0, 0.0), ("cos", 0.0, 0.0), ("atan", 0.0, 0.0),
                   ("cosh", 0.0, 0.0), ("asinh", 0.0, 0.0)]
TARGETS = [(a["index"], storage) for a in ADAPTERS for storage in ("buffer", "texture")]


def conv_then(kind: str, alpha: float, beta: float, *, fused: bool):
    """Conv 1x1 (C 6 -> 5, NC4HW4 with a partial slice) and a Unary kind: a separate step, or set on
    the IR as the Conv's fused activation (its epilogue shares elementwise.UNARY_EXPR)."""
    w = rng.standard_normal((5, 6, 1, 1)).astype(np.float32)
    model = wgnn.convert(make_model("Conv", [np.zeros((2, 6, 3, 9), np.float32), Const(w)], {}))
    (conv,) = model.graph.nodes
    if fused:
        conv.attrs.update(activation=kind, activation_alpha=alpha, activation_beta=beta)
    else:
        conv.outputs = ["mid"]
        model.graph.nodes.append(Node("Unary", ["mid"], ["out0"], {"kind": kind, "alpha": alpha, "beta": beta},
                                      name="act"))
    return model


def step_layouts(sess) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for segment in sess.session.segments:
        for step, execution in segment.steps:
            found.setdefault(step.op.op_type, []).append(getattr(execution, "layout", "cpu"))
    return found


@needs_gpu
@pytest.mark.parametrize(("adapter", "storage"), TARGETS)
@pytest.mark.parametrize("fused", [False, True], ids=["nc4hw4_step", "conv_epilogue"])
def test_float_kinds_on_nc4hw4_and_in_conv_epilogue(fused, adapter, storage):
    """Every kind as an NC4HW4 Unary step on every storage; in the conv epilogue each kind on one
    storage per adapter, alternating (the epilogue's expression does not depend on the storage, and
    each is a conv kernel of its own: ~1 s to compile on lavapipe with a cold driver cache)."""
    x = rng.standard_normal((2, 6, 3, 9)).astype(np.float32)
    offset = ("buffer", "texture").index(storage)
    kinds = GPU_FLOAT_KINDS[offset::2] if fused else GPU_FLOAT_KINDS
    for kind, alpha, beta in kinds:
        model = conv_then(kind, alpha, beta, fused=fused)
        (want,) = wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"in0": x})
        config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage)
        sess = wgnn.InferenceSession(model, config=config)
        (got,) = sess.run(None, {"in0": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=kind)
        layouts = step_layouts(sess)
        assert layouts["Conv"] == ["nc4hw4"]
        assert fused or layouts["Unary"] == ["nc4hw4"], (kind, layouts)


@needs_gpu
@pytest.mark.parametrize(("adapter", "storage"), TARGETS)
@pytest.mark.parametrize("kind", ["mod", "fmod"])
def test_float_mod_on_nc4hw4(kind, adapter, storage):
    """binary_nc4hw4.wgsl carries its own copy of the exact float remainder."""
    from wgnn.engine.graph import TensorInfo

    model = conv_then("identity", 0.0, 0.0, fused=False)
    model.graph.inputs.append(TensorInfo("b", "float32", (2, 5, 3, 9)))
    model.graph.nodes[-1] = Node("Binary", ["mid", "b"], ["out0"], {"kind": kind}, name="mod")
    # Small integer weights and quarter inputs: the conv sums are exact on every backend.
    assert "in1" in model.graph.initializers
    model.graph.initializers["in1"] = rng.integers(-3, 4, (5, 6, 1, 1)).astype(np.float32)
    feeds = {"in0": (rng.integers(-400, 400, (2, 6, 3, 9)) * 0.25).astype(np.float32),
             "b": rng.uniform(0.01, 3, (2, 5, 3, 9)).astype(np.float32)}
    (want,) = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
    sess = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage))
    (got,) = sess.run(None, feeds)
    np.testing.assert_array_equal(got, want)
    assert step_layouts(sess)["Binary"] == ["nc4hw4"]


def test_fused_activation_matches_onnx_on_every_backend():
    """numpy's apply_unary (fused activations) and the GPU epilogues against onnx.reference."""
    x = rng.standard_normal((2, 6, 3, 9)).astype(np.float32)
    plain = conv_then("identity", 0.0, 0.0, fused=False)
    (conv_out,) = wgnn.InferenceSession(plain, providers=["numpy"]).run(None, {"in0": x})
    for op, kind, attrs, alpha, beta in (("Elu", "elu", {"alpha": 0.7}, 0.7, 0.0), ("Mish", "mish", {}, 0.0, 0.0),
                                         ("Softsign", "softsign", {}, 0.0, 0.0)):
        (want,) = reference_outputs(make_model(op, [conv_out], attrs), {"in0": conv_out})
        model = conv_then(kind, alpha, beta, fused=True)
        model.graph.initializers.update(plain.graph.initializers)  # the same weights as `plain`
        for backend in target_backends():
            config = wgnn.Config(providers=("wgpu",) if backend != "numpy" else ("numpy",),
                                 adapter=int(backend.split(":")[1]) if ":" in backend else None)
            (got,) = wgnn.InferenceSession(model, config=config).run(None, {"in0": x})
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{op} on {backend}")


@needs_gpu
def test_uint32_kernels(monkeypatch):
    """The u32 expressions, for when the backend stores uint32 (backend.GPU_DTYPES lists int64,
    int32, float32, bool today): store uint32 as u32 here and check every op ran on the GPU."""
    from wgnn.backends.wgpu import backend

    monkeypatch.setitem(backend.GPU_DTYPES, "uint32", "u32")
    monkeypatch.setitem(backend._NUMPY_GPU, "uint32", np.uint32)
    a = np.array([0, 1, 5, 2 ** 31, 2 ** 32 - 1, 77, 12345678], np.uint32)
    b = np.array([0, 1, 31, 32, 33, 3, 7], np.uint32)
    cases = [("BitShift", [a, b], {"direction": "LEFT"}, 11), ("BitShift", [a, b], {"direction": "RIGHT"}, 11),
             ("BitwiseNot", [a], {}, 18), ("BitwiseOr", [a, b[::-1].copy()], {}, 18),
             ("Mod", [a, b + 1], {}, 13), ("Mod", [a, b + 1], {"fmod": 1}, 13), ("Sign", [a], {}, 13),
             ("Clip", [a, Const(np.uint32(3)), Const(np.uint32(2 ** 31 + 5))], {}, 13), ("Abs", [a], {}, 13)]
    for op, inputs, attrs, opset in cases:
        model = make_model(op, inputs, attrs, opset=opset)
        feeds = {f"in{i}": x for i, x in enumerate(inputs) if not isinstance(x, Const)}
        (want,) = reference_outputs(model, feeds)
        for a_ in ADAPTERS:
            config = wgnn.Config(providers=("wgpu", "numpy"), adapter=a_["index"])
            sess = wgnn.InferenceSession(wgnn.convert(model), config=config)
            (got,) = sess.run(None, feeds)
            assert not sess.report()["fallbacks"], (op, sess.report()["fallbacks"])
            np.testing.assert_array_equal(got, want, err_msg=f"{op} on wgpu:{a_['index']}")


@pytest.mark.parametrize(("fill", "lowered"), [(False, True), (True, True), (None, False)])
def test_where_on_a_condition_known_at_resize(fill, lowered):
    """A condition computed from shapes alone is known at resize: all false (or all true) picks
    one branch everywhere, a copy the GPU makes a view (Where.geometry); a mixed one runs the
    select kernel. x has a symbolic batch, so nothing of it folds at conversion."""
    from wgnn.engine.graph import Graph, Model, TensorInfo

    import wgnn

    shape_nodes = [Node("Shape", ["x"], ["shape"], {}, name="shape")]
    if fill is None:  # rows alternate: row index (Range over the first dim) odd
        shape_nodes += [Node("Gather", ["shape", "zero"], ["rows"], {"axis": 0}, name="rows"),
                        Node("Range", ["zero", "rows", "one"], ["index"], {}, name="range"),
                        Node("Binary", ["index", "two"], ["parity"], {"kind": "mod"}, name="mod"),
                        Node("Binary", ["parity", "one"], ["odd"], {"kind": "equal"}, name="odd"),
                        Node("Unsqueeze", ["odd", "one1"], ["condition"], {}, name="unsqueeze")]
    else:
        shape_nodes += [Node("ConstantOfShape", ["shape"], ["condition"], {"value": np.array([fill])},
                             name="fill")]
    graph = Graph(shape_nodes + [Node("Where", ["condition", "y", "x"], ["out"], {}, name="select")],
                  [TensorInfo("x", "float32", ("N", 3)), TensorInfo("y", "float32", ("N", 3))],
                  [TensorInfo("out", "float32", None)],
                  {"zero": np.array(0, np.int64), "one": np.array(1, np.int64), "two": np.array(2, np.int64),
                   "one1": np.array([1], np.int64)})
    x, y = np.arange(12, dtype=np.float32).reshape(4, 3), -np.arange(12, dtype=np.float32).reshape(4, 3)
    want = y if fill else x if fill is False else np.where((np.arange(4) % 2 == 1)[:, None], y, x)
    for backend in target_backends():
        providers = ["numpy"] if backend == "numpy" else ["wgpu", "numpy"]
        session = wgnn.InferenceSession(Model(graph), providers=providers)
        np.testing.assert_array_equal(session.run(None, {"x": x, "y": y})[0], want, err_msg=backend)
        lowered_steps = [s for s in session.session.steps
                         if s.op.op_type == "Raster" and s.node.attrs.get("source_op") == "Where"]
        assert bool(lowered_steps) == lowered, backend
