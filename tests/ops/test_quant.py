"""QuantizeLinear / DequantizeLinear (opsets 10, 13, 19, 21, 23) against onnx.reference or
onnxruntime, and QDQ models: their QuantizeLinear -> DequantizeLinear pairs become FakeQuantize at
conversion and run on the GPU with no fallback."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import Const, check_model, check_op, gpu_adapters, gpu_fallbacks, make_model, session_for
from helpers import test_backends as backends_under_test
from onnx import TensorProto, helper, numpy_helper
from wgnn.models.format import model_to_bytes, read_model

import wgnn

rng = np.random.default_rng(0)
# Rounding ties (half to even: 2.5 -> 2, -2.5 -> -2, 3.5 -> 4), saturation, an odd length.
TIES = np.array([0.0, 0.5, 1.5, 2.5, -2.5, 3.5, -3.5, -0.5, 0.49, 1000.0, -1000.0, 127.5, -128.5],
                np.float32)
X3 = (rng.standard_normal((2, 3, 5)) * 4).astype(np.float32)  # batch 2, C = 3, odd sizes


def q8(*shape, dtype=np.int8):
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def check_ort(op_type, inputs, attrs=None, **options):
    """check_op against onnxruntime (onnx.reference has no DequantizeLinear before opset 19)."""
    return check_op(op_type, inputs, attrs, reference="ort", **options)


# ------------------------------------------------------------------------------ QuantizeLinear
@pytest.mark.parametrize("opset", [10, 13, 19, 21])
def test_quantize_per_tensor_ties_and_saturation(opset):
    for scale in (1.0, 0.5):
        out = check_op("QuantizeLinear", [TIES, Const(np.float32(scale)), Const(np.int8(0))], opset=opset)[0]
        assert out.dtype == np.int8
    # 2.5 and -2.5 round to the even neighbour; +-1000 saturate.
    got = check_op("QuantizeLinear", [TIES, Const(np.float32(1.0)), Const(np.int8(0))], opset=opset)[0]
    np.testing.assert_array_equal(got[:7], [0, 0, 2, 2, -2, 4, -4])
    np.testing.assert_array_equal(got[9:], [127, -128, 127, -128])


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
def test_quantize_uint8_zero_point(opset):
    # uint8 with zero point 128: saturates at 0 and 255 around it.
    check_op("QuantizeLinear", [TIES, Const(np.float32(0.5)), Const(np.uint8(128))], opset=opset)
    check_op("QuantizeLinear", [X3, Const(np.float32(0.037)), Const(np.uint8(3))], opset=opset)
    # Scale and zero point as graph inputs, not constants.
    check_op("QuantizeLinear", [X3, np.float32(0.1), np.uint8(100)], opset=opset)


@pytest.mark.parametrize("opset", [10, 13, 19])
def test_quantize_without_zero_point_is_uint8(opset):
    out = check_op("QuantizeLinear", [X3, Const(np.float32(0.05))], opset=opset)[0]
    assert out.dtype == np.uint8 and out.min() == 0


@pytest.mark.parametrize("axis", [1, -2, 0, -1])
def test_quantize_per_axis(axis):
    c = X3.shape[axis]
    scale = (rng.random(c) * 0.2 + 0.05).astype(np.float32)
    check_op("QuantizeLinear", [X3, Const(scale), Const(q8(c))], {"axis": axis}, opset=13)
    check_op("QuantizeLinear", [X3, Const(scale), Const(q8(c, dtype=np.uint8))], {"axis": axis}, opset=19)
    check_op("QuantizeLinear", [X3, Const(scale)], {"axis": axis}, opset=21)


def test_quantize_one_element_scale_is_per_tensor():
    check_op("QuantizeLinear", [X3, Const(np.array([0.1], np.float32)), Const(np.array([-3], np.int8))],
             {"axis": 2}, opset=13)
    # Scale (1,) with zero point () (onnxruntime's quantizer writes these).
    check_op("QuantizeLinear", [X3, Const(np.array([0.1], np.float32)), Const(np.int8(-3))], opset=19)
    check_op("DequantizeLinear", [q8(2, 3), Const(np.array([0.1], np.float32)), Const(np.int8(-3))], opset=19)


def test_quantize_opset19_float16_and_saturate():
    x16 = X3.astype(np.float16)
    check_op("QuantizeLinear", [x16, Const(np.float16(0.125)), Const(np.int8(1))], {"saturate": 1}, opset=19)
    check_op("QuantizeLinear", [x16, np.float16(0.3), np.uint8(7)], opset=19)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16])
def test_quantize_opset21_16bit(dtype):
    x = (rng.standard_normal((3, 7)) * 3000).astype(np.float32)
    zero = np.array(100, dtype)
    check_op("QuantizeLinear", [x, Const(np.float32(0.25)), Const(zero)], opset=21)
    out = check_op("QuantizeLinear", [x, Const(np.float32(0.01))],
                   {"output_dtype": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, opset=21)[0]
    info = np.iinfo(dtype)
    assert out.dtype == dtype and out.min() == info.min and out.max() == info.max


def test_quantize_opset21_output_dtype_int8():
    out = check_op("QuantizeLinear", [TIES, Const(np.float32(1.0))], {"output_dtype": TensorProto.INT8},
                   opset=21)[0]
    assert out.dtype == np.int8


@pytest.mark.parametrize("axis, block", [(1, 2), (-1, 4), (0, 1), (1, 5)])
def test_quantize_opset21_blocked(axis, block):
    x = (rng.standard_normal((4, 6)) * 3).astype(np.float32)
    shape = list(x.shape)
    shape[axis] = -(-shape[axis] // block)  # a partial last block where block does not divide
    scale = (rng.random(shape) * 0.2 + 0.05).astype(np.float32)
    attrs = {"axis": axis, "block_size": block}
    check_op("QuantizeLinear", [x, Const(scale), Const(q8(*shape))], attrs, opset=21)
    check_op("QuantizeLinear", [x, Const(scale)], attrs, opset=21)


def test_quantize_int32_input_opset13():
    x = np.array([[-700, -3, 0, 5, 1000]], np.int32)
    check_op("QuantizeLinear", [x, Const(np.float32(2.0)), Const(np.int8(1))], opset=13)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # onnx.reference casts NaN to int32
def test_quantize_nan_and_infinity():
    x = np.array([np.nan, np.inf, -np.inf, 3.0], np.float32)
    out = check_op("QuantizeLinear", [x[:1], Const(np.float32(1.0)), Const(np.int8(0))], opset=19)[0]
    assert out[0] == -128  # NaN saturates to the low end (onnx.reference, onnxruntime)
    got = check_ort("QuantizeLinear", [x, Const(np.float32(1.0)), Const(np.uint8(10))], opset=19)[0]
    np.testing.assert_array_equal(got, [0, 255, 0, 13])


def test_quantize_empty_and_scalar():
    check_op("QuantizeLinear", [np.zeros((0, 3), np.float32), Const(np.float32(0.1)), Const(np.int8(2))],
             opset=13)
    check_op("QuantizeLinear", [np.array(-2.5, np.float32), Const(np.float32(1.0)), Const(np.int8(2))], opset=13)
    check_op("DequantizeLinear", [np.array(-7, np.int8), Const(np.float32(0.5)), Const(np.int8(2))], opset=19)


def test_quantize_refuses_int4_and_float8():
    for dtype in (TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT8E4M3FN):
        model = make_model("QuantizeLinear", [X3, Const(np.float32(0.1))], {"output_dtype": dtype}, opset=21)
        name = TensorProto.DataType.Name(dtype)
        with pytest.raises(wgnn.ConversionError, match=rf'QuantizeLinear node "\w*".*{name} is not supported'):
            wgnn.convert(model)


def test_quantize_bad_scale_shape():
    model = make_model("QuantizeLinear", [X3, Const(np.ones(4, np.float32))], {"axis": 1}, opset=13)
    with pytest.raises(wgnn.ShapeError, match="per-axis scale must have shape"):
        wgnn.InferenceSession(wgnn.convert(model), providers=["numpy"]).run(None, {"in0": X3})


# ---------------------------------------------------------------------------- DequantizeLinear
@pytest.mark.parametrize("opset", [10, 13])
def test_dequantize_old_opsets(opset):
    check_ort("DequantizeLinear", [q8(2, 3, 5), Const(np.float32(0.25)), Const(np.int8(-3))], opset=opset)
    check_ort("DequantizeLinear", [q8(7, dtype=np.uint8), Const(np.float32(0.1))], opset=opset)
    check_ort("DequantizeLinear", [q8(2, 3, 5, dtype=np.uint8), np.float32(0.5), np.uint8(128)], opset=opset)


@pytest.mark.parametrize("opset", [19, 21])
def test_dequantize_per_tensor(opset):
    check_op("DequantizeLinear", [q8(2, 3, 5), Const(np.float32(0.25)), Const(np.int8(-3))], opset=opset)
    check_op("DequantizeLinear", [q8(7, dtype=np.uint8), Const(np.float32(0.1))], opset=opset)
    check_op("DequantizeLinear", [q8(0, 3), Const(np.float32(0.1)), Const(np.int8(1))], opset=opset)


@pytest.mark.parametrize("axis", [1, -2, 0, -1])
def test_dequantize_per_axis(axis):
    x = q8(2, 3, 5)
    c = x.shape[axis]
    scale = (rng.random(c) * 0.2 + 0.05).astype(np.float32)
    check_ort("DequantizeLinear", [x, Const(scale), Const(q8(c))], {"axis": axis}, opset=13)
    check_op("DequantizeLinear", [x, Const(scale), Const(q8(c))], {"axis": axis}, opset=19)
    check_op("DequantizeLinear", [x.view(np.uint8), Const(scale)], {"axis": axis}, opset=21)


def test_dequantize_int32_bias():
    check_op("DequantizeLinear", [np.array([-70000, -1, 0, 123456], np.int32), Const(np.float32(1e-3))],
             opset=19)
    check_ort("DequantizeLinear", [np.array([[5, -9]], np.int32), Const(np.float32(0.5)), Const(np.int32(0))],
              opset=13)


def test_dequantize_float16_scale():
    check_op("DequantizeLinear", [q8(3, 4), Const(np.float16(0.0625)), Const(np.int8(2))], opset=19)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16])
def test_dequantize_opset21_16bit(dtype):
    check_op("DequantizeLinear", [q8(3, 7, dtype=dtype), Const(np.float32(0.01)), Const(np.array(-5 % 1000,
             dtype))], opset=21)


@pytest.mark.parametrize("axis, block", [(1, 2), (-1, 4), (0, 3)])
def test_dequantize_opset21_blocked(axis, block):
    x = q8(4, 6)
    shape = list(x.shape)
    shape[axis] = -(-shape[axis] // block)
    scale = (rng.random(shape) * 0.2 + 0.05).astype(np.float32)
    attrs = {"axis": axis, "block_size": block}
    check_op("DequantizeLinear", [x, Const(scale), Const(q8(*shape))], attrs, opset=21)
    check_op("DequantizeLinear", [x, Const(scale)], attrs, opset=21)


def test_dequantize_opset23_output_dtype():
    out = check_op("DequantizeLinear", [q8(3, 4), Const(np.float32(0.125)), Const(np.int8(2))],
                   {"output_dtype": TensorProto.FLOAT16}, opset=23)[0]
    assert out.dtype == np.float16


# ------------------------------------------------------------------ QuantizeLinear -> DequantizeLinear
def qdq_model(x_shape, scale, zero, *, axis=None, block=None, opset=13, dq_zero="same", dq_axis=None):
    """x -> QuantizeLinear -> DequantizeLinear -> y with constant parameters (the DequantizeLinear's
    axis spelled dq_axis when given)."""
    attrs = {k: v for k, v in (("axis", axis), ("block_size", block)) if v is not None}
    dq_attrs = {**attrs, **({"axis": dq_axis} if dq_axis is not None else {})}
    q_inputs = ["x", "s"] + (["z"] if zero is not None else [])
    dq_inputs = ["q", "s"] + ({"same": q_inputs[2:], "none": [], "zeros": ["z0"]}[dq_zero])
    nodes = [helper.make_node("QuantizeLinear", q_inputs, ["q"], **attrs),
             helper.make_node("DequantizeLinear", dq_inputs, ["y"], **dq_attrs)]
    inits = [numpy_helper.from_array(np.asarray(scale), "s")]
    if zero is not None:
        inits.append(numpy_helper.from_array(np.asarray(zero), "z"))
        if dq_zero == "zeros":
            inits.append(numpy_helper.from_array(np.zeros_like(np.asarray(zero)), "z0"))
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def node_types(model) -> list[str]:
    return [n.op_type for n in wgnn.convert(model).graph.nodes]


@pytest.mark.parametrize("zero", [np.int8(0), np.int8(-5), np.uint8(128), None])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.037])
def test_fake_quantize_per_tensor(zero, scale):
    # Scale 1: TIES are rounding ties; 0.5: saturation of int8 (+-127.5 -> +-255); 0.037: no exact grid.
    model = qdq_model([None], np.float32(scale), zero)
    assert node_types(model) == ["FakeQuantize"]
    check_model(model, {"x": TIES}, reference="ort")
    check_model(model, {"x": X3.reshape(-1)}, reference="ort")


@pytest.mark.parametrize("axis, dq_axis", [(1, None), (-2, None), (0, None), (1, -2), (-1, 2)])
def test_fake_quantize_per_axis(axis, dq_axis):
    c = X3.shape[axis]
    scale = (rng.random(c) * 0.2 + 0.05).astype(np.float32)
    model = qdq_model(list(X3.shape), scale, q8(c, dtype=np.uint8), axis=axis, dq_axis=dq_axis)
    assert node_types(model) == ["FakeQuantize"]
    check_model(model, {"x": X3}, reference="ort")
    # Without x's rank, axes spelled differently cannot be proven equal: the pair stays.
    if dq_axis is not None:
        unranked = qdq_model(None, scale, q8(c, dtype=np.uint8), axis=axis, dq_axis=dq_axis)
        assert node_types(unranked) == ["QuantizeLinear", "DequantizeLinear"]


@pytest.mark.parametrize("axis, block", [(1, 4), (-1, 2)])
def test_fake_quantize_blocked_and_16bit(axis, block):
    x = (rng.standard_normal((4, 6)) * 3).astype(np.float32)
    shape = list(x.shape)
    shape[axis] = -(-shape[axis] // block)
    scale = (rng.random(shape) * 0.2 + 0.05).astype(np.float32)
    model = qdq_model(list(x.shape), scale, q8(*shape), axis=axis, block=block, opset=21)
    assert node_types(model) == ["FakeQuantize"]
    check_model(model, {"x": x})
    model = qdq_model(list(x.shape), np.float32(1e-3), np.int16(7), opset=21)
    assert node_types(model) == ["FakeQuantize"]
    check_model(model, {"x": x * 30})  # saturates at int16's range


def test_fake_quantize_nan_and_zero_point_spellings():
    # An absent zero point on one side and explicit zeros on the other still pair.
    model = qdq_model([5], np.float32(0.25), np.int8(0), dq_zero="none")
    assert node_types(model) == ["FakeQuantize"]
    check_model(model, {"x": np.array([np.nan, -np.inf, np.inf, 0.375, -0.375], np.float32)}, reference="ort")
    scalar = qdq_model([], np.float32(0.5), np.uint8(9))
    assert node_types(scalar) == ["FakeQuantize"]
    check_model(scalar, {"x": np.array(1.25, np.float32)}, reference="ort")


@pytest.mark.parametrize("output_first", [True, False])
def test_fake_quantize_shared_by_several_readers_and_constant_weights(output_first):
    # One QuantizeLinear read by two DequantizeLinear nodes (one a graph output, which keeps its name
    # through an identity when it is not the first); float weights fake-quantized by Q/DQ pairs of
    # constants fold into an initializer.
    w = rng.standard_normal((5, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for n, v in (
        ("s", np.float32(0.1)), ("z", np.int8(4)), ("w", w), ("ws", np.float32(0.02)), ("wz", np.int8(0)))]
    readers = [helper.make_node("DequantizeLinear", ["q", "s", "z"], [name]) for name in ("a", "b")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), *readers[::1 if output_first else -1],
             helper.make_node("QuantizeLinear", ["w", "ws", "wz"], ["wq"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wdq"]),
             helper.make_node("MatMul", ["b", "wdq"], ["m"])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("a", "m")]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    assert node_types(model) == ["FakeQuantize", "MatMul"] if output_first else ["FakeQuantize", "Unary", "MatMul"]
    check_model(model, {"x": (rng.standard_normal((2, 5)) * 3).astype(np.float32)}, reference="ort")


def test_mismatched_qdq_stays_on_numpy():
    # The DequantizeLinear reads zero point 0, the QuantizeLinear 128: not a fake quantization.
    model = qdq_model([len(TIES)], np.float32(0.5), np.uint8(128), dq_zero="zeros")
    assert node_types(model) == ["QuantizeLinear", "DequantizeLinear"]
    check_model(model, {"x": TIES}, reference="ort")


def test_quantized_output_runs_on_numpy_by_design():
    model = make_model("QuantizeLinear", [X3, Const(np.float32(0.1)), Const(np.int8(0))], opset=13)
    converted = read_model(model_to_bytes(wgnn.convert(model)))
    for backend in backends_under_test():
        session = session_for(converted, backend)
        session.run(None, {"in0": X3})
        # QuantizeLinear has no GPU kernel on purpose (its int8 output is no GPU tensor type), so it is
        # no fallback worth a look.
        assert not gpu_fallbacks(session)
        for fallback in session.report()["fallbacks"]:
            assert fallback["op"].startswith("QuantizeLinear"), fallback
            assert any("no GPU kernel" in r or "not supported on the GPU" in r for r in fallback["reasons"])


# ------------------------------------------------------------------------------ a QDQ model
def qdq_network() -> onnx.ModelProto:
    """DQ(int8 weights, per channel) -> Conv -> Relu -> Q/DQ -> Conv(DQ weights) -> Q/DQ (per channel,
    5 channels: a partial NC4HW4 slice) -> Reshape -> MatMul(DQ weights) -> Q/DQ output, as
    onnxruntime's quantizer writes them."""
    def init(name, value):
        return numpy_helper.from_array(np.asarray(value), name)

    c1, c2 = 6, 5
    inits = [
        init("w1_q", q8(c1, 3, 3, 3)), init("w1_s", (rng.random(c1) * 0.01 + 0.005).astype(np.float32)),
        init("w1_z", np.zeros(c1, np.int8)), init("b1", rng.standard_normal(c1).astype(np.float32)),
        init("a_s", np.float32(0.05)), init("a_z", np.uint8(0)),
        init("w2_q", q8(c2, c1, 1, 1, dtype=np.uint8)), init("w2_s", np.float32(0.004)),
        init("w2_z", np.uint8(128)),
        init("c_s", (rng.random(c2) * 0.05 + 0.05).astype(np.float32)), init("c_z", q8(c2) // 8),
        init("shape", np.array([2, -1], np.int64)),
        init("w3_q", q8(c2 * 4 * 5, 7)), init("w3_s", np.float32(0.01)),
        init("o_s", np.float32(0.02)), init("o_z", np.int8(-2)),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["w1_q", "w1_s", "w1_z"], ["w1"], axis=0),
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("QuantizeLinear", ["r1", "a_s", "a_z"], ["r1_q"]),
        helper.make_node("DequantizeLinear", ["r1_q", "a_s", "a_z"], ["r1_dq"]),
        helper.make_node("DequantizeLinear", ["w2_q", "w2_s", "w2_z"], ["w2"]),
        helper.make_node("Conv", ["r1_dq", "w2"], ["c2"], name="conv2"),
        helper.make_node("QuantizeLinear", ["c2", "c_s", "c_z"], ["c2_q"], axis=1),
        helper.make_node("DequantizeLinear", ["c2_q", "c_s", "c_z"], ["c2_dq"], axis=1),
        helper.make_node("Reshape", ["c2_dq", "shape"], ["flat"]),
        helper.make_node("DequantizeLinear", ["w3_q", "w3_s"], ["w3"]),
        helper.make_node("MatMul", ["flat", "w3"], ["m"]),
        helper.make_node("QuantizeLinear", ["m", "o_s", "o_z"], ["m_q"]),
        helper.make_node("DequantizeLinear", ["m_q", "o_s", "o_z"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "qdq_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_qdq_model_converts_to_fake_quantize():
    types = node_types(qdq_network())
    assert types.count("FakeQuantize") == 3
    assert not {"QuantizeLinear", "DequantizeLinear"} & set(types), types


def test_qdq_model_matches_onnxruntime_on_every_backend_without_fallback():
    model = qdq_network()
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    # Values sit on the output's quantization grid; a rounding flip of an activation upstream would
    # move them by a multiple of the scale, far beyond these tolerances.
    check_model(model, {"x": x}, expected=want, rtol=1e-4, atol=1e-4)
    converted = read_model(model_to_bytes(wgnn.convert(model)))
    for adapter in gpu_adapters():
        for storage in ("buffer", "texture"):
            config = wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter["index"], storage=storage)
            session = wgnn.InferenceSession(converted, config=config)
            (got,) = session.run(None, {"x": x})
            np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=1e-4, err_msg=f"{adapter['name']} {storage}")
            report = session.report()
            assert report["fallbacks"] == [] and set(report["ops_per_backend"]) == {"wgpu"}, report
            # Per tensor and per channel on the convolutions' NC4HW4 maps, linear after the MatMul.
            layouts = [execution.layout for segment in session.session.segments
                       for step, execution in segment.steps if step.op.op_type == "FakeQuantize"]
            assert layouts == ["nc4hw4", "nc4hw4", "linear"], layouts


@pytest.mark.parametrize("per_channel", [False, True])
def test_onnxruntime_quantizer_output_runs_on_the_gpu(tmp_path, per_channel):
    """A model quantized by onnxruntime's own quantizer (QDQ format: per-tensor scales of shape (1,)
    with zero points of shape (), int32 bias DequantizeLinear, Relu folded into the quantization)."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    weights = {"w1": rng.standard_normal((6, 3, 3, 3)) * 0.3, "b1": rng.standard_normal(6),
               "w2": rng.standard_normal((5, 6, 1, 1)) * 0.3, "b2": rng.standard_normal(5)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]), helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("Add", ["c2", "c2"], ["y"])]
    graph = helper.make_graph(nodes, "float", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 6, 7])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "float.onnx")

    class Calibration(quantization.CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": rng.standard_normal((1, 3, 6, 7)).astype(np.float32)} for _ in range(3)])

        def get_next(self):
            return next(self.feeds, None)

    quantization.quantize_static(tmp_path / "float.onnx", tmp_path / "qdq.onnx", Calibration(),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=per_channel,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
    qdq = onnx.load(tmp_path / "qdq.onnx")
    types = node_types(qdq)
    assert "FakeQuantize" in types and not {"QuantizeLinear", "DequantizeLinear"} & set(types), types
    x = rng.standard_normal((1, 3, 6, 7)).astype(np.float32)
    check_model(qdq, {"x": x}, reference="ort", rtol=1e-4, atol=1e-4)
