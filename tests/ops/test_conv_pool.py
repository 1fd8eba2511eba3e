"""ConvMaxPool (engine/ops/conv_pool.py): a Conv and the max pooling of its output as one op.

The IR op runs on numpy and on every GPU adapter against onnxruntime running the Conv (+ activation)
and MaxPool it stands for: 3 to 32 input channels, 1 to 20 outputs, groups and depthwise, conv
strides 1 and 2, dilation, pads, windows 2x2 / 2, 3x3 / 2 with pad 1, 3x3 / 1, ceil_mode, odd and
tiny images, batch 2, no bias, negative conv outputs with no activation, the conv output kept as a
second output; the GPU kernel on buffer and texture storage in fp32, fp16 and fp16-arith; resizes
that compile nothing; what the GPU kernel refuses; shape errors."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters, record_pipelines, session_for
from helpers import test_backends as backends_under_test
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.numpy import composite as numpy_composite
from wgnn.backends.numpy import conv as numpy_conv
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.engine.errors import ShapeError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models.format import model_to_bytes, read_model

import wgnn

ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(7)
KERNEL = "conv/conv_maxpool_nc4hw4.wgsl"
ONNX_ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "clip": "Clip"}


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class Case:
    """Weights, attributes and feeds of one Conv + MaxPool pair (2-D unless `size` says otherwise)."""

    def __init__(self, cin=5, cout=6, size=(7, 9), batch=1, *, kernel=(3, 3), stride=1, pads=None, dilations=None,
                 auto_pad=None, group=1, bias=True, act="relu", pool=(2, 2), pool_stride=None, pool_pads=None,
                 ceil_mode=0, keep=False):
        rank = len(size)
        self.cin, self.cout, self.batch, self.size, self.keep = cin, cout, batch, tuple(size), keep
        self.conv = {"strides": [stride] * rank, "group": group}
        if auto_pad:
            self.conv["auto_pad"] = auto_pad
        else:
            self.conv["pads"] = pads if pads is not None else [k // 2 for k in kernel] * 2
        if dilations:
            self.conv["dilations"] = dilations
        self.pool = {"kernel_shape": list(pool), "strides": list(pool_stride or pool),
                     "pads": pool_pads if pool_pads is not None else [0] * (2 * rank), "ceil_mode": ceil_mode}
        self.w = r(cout, cin // group, *kernel, scale=(cin // group * np.prod(kernel)) ** -0.5)
        self.b = r(cout) if bias else None
        self.act = act
        self.x = r(batch, cin, *size)

    def onnx_pair(self):
        """The ONNX graph the converter would fuse: Conv [+ activation] + MaxPool [+ the conv output]."""
        init = [numpy_helper.from_array(self.w, "w")]
        conv_inputs = ["x", "w"]
        if self.b is not None:
            init.append(numpy_helper.from_array(self.b, "b"))
            conv_inputs.append("b")
        nodes = [helper.make_node("Conv", conv_inputs, ["c0"], **self.conv)]
        if self.act == "clip":
            init += [numpy_helper.from_array(np.float32(0.0), "lo"), numpy_helper.from_array(np.float32(6.0), "hi")]
            nodes.append(helper.make_node("Clip", ["c0", "lo", "hi"], ["c"]))
        else:
            nodes.append(helper.make_node(ONNX_ACTIVATIONS.get(self.act, "Identity"), ["c0"], ["c"]))
        nodes.append(helper.make_node("MaxPool", ["c"], ["y"], **self.pool))
        outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ["y", "c"][:1 + self.keep]]
        graph = helper.make_graph(nodes, "pair", [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.x.shape)],
                                  outputs, init)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model

    def reference(self):
        session = ort.InferenceSession(self.onnx_pair().SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": self.x})

    def attrs(self):
        attrs = dict(self.conv)
        if self.act:
            attrs["activation"] = self.act
            if self.act == "clip":
                attrs.update(activation_alpha=0.0, activation_beta=6.0)
        attrs.update(pool_kernel_shape=self.pool["kernel_shape"], pool_strides=self.pool["strides"],
                     pool_pads=self.pool["pads"], pool_ceil_mode=self.pool["ceil_mode"])
        return attrs

    def ir_model(self, symbolic=False) -> Model:
        init = {"w": self.w}
        if self.b is not None:
            init["b"] = self.b
        shape = ("N", self.cin, *["S"] * len(self.size)) if symbolic else self.x.shape
        outputs = ["y", "c"] if self.keep else ["y"]
        node = Node("ConvMaxPool", ["x", "w", "b" if self.b is not None else ""], outputs, self.attrs(), name="cp")
        graph = Graph([node], [TensorInfo("x", "float32", shape)], [TensorInfo(n, "float32") for n in outputs], init)
        return read_model(model_to_bytes(Model(graph)))  # the attributes go through the file format

    def feeds(self):
        return {"x": self.x}


def run_everywhere(case: Case, backends=None, *, allow_fallback=False):
    want = case.reference()
    model = case.ir_model()
    for backend in backends or backends_under_test():
        session = session_for(model, backend)
        got = session.run(None, case.feeds())
        gpu = backend.startswith("wgpu")
        if gpu and not allow_fallback:
            assert session.report()["fallbacks"] == [], backend
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4 if gpu else 1e-5, atol=1e-4 if gpu else 1e-5, err_msg=backend)


# ---------------------------------------------------------------------------- against onnxruntime
CASES = {
    "cin3-cout8-2x2-keep": {"cin": 3, "cout": 8, "size": (8, 12), "keep": True},  # UNet's first level
    "cin5-cout6-3x3s2p1-no-act-batch2": {"batch": 2, "act": None, "pool": (3, 3), "pool_stride": (2, 2),
                                         "pool_pads": [1, 1, 1, 1]},  # negative maxima, -inf padding
    "cin3-cout16-stem-7x7s2-3x3s2p1": {"cin": 3, "cout": 16, "size": (13, 11), "kernel": (7, 7), "stride": 2,
                                       "pool": (3, 3), "pool_stride": (2, 2), "pool_pads": [1, 1, 1, 1]},
    "cin5-cout1-3x3s1-no-bias": {"cout": 1, "bias": False, "pool": (3, 3), "pool_stride": (1, 1), "act": "sigmoid"},
    "cin16-cout16-2x2-keep-odd": {"cin": 16, "cout": 16, "size": (7, 9), "keep": True},
    "cin6-cout20-2x2-ceil": {"cin": 6, "cout": 20, "size": (7, 9), "ceil_mode": 1, "act": "clip"},
    "cin4-cout6-2x2-pads-keep": {"cin": 4, "size": (6, 7), "pool_pads": [1, 0, 0, 1], "keep": True, "act": None},
    "cin5-cout6-stride2-3x3s1p1": {"stride": 2, "size": (11, 13), "pool": (3, 3), "pool_stride": (1, 1),
                                   "pool_pads": [1, 1, 1, 1], "act": None},
    "cin5-cout6-dilation2-2x3": {"dilations": [2, 2], "pads": [2, 2, 2, 2], "pool": (2, 3), "pool_stride": (2, 3)},
    "cin6-cout3-tiny-ceil": {"cin": 6, "cout": 3, "size": (2, 3), "ceil_mode": 1, "batch": 2},
    "cin5-cout6-same-upper-1x1-pool": {"auto_pad": "SAME_UPPER", "stride": 2, "pool": (1, 1), "size": (9, 10)},
    "cin8-cout12-group2": {"cin": 8, "cout": 12, "group": 2, "act": None, "keep": True},  # slices read apart
    "cin32-cout32-group2-quads": {"cin": 32, "cout": 32, "group": 2, "size": (6, 8)},  # a group is 4 slices
    "cin12-cout12-group6": {"cin": 12, "cout": 12, "group": 6, "size": (6, 8), "act": None},  # 2 channels each
    "depthwise-6": {"cin": 6, "cout": 6, "group": 6, "act": None, "pool": (3, 3), "pool_stride": (2, 2)},
    "depthwise-8-keep": {"cin": 8, "cout": 8, "group": 8, "keep": True},
    "cin3-cout6-1x1-conv": {"cin": 3, "kernel": (1, 1), "act": None, "batch": 2},
}


@pytest.mark.parametrize("options", CASES.values(), ids=CASES.keys())
def test_matches_conv_and_maxpool(options):
    run_everywhere(Case(**options))


def test_general_windows_run_on_numpy():
    """The op is not limited to what the GPU kernel runs: 1-D, overlapping windows with the conv
    output kept."""
    for options in ({"size": (11,), "kernel": (3,), "pool": (3,), "pool_stride": (2,), "pool_pads": [1, 0]},
                    {"pool": (3, 3), "pool_stride": (2, 2), "keep": True, "batch": 2}):
        run_everywhere(Case(**options), ["numpy"])


def test_conv_result_in_shared_scratch(monkeypatch):
    """Big conv results and Conv buffers live in the numpy backend's shared scratch: the conv
    result is placed past the Conv plan's range there (forced with tiny limits)."""
    monkeypatch.setattr(numpy_composite, "RESIDENT_BYTES", 64)
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 64)
    case = Case(cin=6, cout=8, batch=2, act=None)
    run_everywhere(case, ["numpy"])
    session = wgnn.InferenceSession(case.ir_model(), providers=["numpy"])
    want = case.reference()[0]
    for _ in range(2):  # the second run reuses the view into the scratch
        np.testing.assert_allclose(session.run(None, case.feeds())[0], want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- GPU
@pytest.fixture
def kernel_setup(monkeypatch):
    """The FLOAT text and override constants the pipelines were built with, by id(kernel)."""
    pipelines = record_pipelines(monkeypatch)

    class Setups:
        def __getitem__(self, key):
            _, float_type, constants = pipelines[key]
            return float_type, constants

    return Setups()


def fused_dispatches(session):
    return [d for segment in session.session.segments for step, ex in segment.steps
            if step.op.op_type == "ConvMaxPool" for d in getattr(ex, "dispatches", [])]


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
@pytest.mark.parametrize("storage, precision", [("buffer", "fp32"), ("texture", "fp32"), ("buffer", "fp16"),
                                                ("texture", "fp16"), ("buffer", "fp16-arith"),
                                                ("texture", "fp16-arith")])
def test_storages_and_precisions(kernel_setup, adapter, storage, precision):
    info = ADAPTERS[adapter]
    f16 = "shader-f16" in info["features"]
    if precision != "fp32" and storage == "buffer" and not f16:
        pytest.skip("16-bit buffers need shader-f16")
    case = Case(cin=10, cout=12, size=(7, 9), batch=2, keep=True, act=None)
    want = case.reference()
    config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage, precision=precision)
    session = wgnn.InferenceSession(case.ir_model(), config=config)
    got = session.run(None, case.feeds())
    for g, w in zip(got, want, strict=True):
        error = float(np.abs(g - w).max() / np.abs(w).max())
        assert error <= (1e-5 if precision == "fp32" else 4e-3), f"max relative error {error:.3g}"
    placements = session.session.backends[0].placements
    assert {p.storage for p in placements.values()} == {storage}
    (dispatch,) = fused_dispatches(session)
    assert dispatch.kernel.path == KERNEL
    half = precision == "fp16-arith" and f16
    assert kernel_setup[id(dispatch.kernel)] == ("f16" if half else "f32",
                                                 {"WG": 64, "SLICES": 3, "SLIDE": 1, "DEPTHWISE": 0})


@needs_gpu
def test_kernel_variants(kernel_setup):
    """Slices per invocation (balanced, 1 where a group is narrower than 4 slices), sliding loads
    where the W stride equals the W dilation, depthwise weights."""
    variants = [(Case(cin=5, cout=8), {"SLICES": 2, "SLIDE": 1, "DEPTHWISE": 0}),
                (Case(cout=32, stride=2), {"SLICES": 4, "SLIDE": 0, "DEPTHWISE": 0}),
                (Case(cin=8, cout=8, group=2), {"SLICES": 1, "SLIDE": 1, "DEPTHWISE": 0}),
                (Case(cin=8, cout=8, group=8, kernel=(1, 1)), {"SLICES": 1, "SLIDE": 0, "DEPTHWISE": 1})]
    for case, constants in variants:
        session = session_for(case.ir_model(), f"wgpu:{ADAPTERS[0]['index']}")
        np.testing.assert_allclose(session.run(None, case.feeds())[0], case.reference()[0], rtol=1e-4, atol=1e-4)
        (dispatch,) = fused_dispatches(session)
        assert kernel_setup[id(dispatch.kernel)][1] == {"WG": 64, **constants}


@needs_gpu
def test_one_slice_per_invocation_on_real_gpus(kernel_setup, monkeypatch):
    """Real GPUs (their cost weights patched in here) run one output slice per invocation while
    that fits one wave, against onnxruntime, with kept conv outputs and balanced counts that do not
    divide the slices; the balanced pipeline is compiled too (a resize may need it)."""
    from dataclasses import replace

    from wgnn.backends.wgpu import conv_paths, conv_pool

    monkeypatch.setattr(conv_paths, "adapter_weights", lambda context: conv_paths.GPU_WEIGHTS)
    for options in (CASES["cin6-cout20-2x2-ceil"], CASES["cin16-cout16-2x2-keep-odd"], {"cout": 32, "stride": 2}):
        case = Case(**options)
        run_everywhere(case, [f"wgpu:{ADAPTERS[0]['index']}"])
        session = session_for(case.ir_model(), f"wgpu:{ADAPTERS[0]['index']}")
        session.run(None, case.feeds())
        (dispatch,) = fused_dispatches(session)
        assert kernel_setup[id(dispatch.kernel)][1]["SLICES"] == 1
    monkeypatch.setenv("WGNN_CONVPOOL_SLICES", "balanced")
    assert conv_pool.gpu_slices(None, 3, 1) == 3
    monkeypatch.setenv("WGNN_CONVPOOL_SLICES", "2")
    with pytest.raises(wgnn.WgnnError, match="WGNN_CONVPOOL_SLICES=2"):
        conv_pool.gpu_slices(None, 3, 1)
    monkeypatch.delenv("WGNN_CONVPOOL_SLICES")
    few = replace(conv_paths.GPU_WEIGHTS, concurrency=1)
    monkeypatch.setattr(conv_paths, "adapter_weights", lambda context: few)
    from types import SimpleNamespace

    ex = SimpleNamespace(backend=SimpleNamespace(context=None))
    assert conv_pool.gpu_slices(ex, 3, 2) == 3 and conv_pool.gpu_slices(ex, 3, 1) == 1


@needs_gpu
def test_weights_in_storage_buffers(monkeypatch):
    """WGNN_CONV_WEIGHTS=storage keeps the weights in storage buffers (the A/B switch of the convs)."""
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "storage")
    run_everywhere(Case(cin=6, cout=8, keep=True), [f"wgpu:{a['index']}" for a in ADAPTERS])


@needs_gpu
def test_weights_past_a_uniform_buffer():
    """Weights over 64 KiB (C = 520: 130 slices x 9 taps x 4 vec4s per output slice) go to a
    storage buffer."""
    run_everywhere(Case(cin=520, cout=4, size=(3, 4)), [f"wgpu:{a['index']}" for a in ADAPTERS])


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_compiles_nothing(adapter):
    case = Case(cin=6, cout=8, keep=True)
    model = case.ir_model(symbolic=True)
    numpy_session = wgnn.InferenceSession(model, providers=["numpy"])
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    cache = pipeline_cache(session.session.backends[0].context)
    compiled = None
    for batch, size in ((1, 7), (2, 5), (1, 12)):
        feeds = {"x": r(batch, 6, size, size)}
        for got, want in zip(session.run(None, feeds), numpy_session.run(None, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled, "a resize compiled pipelines"


def test_empty_batch():
    case = Case(cin=6, cout=3, keep=True)
    model = case.ir_model(symbolic=True)
    feeds = {"x": np.zeros((0, 6, 7, 7), np.float32)}
    for backend in backends_under_test():
        session = session_for(model, backend)
        y, c = session.run(None, feeds)
        assert y.shape == (0, 3, 3, 3) and c.shape == (0, 3, 7, 7)
        assert session.report()["fallbacks"] == [], backend


REFUSED = {
    "window 9 wide": ({"size": (5, 11), "pool": (1, 9)}, "at most 8 wide"),
    "kept conv output of overlapping windows": ({"pool": (3, 3), "pool_stride": (2, 2), "keep": True},
                                                "only for windows as large as their strides"),
    "1-D": ({"size": (9,), "kernel": (3,), "pool": (2,)}, "2-D"),
}


@needs_gpu
@pytest.mark.parametrize("options, reason", REFUSED.values(), ids=REFUSED.keys())
def test_what_the_gpu_kernel_refuses_runs_on_numpy(options, reason):
    case = Case(**options)
    want = case.reference()
    for adapter in ADAPTERS:
        session = session_for(case.ir_model(), f"wgpu:{adapter['index']}")
        for got, w in zip(session.run(None, case.feeds()), want, strict=True):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
        (fallback,) = session.report()["fallbacks"]
        assert fallback["op"].startswith("ConvMaxPool") and any(reason in why for why in fallback["reasons"])


@needs_gpu
def test_runtime_weights_run_on_numpy():
    case = Case(cin=6, cout=3)
    model = case.ir_model()
    model.graph.inputs.append(TensorInfo("w", "float32", case.w.shape))
    del model.graph.initializers["w"]
    session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
    got = session.run(None, {**case.feeds(), "w": case.w})[0]
    np.testing.assert_allclose(got, case.reference()[0], rtol=1e-5, atol=1e-5)
    (fallback,) = session.report()["fallbacks"]
    assert any("known at resize" in why for why in fallback["reasons"])


# ---------------------------------------------------------------------------- shape function
def test_flops():
    case = Case(cin=6, cout=3, size=(7, 9), batch=2, pool=(3, 3), pool_stride=(2, 2))
    session = wgnn.InferenceSession(case.ir_model(), providers=["numpy"])
    session.run(None, case.feeds())
    conv = 2 * 3 * 7 * 9
    assert session.report()["flops"] == 2 * conv * 6 * 9 + 2 * 3 * 3 * 4 * 9


def failing(case: Case, **changes):
    model = case.ir_model()
    node = model.graph.nodes[0]
    for key, value in changes.items():
        if key in ("w", "b"):
            model.graph.initializers[key] = value
        elif key == "inputs":
            node.inputs = value
        else:
            node.attrs[key] = value
    with pytest.raises(ShapeError) as info:
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, case.feeds())
    return str(info.value)


def test_shape_errors():
    case = Case(cin=6, cout=3)
    assert "input has 6 channels, weight expects 5 x group 1" in failing(case, w=r(3, 5, 3, 3))
    assert "bias must have shape (3,)" in failing(case, b=r(4))
    assert "a residual is not part of the fused op" in failing(case, inputs=["x", "w", "b", "x"])
    assert "pool_kernel_shape [2] should have 2 positive entries" in failing(case, pool_kernel_shape=[2])
    assert "pool_strides [0, 2] should have 2 positive entries" in failing(case, pool_strides=[0, 2])
    assert "pool_pads [1, 1] should have 4 non-negative entries" in failing(case, pool_pads=[1, 1])
    assert "pool_pads [2, 0, 0, 0] must be smaller than the pool kernel [2, 2]" in failing(case, pool_pads=[2, 0, 0, 0])
    too_big = failing(case, pool_kernel_shape=[8, 2])
    assert "the pool window [8, 2] does not fit the padded conv output [7, 9]" in too_big
    assert "unknown fused activation 'nope'" in failing(case, activation="nope")
