"""ConvPw (engine/ops/conv_pw.py): a dense conv and the 1x1 conv reading it as one op, made by the
converter's fuse_conv_pointwise (tools/convert/fusion_conv_pw.py).

ONNX pairs (Conv [+ Relu / Clip], 1x1 Conv [+ Add] [+ Relu / Clip]) converted by wgnn must become one
ConvPw and compute what onnxruntime computes on the pair, on numpy and every GPU adapter: 3 to 16
input, 1 to 16 conv and 1 to 16 output channels (not multiples of 4), kernels 3x3, 5x5, 1x3, 2x2,
strides, dilations, asymmetric pads, SAME padding, batch 2, odd and 1x1 images, each bias absent,
residual, fused activations on either stage; the GPU kernel on buffer and texture storage in fp32,
fp16 and fp16-arith, with each pixel block it can run, resizes that compile nothing, what it
refuses. The refusals of the pass keep both Convs; zoo UNet's two head pairs fuse."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters, session_for
from helpers import test_backends as backends_under_test
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.numpy import composite as numpy_composite
from wgnn.backends.numpy import conv as numpy_conv
from wgnn.backends.wgpu import conv_pw as gpu_conv_pw
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.engine.errors import ShapeError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models.format import model_to_bytes, read_model
from wgnn.models.zoo import build as build_zoo
from wgnn.models.zoo import example_inputs

import wgnn

ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(11)
FLOAT = TensorProto.FLOAT
KERNEL = "conv/conv_pw_nc4hw4.wgsl"
RELU = {"kind": "relu"}
RELU6 = {"kind": "clip", "alpha": 0.0, "beta": 6.0}


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class Case:
    """An ONNX Conv [+ activation] -> 1x1 Conv [+ Add residual] [+ activation] pair and its feeds."""

    def __init__(self, cin=5, cmid=6, cout=7, kernel=(3, 3), size=(9, 13), batch=1, *, stride=1, dilation=1,
                 pads=None, auto_pad=None, conv_bias=True, pw_bias=True, conv_act=RELU, act=None, residual=False,
                 symbolic=False):
        self.cin, self.cout, self.batch, self.size, self.symbolic = cin, cout, batch, tuple(size), symbolic
        self.window = {"strides": [stride, stride]}
        if dilation != 1:
            self.window["dilations"] = [dilation, dilation]
        if auto_pad:
            self.window["auto_pad"] = auto_pad
        else:
            self.window["pads"] = pads if pads is not None else [dilation * (k // 2) for k in kernel] * 2
        self.init = {"w": r(cmid, cin, *kernel, scale=(cin * np.prod(kernel)) ** -0.5),
                     "wp": r(cout, cmid, 1, 1, scale=cmid ** -0.5)}
        if conv_bias:
            self.init["b"] = r(cmid)
        if pw_bias:
            self.init["bp"] = r(cout)
        self.conv_act, self.act, self.residual = conv_act, act, residual
        self.x = r(batch, cin, *size, scale=2.0)  # spreads the conv sums past ReLU6's bounds
        self.r = None
        if residual:
            out = self.reference({"x": self.x}, with_residual=False)[0].shape
            self.r = r(*out)

    def onnx(self, *, with_residual=True):
        init = dict(self.init)
        residual = self.residual and with_residual
        conv_out = "c0" if self.conv_act else "c"
        pw_out = "p" if residual or self.act else "y"
        nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if "b" in init else []), [conv_out], **self.window)]
        nodes += self._activation("c0", "c", self.conv_act, init)
        nodes.append(helper.make_node("Conv", ["c", "wp"] + (["bp"] if "bp" in init else []), [pw_out]))
        if residual:
            nodes.append(helper.make_node("Add", ["p", "r"], ["pr" if self.act else "y"]))
        nodes += self._activation("pr" if residual else "p", "y", self.act, init)
        x_shape = ["N", self.cin, "H", "W"] if self.symbolic else list(self.x.shape)
        inputs = [helper.make_tensor_value_info("x", FLOAT, x_shape)]
        if residual:
            # Symbolic: a same-size conv (the residual's dims are the input's, so the converter sees
            # the pair's output shape equal to it and folds the Add).
            inputs.append(helper.make_tensor_value_info("r", FLOAT, ["N", self.cout, "H", "W"] if self.symbolic
                                                        else list(self.r.shape)))
        graph = helper.make_graph(nodes, "pair", inputs, [helper.make_tensor_value_info("y", FLOAT, None)],
                                  [numpy_helper.from_array(v, k) for k, v in init.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model

    @staticmethod
    def _activation(src, dst, act, init):
        if act is None:
            return []
        if act["kind"] == "clip":
            init[f"{dst}_lo"], init[f"{dst}_hi"] = np.float32(act["alpha"]), np.float32(act["beta"])
            return [helper.make_node("Clip", [src, f"{dst}_lo", f"{dst}_hi"], [dst])]
        return [helper.make_node("Relu", [src], [dst])]

    def feeds(self, x=None, residual=None):
        x = self.x if x is None else x
        feeds = {"x": x}
        if self.residual:
            feeds["r"] = self.r if residual is None else residual
        return feeds

    def reference(self, feeds=None, *, with_residual=True):
        model = self.onnx(with_residual=with_residual)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds or self.feeds())

    def converted(self) -> Model:
        """The pair converted by wgnn, through the file format: must be one ConvPw."""
        model = wgnn.convert(self.onnx())
        assert [n.op_type for n in model.graph.nodes] == ["ConvPw"]
        return read_model(model_to_bytes(model))


def max_error(got, want) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-6))


def run_everywhere(case: Case, backends=None):
    want = case.reference()[0]
    model = case.converted()
    for backend in backends or backends_under_test():
        session = session_for(model, backend)
        (got,) = session.run(None, case.feeds())
        gpu = backend.startswith("wgpu")
        if gpu:
            assert session.report()["fallbacks"] == [], backend
            assert convpw_kernels(session) == [KERNEL], backend
        np.testing.assert_allclose(got, want, rtol=1e-4 if gpu else 1e-5, atol=1e-4 if gpu else 1e-5, err_msg=backend)


def convpw_kernels(session) -> list[str]:
    return [d.kernel.path for segment in session.session.segments for step, ex in segment.steps
            if step.op.op_type == "ConvPw" for d in getattr(ex, "dispatches", [])]


# ---------------------------------------------------------------------------- against onnxruntime
CASES = {
    "c3-m6-o2-3x3-odd": {"cin": 3, "cmid": 6, "cout": 2},
    "c5-m1-o1-5x5-stride2-batch2-residual": {"cin": 5, "cmid": 1, "cout": 1, "kernel": (5, 5), "stride": 2,
                                             "batch": 2, "residual": True},
    "c16-m16-o16-relu6-residual-relu": {"cin": 16, "cmid": 16, "cout": 16, "size": (7, 10), "conv_act": RELU6,
                                        "act": RELU, "residual": True},
    "c5-m6-o7-1x3-asymmetric-no-conv-bias": {"kernel": (1, 3), "pads": [0, 1, 1, 0], "conv_bias": False},
    "c16-m6-o7-2x2-dilation2-no-pw-bias": {"cin": 16, "kernel": (2, 2), "dilation": 2, "pads": [1, 1, 1, 1],
                                           "pw_bias": False, "act": RELU6},
    "c5-m16-o2-stride2-asymmetric-no-conv-act": {"cmid": 16, "cout": 2, "stride": 2, "pads": [1, 0, 0, 1],
                                                 "conv_act": None, "act": {"kind": "clip", "alpha": -0.5,
                                                                           "beta": 0.5}},
    "c3-m1-o16-2x2-stride2-batch2-no-biases": {"cin": 3, "cmid": 1, "cout": 16, "kernel": (2, 2), "stride": 2,
                                               "pads": [0, 0, 0, 0], "batch": 2, "conv_bias": False,
                                               "pw_bias": False},
    "c16-m6-o1-dilation2-stride2": {"cin": 16, "cout": 1, "dilation": 2, "stride": 2, "size": (11, 9)},
    "c5-m6-o7-same-upper-stride2-residual": {"auto_pad": "SAME_UPPER", "stride": 2, "residual": True},
    "c5-m6-o7-1x1-image": {"size": (1, 1), "batch": 2},
}


@pytest.mark.parametrize("options", CASES.values(), ids=CASES.keys())
def test_matches_the_conv_pair(options):
    run_everywhere(Case(**options))


def test_conv_result_in_shared_scratch(monkeypatch):
    """Big conv results and Conv buffers live in the numpy backend's shared scratch: the
    intermediate is placed past the Conv plans' range there (forced with tiny limits)."""
    monkeypatch.setattr(numpy_composite, "RESIDENT_BYTES", 64)
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 64)
    run_everywhere(Case(cin=5, cmid=6, cout=7, batch=2, residual=True), ["numpy"])
    run_everywhere(Case(cin=3, cmid=16, cout=2, kernel=(5, 5), stride=2), ["numpy"])


def test_fused_node():
    model = Case(cin=5, cmid=6, cout=7, stride=2, conv_act=RELU6, act=RELU, residual=True).converted()
    (node,) = model.graph.nodes
    assert node.inputs == ["x", "w", "b", "wp", "bp", "r"] and node.outputs == ["y"]
    assert node.attrs["conv_activation"] == "clip" and node.attrs["conv_activation_beta"] == 6.0
    assert node.attrs["activation"] == "relu" and node.attrs["strides"] == [2, 2]


# ---------------------------------------------------------------------------- GPU
@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
@pytest.mark.parametrize("storage, precision", [("buffer", "fp32"), ("texture", "fp32"), ("buffer", "fp16"),
                                                ("texture", "fp16"), ("buffer", "fp16-arith"),
                                                ("texture", "fp16-arith")])
def test_storages_and_precisions(adapter, storage, precision):
    info = ADAPTERS[adapter]
    f16 = "shader-f16" in info["features"]
    if precision != "fp32" and storage == "buffer" and not f16:
        pytest.skip("16-bit buffers need shader-f16")
    # An NC4HW4 input with a residual, and a 3-channel image read linear (without a residual the
    # kernel binds x in its place) by a stride-2 conv.
    for case in (Case(cin=6, cmid=10, cout=7, size=(7, 11), batch=2, residual=True, act=RELU),
                 Case(cin=3, cmid=16, cout=5, kernel=(5, 5), stride=2, size=(9, 13), conv_act=RELU6)):
        want = case.reference()[0]
        config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage, precision=precision)
        session = wgnn.InferenceSession(case.converted(), config=config)
        got = session.run(None, case.feeds())[0]
        error = max_error(got, want)
        assert error <= (1e-5 if precision == "fp32" else 4e-3), f"max relative error {error:.3g}"
        placements = session.session.backends[0].placements
        assert {p.storage for p in placements.values() if p.layout == "nc4hw4"} == {storage}
        assert convpw_kernels(session) == [KERNEL]


@needs_gpu
@pytest.mark.parametrize("pixels", [1, 2, 4])
def test_every_pixel_block(monkeypatch, pixels):
    """The kernel's smaller pixel blocks (override constant PIXELS), sliding and not."""
    monkeypatch.setattr(gpu_conv_pw, "PIXELS", pixels)
    for options in ({"size": (5, 11), "residual": True}, {"stride": 2, "dilation": 2, "size": (9, 11)}):
        run_everywhere(Case(**options), [f"wgpu:{ADAPTERS[0]['index']}"])


def test_pixels_rule():
    """CPU adapters keep PIXELS (measured there); real GPUs take fewer pixels per invocation on a
    small map (zoo unet's 32->16->8 conv at 16x16: one, measured faster on an H200) and 8 on a big
    one (at 112x112, measured 2x faster than one)."""
    from dataclasses import replace

    from wgnn.backends.wgpu.conv_paths import CPU_WEIGHTS, GPU_WEIGHTS
    from wgnn.backends.wgpu.conv_pw import PIXELS, choose_pixels, conv_geometry

    def step_at(size):
        case = Case(cin=32, cmid=16, cout=8, size=size)
        session = wgnn.InferenceSession(case.converted(), providers=["numpy"])
        session.run(None, case.feeds())
        [step] = [step for segment in session.session.segments for step, _ in segment.steps
                  if step.op.op_type == "ConvPw"]
        return step

    small, big = step_at((16, 16)), step_at((112, 112))
    assert choose_pixels(small, conv_geometry(small), replace(CPU_WEIGHTS, workers=2)) == PIXELS
    assert choose_pixels(small, conv_geometry(small), GPU_WEIGHTS) == 1
    assert choose_pixels(big, conv_geometry(big), GPU_WEIGHTS) == 8
    assert choose_pixels(small, conv_geometry(small), replace(GPU_WEIGHTS, concurrency=16)) > 1


@needs_gpu
def test_real_gpu_pixels(monkeypatch):
    """With real GPUs' cost weights (patched in here) the kernel runs the pixels choose_pixels picks
    and compiles the other counts' pipelines; the results match onnxruntime."""
    from wgnn.backends.wgpu import conv_paths

    monkeypatch.setattr(conv_paths, "adapter_weights", lambda context: conv_paths.GPU_WEIGHTS)
    for options in ({"cin": 32, "cmid": 16, "cout": 8, "size": (16, 16), "residual": True},
                    {"stride": 2, "dilation": 2, "size": (9, 11)}):
        run_everywhere(Case(**options), [f"wgpu:{ADAPTERS[0]['index']}"])


def test_forced_pixels(monkeypatch):
    """WGNN_CONVPW_PIXELS=N forces the pixels per invocation (A/B runs); other values are refused."""
    from wgnn.backends.wgpu.conv_paths import GPU_WEIGHTS
    from wgnn.backends.wgpu.conv_pw import choose_pixels

    monkeypatch.setenv("WGNN_CONVPW_PIXELS", "2")
    assert choose_pixels(None, {}, GPU_WEIGHTS) == 2
    monkeypatch.setenv("WGNN_CONVPW_PIXELS", "3")
    with pytest.raises(wgnn.WgnnError, match="WGNN_CONVPW_PIXELS=3"):
        choose_pixels(None, {}, GPU_WEIGHTS)


@needs_gpu
def test_weights_in_storage_buffers(monkeypatch):
    """WGNN_CONV_WEIGHTS=storage keeps the weights in storage buffers (the A/B switch of the convs)."""
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "storage")
    run_everywhere(Case(cin=16, cmid=16, cout=7, residual=True), [f"wgpu:{a['index']}" for a in ADAPTERS])


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_compiles_nothing(adapter):
    case = Case(cin=5, cmid=6, cout=7, residual=True, symbolic=True)
    model = case.converted()
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    cache = pipeline_cache(session.session.backends[0].context)
    compiled = None
    for batch, (h, w) in ((1, (7, 9)), (2, (5, 5)), (1, (12, 17))):
        feeds = case.feeds(r(batch, 5, h, w), r(batch, 7, h, w))
        np.testing.assert_allclose(session.run(None, feeds)[0], case.reference(feeds)[0], rtol=1e-4, atol=1e-4)
        compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled, "a resize compiled pipelines"


def test_empty_batch():
    case = Case(cin=5, cmid=6, cout=7, residual=True, symbolic=True)
    model = case.converted()
    feeds = case.feeds(np.zeros((0, 5, 7, 7), np.float32), np.zeros((0, 7, 7, 7), np.float32))
    for backend in backends_under_test():
        session = session_for(model, backend)
        assert session.run(None, feeds)[0].shape == (0, 7, 7, 7)
        assert session.report()["fallbacks"] == [], backend


# ---------------------------------------------------------------------------- the op beyond the pass
def ir_model(cin=5, cmid=6, cout=3, spatial=2, *, weights_input=False) -> tuple[Model, dict, np.ndarray]:
    """A ConvPw node written directly (shapes the pass does not fuse), its feeds and the expected
    output (numpy, two stages)."""
    kernel = (3,) * spatial
    init = {"w": r(cmid, cin, *kernel, scale=0.2), "b": r(cmid), "wp": r(cout, cmid, *(1,) * spatial), "bp": r(cout)}
    x = r(2, cin, *(6,) * spatial)
    feeds = {"x": x}
    inputs = [TensorInfo("x", "float32", x.shape)]
    if weights_input:
        feeds["wp"] = init.pop("wp")
        inputs.append(TensorInfo("wp", "float32", feeds["wp"].shape))
    node = Node("ConvPw", ["x", "w", "b", "wp", "bp", ""], ["y"], {"pads": [1] * 2 * spatial,
                                                                     "conv_activation": "relu"}, name="cp")
    model = Model(Graph([node], inputs, [TensorInfo("y", "float32")], init))
    w, wp = init["w"], feeds.get("wp", init.get("wp"))
    conv = Node("Conv", ["x", "w", "b"], ["m"], {"pads": [1] * 2 * spatial, "activation": "relu"}, name="c")
    pw = Node("Conv", ["m", "wp", "bp"], ["y"], {}, name="p")
    pair = Model(Graph([conv, pw], [TensorInfo("x", "float32", x.shape)], [TensorInfo("y", "float32")],
                       {"w": w, "b": init["b"], "wp": wp, "bp": init["bp"]}))
    want = wgnn.InferenceSession(pair, providers=["numpy"]).run(None, {"x": x})[0]
    return model, feeds, want


REFUSED = {
    "20 conv channels": ({"cmid": 20}, "at most 16"),
    "20 output channels": ({"cout": 20}, "at most 16"),
    "1-D": ({"spatial": 1}, "2-D"),
    "weights at run time": ({"weights_input": True}, "known at resize"),
}


@pytest.mark.parametrize("options, reason", REFUSED.values(), ids=REFUSED.keys())
def test_what_the_gpu_kernel_refuses_runs_on_numpy(options, reason):
    model, feeds, want = ir_model(**options)
    np.testing.assert_allclose(wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0], want,
                               rtol=1e-5, atol=1e-5)
    for adapter in ADAPTERS:
        session = session_for(model, f"wgpu:{adapter['index']}")
        np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-5, atol=1e-5)
        (fallback,) = session.report()["fallbacks"]
        assert fallback["op"].startswith("ConvPw") and any(reason in why for why in fallback["reasons"])


def test_flops():
    model, feeds, _ = ir_model(cin=5, cmid=6, cout=3)
    session = wgnn.InferenceSession(model, providers=["numpy"])
    session.run(None, feeds)
    pixels = 2 * 6 * 6
    assert session.report()["flops"] == 2 * pixels * 6 * 5 * 9 + 2 * pixels * 3 * 6


def test_shape_errors():
    def failing(**changes):
        model, feeds, _ = ir_model()
        node = model.graph.nodes[0]
        for key, value in changes.items():
            if key in ("w", "wp", "b", "bp"):
                model.graph.initializers[key] = value
            else:
                node.attrs[key] = value
        with pytest.raises(ShapeError) as info:
            wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
        return str(info.value)

    assert "input has 5 channels, weight expects 4 x group 1" in failing(w=r(6, 4, 3, 3))
    assert "pointwise weight must be (C_out, 6, 1, 1)" in failing(wp=r(3, 6, 3, 3))
    assert "pointwise weight must be (C_out, 6, 1, 1)" in failing(wp=r(3, 5, 1, 1))
    assert "bias must have shape (6,)" in failing(b=r(5))
    assert "pointwise bias must be float32 of shape (3,)" in failing(bp=r(6))
    assert "unknown conv activation 'nope'" in failing(conv_activation="nope")
    assert "unknown fused activation 'nope'" in failing(activation="nope")
    assert "does not fit the padded input" in failing(pads=[0, 0, 0, 0], dilations=[4, 4])


# ---------------------------------------------------------------------------- the fusion pass
def ops_of(model) -> list[str]:
    return [n.op_type for n in wgnn.convert(model).graph.nodes]


def refused_model(kind: str):
    case = Case(cin=5, cmid=6, cout=3, residual=kind != "conv output read twice")
    model = case.onnx()
    graph = model.graph
    conv, pw = (n for n in graph.node if n.op_type == "Conv")
    if kind == "conv output read twice":
        graph.node.append(helper.make_node("Sigmoid", ["c"], ["s"]))
        graph.output.append(helper.make_tensor_value_info("s", FLOAT, None))
    elif kind == "conv output is a graph output":
        graph.output.append(helper.make_tensor_value_info("c", FLOAT, None))
    elif kind == "20 conv channels":
        graph.initializer[0].CopyFrom(numpy_helper.from_array(r(20, 5, 3, 3), "w"))
        graph.initializer[1].CopyFrom(numpy_helper.from_array(r(3, 20, 1, 1), "wp"))
        graph.initializer[2].CopyFrom(numpy_helper.from_array(r(20), "b"))
    elif kind == "20 output channels":
        graph.initializer[1].CopyFrom(numpy_helper.from_array(r(20, 6, 1, 1), "wp"))
        graph.initializer[3].CopyFrom(numpy_helper.from_array(r(20), "bp"))
        graph.input[1].type.tensor_type.shape.dim[1].dim_value = 20
    elif kind == "pointwise 3x3":
        graph.initializer[1].CopyFrom(numpy_helper.from_array(r(3, 6, 3, 3), "wp"))
        pw.attribute.append(helper.make_attribute("pads", [1, 1, 1, 1]))
    elif kind == "pointwise stride 2":
        pw.attribute.append(helper.make_attribute("strides", [2, 2]))
        graph.input[1].type.tensor_type.shape.dim[2].dim_value = 5
        graph.input[1].type.tensor_type.shape.dim[3].dim_value = 7
    elif kind == "pointwise with pads":
        pw.attribute.append(helper.make_attribute("pads", [1, 1, 1, 1]))
        graph.input[1].type.tensor_type.shape.dim[2].dim_value = 11
        graph.input[1].type.tensor_type.shape.dim[3].dim_value = 15
    elif kind == "grouped conv":
        graph.initializer[0].CopyFrom(numpy_helper.from_array(r(6, 1, 3, 3), "w"))
        graph.initializer[2].CopyFrom(numpy_helper.from_array(r(6), "b"))
        graph.input[0].type.tensor_type.shape.dim[1].dim_value = 6
        conv.attribute.append(helper.make_attribute("group", 6))
        conv.attribute.extend([helper.make_attribute("dilations", [2, 2])])  # no ConvDwPw either
        next(a for a in conv.attribute if a.name == "pads").ints[:] = [2, 2, 2, 2]
    elif kind in ("conv weights at run time", "pointwise weights at run time"):
        name = "w" if kind.startswith("conv") else "wp"
        init = next(i for i in graph.initializer if i.name == name)
        graph.input.append(helper.make_tensor_value_info(name, FLOAT, list(init.dims)))
        graph.initializer.remove(init)
    elif kind == "3x3 128 -> 16 (Winograd alone)":
        graph.initializer[0].CopyFrom(numpy_helper.from_array(r(16, 128, 3, 3, scale=0.05), "w"))
        graph.initializer[1].CopyFrom(numpy_helper.from_array(r(3, 16, 1, 1), "wp"))
        graph.initializer[2].CopyFrom(numpy_helper.from_array(r(16), "b"))
        graph.input[0].type.tensor_type.shape.dim[1].dim_value = 128
    return model


REFUSALS = ["conv output read twice", "conv output is a graph output", "20 conv channels", "20 output channels",
            "pointwise 3x3", "pointwise stride 2", "pointwise with pads", "grouped conv", "conv weights at run time",
            "pointwise weights at run time", "3x3 128 -> 16 (Winograd alone)"]


@pytest.mark.parametrize("kind", REFUSALS)
def test_refusals_keep_both_convs(kind):
    ops = ops_of(refused_model(kind))
    assert ops.count("Conv") == 2 and "ConvPw" not in ops, ops


def test_refusals_compute_the_pair():
    """A refused pair still converts to what onnxruntime computes (a spot check on numpy)."""
    for kind in ("conv output read twice", "grouped conv", "pointwise weights at run time"):
        model = refused_model(kind)
        feeds = {"x": r(1, *[d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:])}
        for info in model.graph.input[1:]:
            feeds[info.name] = r(*[d.dim_value for d in info.type.tensor_type.shape.dim])
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        got = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=kind)


def test_wider_windows_than_winograd_fuse():
    """The Winograd bound holds for 3x3 stride-1 convs only: a 5x5 128 -> 16 conv fuses."""
    model = refused_model("3x3 128 -> 16 (Winograd alone)")
    conv = model.graph.node[0]
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(r(16, 128, 5, 5, scale=0.05), "w"))
    next(a for a in conv.attribute if a.name == "pads").ints[:] = [2, 2, 2, 2]
    assert ops_of(model) == ["ConvPw"]


def test_depthwise_pairs_stay_convdwpw():
    """fuse_depthwise_pointwise runs first: a depthwise 3x3 conv and its 1x1 become ConvDwPw."""
    model = refused_model("grouped conv")
    conv = model.graph.node[0]
    conv.attribute.remove(next(a for a in conv.attribute if a.name == "dilations"))
    next(a for a in conv.attribute if a.name == "pads").ints[:] = [1, 1, 1, 1]
    assert ops_of(model) == ["ConvDwPw"]


def test_zoo_unet_end_to_end():
    """UNet's head (3x3 16 -> 8, 1x1 8 -> 2) and its decoder's 3x3 32 -> 16 with the 1x1 16 -> 8 the
    converter moves before the Resize fuse, and the model still matches onnxruntime."""
    model = build_zoo("unet")
    converted = wgnn.convert(model)
    fused = [n for n in converted.graph.nodes if n.op_type == "ConvPw"]
    assert [n.name for n in fused][-1] == "mask" and len(fused) == 2
    feeds = example_inputs(model, 2, seed=1)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    data = model_to_bytes(converted)
    configs = [(wgnn.Config(providers=("numpy",)), 1e-4)] + [
        (wgnn.Config(providers=("wgpu",), adapter=a["index"]), 1e-3) for a in ADAPTERS]
    for config, tolerance in configs:
        session = wgnn.InferenceSession(data, config=config)
        (got,) = session.run(None, feeds)
        assert max_error(got, want) <= tolerance, config.providers
        assert session.report()["fallbacks"] == []
