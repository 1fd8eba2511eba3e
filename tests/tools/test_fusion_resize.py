"""swap_resize_pointwise (tools/convert/fusion_resize.py): a spatial Resize read only by a plain 1x1
Conv moves after it. Each case checks the node order after conversion and that the converted
model computes what onnxruntime computes on the original (numpy and every GPU adapter); the
refusals keep the order; zoo UNet's upsample -> 1x1 swaps and still matches onnxruntime."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import check_fusion, gpu_adapters
from onnx import TensorProto, helper, numpy_helper
from wgnn.models.format import model_to_bytes
from wgnn.models.zoo import build as build_zoo
from wgnn.models.zoo import example_inputs
from wgnn.tools.convert import fusion
from wgnn.tools.convert.fusion_resize import swap_resize_pointwise

import wgnn

rng = np.random.default_rng(3)
FLOAT = TensorProto.FLOAT
ADAPTERS = [a["index"] for a in gpu_adapters()]


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def upsample_project(c=5, cout=3, *, mode="linear", scales=(1.0, 1.0, 2.0, 2.0), axes=None, kernel=1, stride=1,
                     activation=False, bias=True, group=1, transform=None, sizes=None, extra_reader=False,
                     resize_output=False, size=(3, 4), opset=18):
    """ONNX: Resize(x) then Conv (1x1 by default) [+ Relu]; batch 2."""
    inits = {"w": r(cout, c // group, kernel, kernel, scale=c ** -0.5)}
    if bias:
        inits["b"] = r(cout)
    attrs = {"mode": mode}
    if transform:
        attrs["coordinate_transformation_mode"] = transform
    if axes:
        attrs["axes"] = list(axes)
    if sizes is not None:
        inits["sizes"] = np.array(sizes, np.int64)
        resize_inputs = ["x", "", "", "sizes"]
    else:
        inits["scales"] = np.array(scales, np.float32)
        resize_inputs = ["x", "", "scales"]
    nodes = [helper.make_node("Resize", resize_inputs, ["up"], **attrs),
             helper.make_node("Conv", ["up", "w", *(["b"] if bias else [])], ["y0" if activation else "y"],
                              strides=[stride] * 2, group=group)]
    if activation:
        nodes.append(helper.make_node("Relu", ["y0"], ["y"]))
    outputs = ["y"]
    if extra_reader:
        nodes.append(helper.make_node("Sigmoid", ["up"], ["up_sigmoid"]))
        outputs.append("up_sigmoid")
    if resize_output:
        outputs.append("up")
    graph = helper.make_graph(nodes, "upsample_project", [helper.make_tensor_value_info("x", FLOAT, [2, c, *size])],
                              [helper.make_tensor_value_info(n, FLOAT, None) for n in outputs],
                              [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, {"x": r(2, c, *size)}


def check(model, feeds, expected_ops, exact=False):
    """check_fusion, and with exact numpy bit for bit against the unswapped conversion."""
    converted = check_fusion(model, feeds, expected_ops, atol=1e-5)
    if exact:
        plain = wgnn.InferenceSession(wgnn.convert(model, optimize=False), providers=["numpy"]).run(None, feeds)
        swapped = wgnn.InferenceSession(model_to_bytes(converted), providers=["numpy"]).run(None, feeds)
        for a, b in zip(swapped, plain, strict=True):
            np.testing.assert_array_equal(a, b)
    return converted.graph


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("transform", [None, "align_corners", "asymmetric"])
def test_the_resize_moves_after_the_projection(mode, transform):
    graph = check(*upsample_project(mode=mode, transform=transform), ["Conv", "Resize"])
    conv, resize = graph.nodes
    assert conv.inputs[0] == "x" and resize.inputs[0] == conv.outputs[0] and resize.outputs == ["y"]


def test_nearest_is_bit_exact():
    check(*upsample_project(mode="nearest", scales=(1.0, 1.0, 3.0, 2.0)), ["Conv", "Resize"], exact=True)


def test_axes_non_integer_scales_no_bias_and_groups():
    check(*upsample_project(c=6, cout=4, group=2, bias=False, scales=(1.5, 2.0), axes=(2, 3)),
          ["Conv", "Resize"])


def test_a_chain_of_projections_moves_the_resize_past_all_of_them():
    model, feeds = upsample_project(c=24, cout=20)  # 20 channels between: no ConvPw pair
    model.graph.initializer.append(numpy_helper.from_array(r(3, 20, 1, 1), "w2"))
    model.graph.node[-1].output[0] = "y1"
    model.graph.node.append(helper.make_node("Conv", ["y1", "w2"], ["y"]))
    check(model, feeds, ["Conv", "Conv", "Resize"])


REFUSED = {
    "activation on the conv": {"activation": True},
    "3x3 conv": {"kernel": 3},
    "strided conv": {"stride": 2},
    "cubic": {"mode": "cubic"},
    "crop and resize": {"transform": "tf_crop_and_resize"},
    "sizes, not scales": {"sizes": (2, 5, 6, 8)},
    "channels resampled": {"scales": (1.0, 2.0, 2.0, 2.0), "c": 5, "cout": 3},
    "two readers": {"extra_reader": True},
    "resize output is a graph output": {"resize_output": True},
    "costlier after: many more outputs than inputs": {"c": 2, "cout": 64},
    "downsampling": {"scales": (1.0, 1.0, 0.5, 0.5), "size": (6, 8)},
}


@pytest.mark.parametrize("options", REFUSED.values(), ids=REFUSED.keys())
def test_refusals_keep_the_order(options):
    model, _feeds = upsample_project(**options)
    ops = [n.op_type for n in wgnn.convert(model).graph.nodes]
    assert ops.index("Resize") < ops.index("Conv")


def test_zoo_unet_end_to_end():
    model = build_zoo("unet")
    graph = wgnn.convert(model).graph
    order = [n.op_type for n in graph.nodes]
    resize = order.index("Resize")
    projection = graph.nodes[resize - 1]
    # conv_23 (3x3) and the moved 1x1 then fuse into one ConvPw
    assert projection.op_type == "ConvPw" and projection.outputs[0] == graph.nodes[resize].inputs[0]
    feeds = example_inputs(model)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for config in [wgnn.Config(providers=("numpy",))] + [wgnn.Config(providers=("wgpu",), adapter=a) for a in ADAPTERS]:
        got = wgnn.InferenceSession(model, config=config).run(None, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_the_pass_is_wired_before_the_conv_fusions():
    passes = list(fusion.FUSION_PASSES)
    assert passes.index(fusion.fuse_activations) < passes.index(swap_resize_pointwise) \
        < passes.index(fusion.fuse_depthwise_pointwise)
