"""Conv and ConvTranspose against onnx.reference (Conv) and onnxruntime (ConvTranspose: the
reference mishandles group > 1, output_shape smaller than the full output and SAME_UPPER)."""
import numpy as np
import pytest
from helpers import Const, check_op, make_model

import wgnn

rng = np.random.default_rng(0)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check_ort(op_type, inputs, attrs=None, **options):
    """check_op against onnxruntime (where onnx.reference is wrong or cannot run the case)."""
    return check_op(op_type, inputs, attrs, reference="ort", **options)

# ------------------------------------------------------------------------------------------ Conv
def test_conv_bias_asymmetric_pads():
    check_op("Conv", [r(2, 5, 7, 6), Const(r(6, 5, 3, 3)), Const(r(6))], {"pads": [1, 0, 2, 1]}, **TOL)


def test_conv_stride_dilation_odd_sizes():
    check_op("Conv", [r(1, 3, 9, 8), Const(r(5, 3, 3, 2))], {"strides": [2, 3], "dilations": [2, 1],
                                                             "pads": [1, 2, 0, 1]}, **TOL)


def test_conv_groups():
    check_op("Conv", [r(2, 6, 7, 5), Const(r(4, 3, 3, 3)), Const(r(4))], {"group": 2, "pads": [1, 1, 1, 1]}, **TOL)
    check_op("Conv", [r(1, 6, 8, 7), Const(r(6, 2, 2, 3))], {"group": 3, "strides": [2, 2], "dilations": [2, 2]}, **TOL)


def test_conv_depthwise():
    check_op("Conv", [r(2, 5, 6, 7), Const(r(5, 1, 3, 3)), Const(r(5))], {"group": 5, "pads": [1, 1, 1, 1]}, **TOL)
    # channel multiplier 2, stride 2
    check_op("Conv", [r(1, 3, 7, 7), Const(r(6, 1, 3, 3))], {"group": 3, "strides": [2, 2]}, **TOL)


@pytest.mark.parametrize("auto_pad", ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])
def test_conv_auto_pad(auto_pad):
    check_op("Conv", [r(2, 5, 7, 6), Const(r(3, 5, 3, 2)), Const(r(3))],
             {"auto_pad": auto_pad, "strides": [2, 2], "kernel_shape": [3, 2]}, **TOL)
    check_op("Conv", [r(1, 3, 8, 5), Const(r(4, 3, 2, 2))], {"auto_pad": auto_pad}, **TOL)


def test_conv_1x1():
    check_op("Conv", [r(2, 5, 1, 1), Const(r(3, 5, 1, 1)), Const(r(3))], **TOL)
    check_op("Conv", [r(1, 6, 1, 1), Const(r(4, 6, 3, 3))], {"pads": [1, 1, 1, 1]}, **TOL)
    check_op("Conv", [r(2, 5, 4, 3), Const(r(7, 5, 1, 1))], **TOL)


def test_conv_1d_and_3d():
    check_op("Conv", [r(2, 5, 11), Const(r(4, 5, 3)), Const(r(4))], {"strides": [2], "pads": [2, 1], "dilations": [2]},
             **TOL)
    check_op("Conv", [r(1, 4, 9), Const(r(4, 2, 3))], {"group": 2, "auto_pad": "SAME_UPPER"}, **TOL)
    check_op("Conv", [r(2, 3, 5, 4, 3), Const(r(4, 3, 2, 2, 2)), Const(r(4))], {"pads": [1, 0, 1, 0, 1, 1]}, **TOL)
    check_op("Conv", [r(1, 4, 5, 6, 5), Const(r(4, 2, 3, 1, 2))], {"group": 2, "strides": [2, 1, 2]}, **TOL)


def test_conv_runtime_weights_and_opsets():
    check_op("Conv", [r(2, 5, 6, 5), r(3, 5, 3, 3), r(3)], {"pads": [1, 1, 1, 1]}, **TOL)
    check_op("Conv", [r(1, 3, 6, 5), Const(r(2, 3, 3, 3))], {"auto_pad": "SAME_LOWER"}, opset=7, **TOL)
    check_op("Conv", [r(1, 3, 6, 5), Const(r(2, 3, 3, 3))], opset=11, **TOL)


def test_conv_empty_batch():
    check_ort("Conv", [np.zeros((0, 3, 5, 5), np.float32), Const(r(2, 3, 3, 3)), Const(r(2))])
    check_ort("ConvTranspose", [np.zeros((0, 3, 4, 4), np.float32), Const(r(3, 2, 2, 2))], {"strides": [2, 2]})


def test_conv_float64():
    x = rng.standard_normal((1, 3, 5, 6))
    check_op("Conv", [x, Const(rng.standard_normal((4, 3, 3, 3)))], {"pads": [1, 1, 1, 1]}, rtol=1e-10, atol=1e-12)


def test_conv_flops_and_shape_errors():
    model = make_model("Conv", [r(2, 5, 7, 6), Const(r(6, 5, 3, 3))], {"pads": [1, 1, 1, 1]})
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    session.run(None, {"in0": r(2, 5, 7, 6)})
    assert session.report()["flops"] == 2 * (2 * 6 * 7 * 6) * (5 * 3 * 3)  # 2 * MACs
    bad = make_model("Conv", [r(2, 4, 7, 6), Const(r(6, 5, 3, 3))])
    with pytest.raises(wgnn.ShapeError, match="4 channels, weight expects 5"):
        wgnn.InferenceSession(bad.SerializeToString(), providers=["numpy"]).run(None, {"in0": r(2, 4, 7, 6)})
    with pytest.raises(wgnn.ConversionError, match="kernel_shape"):
        wgnn.convert(make_model("Conv", [r(1, 3, 5, 5), Const(r(2, 3, 3, 3))], {"kernel_shape": [2, 2]}))


def residual_conv_model(r_shape, activation="relu"):
    """An IR Conv with the fused residual input (what the converter's residual-Add fusion makes)."""
    from wgnn.engine.graph import Graph, Model, Node, TensorInfo

    w, b = r(4, 3, 3, 3), r(4)
    node = Node("Conv", ["x", "w", "b", "res"], ["y"], {"pads": [1, 1, 1, 1], "activation": activation}, name="c")
    inputs = [TensorInfo("x", "float32", (2, 3, 5, 6)), TensorInfo("res", "float32", r_shape)]
    graph = Graph(nodes=[node], inputs=inputs, outputs=[TensorInfo("y", "float32")], initializers={"w": w, "b": b})
    return Model(graph), w, b


def test_conv_residual_input():
    model, w, b = residual_conv_model((2, 4, 5, 6))
    x, res = r(2, 3, 5, 6), r(2, 4, 5, 6)
    session = wgnn.InferenceSession(model, providers=["numpy"])
    got = session.run(None, {"x": x, "res": res})[0]
    plain = make_model("Conv", [x, Const(w), Const(b)], {"pads": [1, 1, 1, 1]})
    conv = wgnn.InferenceSession(plain.SerializeToString(), providers=["numpy"]).run(None, {"in0": x})[0]
    np.testing.assert_allclose(got, np.maximum(conv + res, 0), rtol=1e-5, atol=1e-6)
    assert session.report()["flops"] == 2 * (2 * 4 * 5 * 6) * (3 * 3 * 3) + 2 * 4 * 5 * 6  # MACs, then the add


@pytest.mark.parametrize("r_shape", [(1, 4, 5, 6), (2, 4, 1, 1), (2, 4, 5, 7)])
def test_conv_residual_must_have_the_output_shape(r_shape):
    model, _, _ = residual_conv_model(r_shape)
    with pytest.raises(wgnn.ShapeError, match="residual must be float32 of the output's shape"):
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"x": r(2, 3, 5, 6), "res": r(*r_shape)})


# -------------------------------------------------------------------------------- ConvTranspose
def test_conv_transpose_basic():
    check_ort("ConvTranspose", [r(2, 5, 4, 3), Const(r(5, 3, 3, 3)), Const(r(3))])
    check_ort("ConvTranspose", [r(1, 3, 4, 5), Const(r(3, 2, 3, 2))], {"strides": [2, 3]})
    check_ort("ConvTranspose", [r(2, 4, 3, 3), r(4, 3, 3, 3), r(6)], {"group": 2, "strides": [2, 2]})  # runtime W, B


def test_conv_transpose_groups_and_depthwise():
    check_ort("ConvTranspose", [r(2, 6, 4, 5), Const(r(6, 2, 3, 3)), Const(r(4))], {"group": 2, "strides": [2, 3]})
    check_ort("ConvTranspose", [r(1, 6, 3, 4), Const(r(6, 1, 3, 3))], {"group": 6, "strides": [2, 2],
                                                                         "pads": [1, 1, 1, 1]})


def test_conv_transpose_pads_output_padding_dilations():
    check_ort("ConvTranspose", [r(1, 3, 4, 5), Const(r(3, 2, 3, 3))],
              {"strides": [2, 2], "pads": [1, 0, 0, 2], "output_padding": [1, 1], "dilations": [2, 1]})
    check_ort("ConvTranspose", [r(2, 5, 3, 3), Const(r(5, 3, 2, 2)), Const(r(3))],
              {"strides": [3, 2], "output_padding": [2, 1]})


@pytest.mark.parametrize("auto_pad", ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_output_shape_and_auto_pad(auto_pad):
    x, w = r(1, 3, 4, 5), Const(r(3, 2, 3, 3))
    check_ort("ConvTranspose", [x, w], {"strides": [2, 2], "output_shape": [8, 9], "auto_pad": auto_pad})
    check_ort("ConvTranspose", [x, w], {"strides": [2, 2], "output_shape": [10, 12], "auto_pad": auto_pad})
    check_ort("ConvTranspose", [x, w], {"strides": [2, 3], "auto_pad": auto_pad})


def test_conv_transpose_1d_3d_1x1():
    check_ort("ConvTranspose", [r(2, 3, 5), Const(r(3, 4, 3)), Const(r(4))], {"strides": [3], "dilations": [2]})
    check_ort("ConvTranspose", [r(1, 2, 3, 3, 2), Const(r(2, 2, 2, 2, 2))], {"strides": [2, 1, 2]})
    check_ort("ConvTranspose", [r(2, 5, 1, 1), Const(r(5, 3, 1, 1))])
    check_ort("ConvTranspose", [r(1, 5, 1, 1), Const(r(5, 3, 3, 3))], {"strides": [2, 2]})
