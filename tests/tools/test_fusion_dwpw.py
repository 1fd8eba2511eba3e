"""fuse_depthwise_pointwise (tools/convert/fusion_dwpw.py): a depthwise 3x3 Conv read only by a 1x1
Conv with at most 32 outputs becomes one ConvDwPw. Each case checks the nodes left after
conversion and that the converted model computes what onnxruntime computes on the original (on
numpy and every GPU adapter); the refusals keep both Convs; zoo MobileNetV2 loses 5 Convs and
still matches onnxruntime."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import check_fusion, gpu_adapters
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.models.format import model_to_bytes
from wgnn.models.zoo import build as build_zoo
from wgnn.models.zoo import example_inputs
from wgnn.tools.convert import fusion
from wgnn.tools.convert.fusion_dwpw import fuse_depthwise_pointwise
from wgnn.tools.convert.fusion_dwpw_expand import fuse_dwpw_expand

import wgnn

rng = np.random.default_rng(1)
FLOAT = TensorProto.FLOAT
ADAPTERS = [a["index"] for a in gpu_adapters()]


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def block(c=6, cout=4, *, dw_stride=1, dw_kernel=3, dw_dilation=1, pw_stride=1, pw_pads=None, pw_group=1,
          residual=False, dw_output=False, extra_reader=False, pw_weights_input=False, size=(7, 9)):
    """ONNX: Conv(group C) + BN + Clip(0, 6), then 1x1 Conv + BN [+ Add residual]."""
    pad = dw_dilation * (dw_kernel // 2)
    inits = {"wd": r(c, 1, dw_kernel, dw_kernel), "bd": r(c), "wp": r(cout, c // pw_group, 1, 1, scale=c ** -0.5),
             "lo": np.float32(0.0), "hi": np.float32(6.0)}
    for prefix, n in (("d", c), ("p", cout)):
        inits.update({f"{prefix}_gamma": r(n), f"{prefix}_beta": r(n), f"{prefix}_mean": r(n),
                      f"{prefix}_var": (np.abs(r(n)) + 0.5).astype(np.float32)})
    nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["d0"], group=c, pads=[pad] * 4, strides=[dw_stride] * 2,
                              dilations=[dw_dilation] * 2),
             helper.make_node("BatchNormalization", ["d0", "d_gamma", "d_beta", "d_mean", "d_var"], ["d1"]),
             helper.make_node("Clip", ["d1", "lo", "hi"], ["d"]),
             helper.make_node("Conv", ["d", "wp"], ["p0"], strides=[pw_stride] * 2, group=pw_group,
                              **({"pads": pw_pads} if pw_pads else {})),
             helper.make_node("BatchNormalization", ["p0", "p_gamma", "p_beta", "p_mean", "p_var"], ["y"])]
    outputs, inputs = ["y"], {"x": [2, c, *size]}
    out = [(s - 1) // dw_stride + 1 for s in size]
    if residual:
        nodes[-1].output[0] = "p"
        nodes.append(helper.make_node("Add", ["p", "r"], ["y"]))
        inputs["r"] = [2, cout, *out]
    if dw_output:
        outputs.append("d")
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["d"], ["d_relu"]))
        outputs.append("d_relu")
    if pw_weights_input:
        inputs["wp"] = list(inits.pop("wp").shape)
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, FLOAT, None) for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feeds = {"x": r(2, c, *size)}
    if pw_weights_input:
        feeds["wp"] = r(cout, c // pw_group, 1, 1, scale=c ** -0.5)
    if residual:
        feeds["r"] = r(2, cout, *out)
    return model, feeds


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("cout", [1, 24, 32])
def test_the_pair_fuses(stride, cout):
    graph = check_fusion(*block(c=10, cout=cout, dw_stride=stride), ["ConvDwPw"]).graph
    node = graph.nodes[0]
    assert node.inputs[0] == "x" and node.outputs == ["y"]
    assert node.attrs["dw_activation"] == "clip" and node.attrs["dw_activation_beta"] == 6.0
    assert node.attrs["strides"] == [stride, stride] and not node.attrs["activation"]


def test_residual_and_activation_of_the_pointwise_conv_fuse():
    model, feeds = block(c=6, cout=6, residual=True)
    relu = helper.make_node("Relu", ["y"], ["z"])
    model.graph.node.append(relu)
    model.graph.output[0].name = "z"
    node = check_fusion(model, feeds, ["ConvDwPw"]).graph.nodes[0]
    assert node.inputs[5] == "r" and node.attrs["activation"] == "relu"


def test_two_blocks_fuse_separately():
    model, feeds = block(c=8, cout=8)
    # A second block on the first one's output (y -> ... -> y2).
    extra, _ = block(c=8, cout=4, dw_stride=2)
    renamed = {name: f"{name}_2" for name in ["wd", "bd", "wp", "lo", "hi", "d0", "d1", "d", "p0", "y"]
               + [f"{p}_{k}" for p in "dp" for k in ("gamma", "beta", "mean", "var")]}
    renamed["x"] = "y"
    for node in extra.graph.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
        model.graph.node.append(node)
    for init in extra.graph.initializer:
        init.name = renamed[init.name]
        model.graph.initializer.append(init)
    model.graph.output[0].name = "y_2"
    check_fusion(model, feeds, ["ConvDwPw", "ConvDwPw"])


REFUSED = {
    "33 outputs": {"cout": 33},
    "dw output has two readers": {"extra_reader": True},
    "dw output is a graph output": {"dw_output": True},
    "1x1 stride 2": {"pw_stride": 2},
    "1x1 with pads": {"pw_pads": [1, 1, 1, 1]},
    "1x1 grouped": {"pw_group": 2},
    "dw 5x5": {"dw_kernel": 5},
    "dw dilation 2": {"dw_dilation": 2},
    "dw stride 3": {"dw_stride": 3},
    "1x1 weights at run time": {"pw_weights_input": True},
}


@pytest.mark.parametrize("options", REFUSED.values(), ids=REFUSED.keys())
def test_refusals_keep_both_convs(options):
    model, _feeds = block(**options)
    ops = [n.op_type for n in wgnn.convert(model).graph.nodes]
    assert ops.count("Conv") == 2 and "ConvDwPw" not in ops


def test_refuses_a_residual_on_the_depthwise_conv():
    """An Add folded into the depthwise Conv (its input 3) is not part of the fused op."""
    model, _feeds = block(c=6, cout=4)
    clip = next(n for n in model.graph.node if n.op_type == "Clip")
    add = helper.make_node("Add", ["d1", "x"], ["d1x"])
    clip.input[0] = "d1x"
    model.graph.node.insert(list(model.graph.node).index(clip), add)
    ops = [n.op_type for n in wgnn.convert(model).graph.nodes]
    assert ops == ["Conv", "Conv"]


def test_refuses_a_depthwise_output_read_in_a_subgraph():
    """An If branch reads the depthwise output from the outer scope: a second reader (the converter
    lists the If's outer-scope reads as its inputs; the pass also checks the subgraphs itself)."""
    model, feeds = block(c=6, cout=4)
    branches = [helper.make_graph([helper.make_node("Identity", ["d"], [f"out_{k}"])], f"branch_{k}", [],
                                  [helper.make_tensor_value_info(f"out_{k}", FLOAT, None)]) for k in ("a", "b")]
    model.graph.node.append(helper.make_node("If", ["cond"], ["chosen"], then_branch=branches[0],
                                             else_branch=branches[1]))
    model.graph.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    model.graph.output.append(helper.make_tensor_value_info("chosen", FLOAT, None))
    ops = [n.op_type for n in wgnn.convert(model).graph.nodes]
    assert ops.count("Conv") == 2 and "ConvDwPw" not in ops
    feeds["cond"] = np.array(True)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_refuses_a_regular_3x3_conv():
    """A one-group 3x3 conv and its 1x1 reader are ConvPw's pair (tools/convert/fusion_conv_pw.py)."""
    model, _feeds = block(c=4, cout=4)
    conv = model.graph.node[0]
    conv.attribute.remove(next(a for a in conv.attribute if a.name == "group"))
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(r(4, 4, 3, 3), "wd"))
    ops = [n.op_type for n in wgnn.convert(model).graph.nodes]
    assert ops == ["ConvPw"]


def test_zoo_mobilenetv2_end_to_end(monkeypatch):
    """(Without fuse_dwpw_expand, which would then take each pair with the next expand conv.)"""
    model = build_zoo("mobilenetv2")
    without_expand = tuple(p for p in fusion.FUSION_PASSES if p is not fuse_dwpw_expand)
    monkeypatch.setattr(fusion, "FUSION_PASSES", without_expand)
    fused = wgnn.convert(model)
    plain_passes = tuple(p for p in without_expand if p is not fuse_depthwise_pointwise)
    monkeypatch.setattr(fusion, "FUSION_PASSES", plain_passes)
    plain = wgnn.convert(model)
    count = lambda m, op: sum(n.op_type == op for n in m.graph.nodes)  # noqa: E731
    assert count(fused, "ConvDwPw") == 5 and count(plain, "Conv") - count(fused, "Conv") == 10
    assert len(plain.graph.nodes) - len(fused.graph.nodes) == 5
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    data = model_to_bytes(fused)
    # Tolerances of the zoo tests: numpy 1e-4, GPU 1e-3 (max error relative to the largest output).
    configs = [(wgnn.Config(providers=("numpy",)), 1e-4)] + [
        (wgnn.Config(providers=("wgpu",), adapter=a), 1e-3) for a in ADAPTERS]
    for config, tolerance in configs:
        session = wgnn.InferenceSession(data, config=config)
        cache = pipeline_cache(session.session.backends[0].context) if config.providers[0] == "wgpu" else None
        compiled = None
        for batch in (1, 2):
            feeds = example_inputs(model, batch, seed=batch)
            (want,) = reference.run(None, feeds)
            (got,) = session.run(None, feeds)
            error = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
            assert error <= tolerance, f"{config.providers} batch {batch}: max rel error {error:.3g}"
            assert session.report()["fallbacks"] == []
            if cache is not None:
                compiled = cache.compiled if compiled is None else compiled
                assert cache.compiled == compiled, "resizing to a new batch compiled pipelines"
