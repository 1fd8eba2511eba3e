"""ConvDwPw (engine/ops/conv_dwpw.py): a depthwise conv and the 1x1 conv reading it as one op.

The IR op runs on numpy and on every GPU adapter against onnxruntime running the two Convs it
stands for (with the Clip, Add and activation nodes the converter folds into them): channels not
a multiple of 4, 1 to 32 output channels, stride 1 and 2, odd and tiny images, batch 2, each bias
absent, residual, fused activations; the GPU kernel on buffer and texture storage in fp32, fp16
and fp16-arith; every pixel block the kernel is compiled for (backends/wgpu/conv_dwpw.py) on odd
sizes, and the rule that picks the block from the output's size; resizes that compile nothing
while the block changes; what the GPU kernel refuses; shape errors."""
from dataclasses import replace

import numpy as np
import onnxruntime as ort
import pytest
from dwpw_block_cases import STORAGE_PRECISIONS, block_name, blocks_for
from helpers import gpu_adapters, record_pipelines, session_for
from helpers import test_backends as backends_under_test
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.numpy import composite as numpy_composite
from wgnn.backends.numpy import conv as numpy_conv
from wgnn.backends.wgpu.conv_dwpw import BLOCK_ENV, BLOCKS, BlockShape, choose_block
from wgnn.backends.wgpu.conv_paths import CPU_WEIGHTS, GPU_WEIGHTS
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.engine.errors import ShapeError, WgnnError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models.format import model_to_bytes, read_model

import wgnn

ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(5)
KERNEL = "conv/dwpw_nc4hw4.wgsl"
RELU6 = {"kind": "clip", "alpha": 0.0, "beta": 6.0}


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class Case:
    """Weights, attributes and feeds of one depthwise + pointwise pair (2-D unless `spatial`)."""

    def __init__(self, c=6, cout=3, stride=1, size=(7, 9), batch=1, *, kernel=(3, 3), pads=None, dilations=None,
                 auto_pad=None, dw_bias=True, pw_bias=True, residual=False, dw_act=RELU6, act=None):
        self.c, self.cout, self.batch, self.size = c, cout, batch, tuple(size)
        rank = len(size)
        self.window = {"strides": [stride] * rank}
        if auto_pad:
            self.window["auto_pad"] = auto_pad
        else:
            self.window["pads"] = pads if pads is not None else [k // 2 for k in kernel] * 2
        if dilations:
            self.window["dilations"] = dilations
        self.wd, self.wp = r(c, 1, *kernel), r(cout, c, *[1] * rank, scale=c ** -0.5)
        self.bd = r(c) if dw_bias else None
        self.bp = r(cout) if pw_bias else None
        self.dw_act, self.act = dw_act, act
        self.x = r(batch, c, *size, scale=2.0)  # spreads the depthwise sums past ReLU6's bounds
        self.residual, self.r = False, None
        out_shape = self.reference()[0].shape[2:]  # without the residual, to learn its shape
        self.residual, self.r = residual, (r(batch, cout, *out_shape) if residual else None)

    def onnx_pair(self):
        """The ONNX graph the converter would fuse: Conv (group C) [+ act], 1x1 Conv [+ Add] [+ act]."""
        nodes, init = [], [numpy_helper.from_array(self.wd, "wd"), numpy_helper.from_array(self.wp, "wp")]
        dw_inputs, pw_inputs = ["x", "wd"], ["d", "wp"]
        if self.bd is not None:
            init.append(numpy_helper.from_array(self.bd, "bd"))
            dw_inputs.append("bd")
        if self.bp is not None:
            init.append(numpy_helper.from_array(self.bp, "bp"))
            pw_inputs.append("bp")
        nodes.append(helper.make_node("Conv", dw_inputs, ["d0"], group=self.c, **self.window))
        nodes += self._activation("d0", "d", self.dw_act, init)
        nodes.append(helper.make_node("Conv", pw_inputs, ["p"]))
        last = "p"
        if self.residual:
            nodes.append(helper.make_node("Add", ["p", "r"], ["pr"]))
            last = "pr"
        nodes += self._activation(last, "y", self.act, init)
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.x.shape)]
        if self.residual:
            inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
        graph = helper.make_graph(nodes, "pair", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  init)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model

    @staticmethod
    def _activation(src, dst, act, init):
        if act is None:
            return [helper.make_node("Identity", [src], [dst])]
        if act["kind"] == "clip":
            init += [numpy_helper.from_array(np.float32(act["alpha"]), f"{dst}_lo"),
                     numpy_helper.from_array(np.float32(act["beta"]), f"{dst}_hi")]
            return [helper.make_node("Clip", [src, f"{dst}_lo", f"{dst}_hi"], [dst])]
        return [helper.make_node({"relu": "Relu", "sigmoid": "Sigmoid"}[act["kind"]], [src], [dst])]

    def reference(self):
        feeds = {"x": self.x} if not self.residual else {"x": self.x, "r": self.r}
        session = ort.InferenceSession(self.onnx_pair().SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)

    def attrs(self):
        attrs = dict(self.window)
        for prefix, act in (("dw_activation", self.dw_act), ("activation", self.act)):
            if act is not None:
                attrs.update({prefix: act["kind"], f"{prefix}_alpha": float(act.get("alpha", 0.0)),
                              f"{prefix}_beta": float(act.get("beta", 0.0))})
        return attrs

    def ir_model(self, symbolic=False) -> Model:
        init = {"wd": self.wd, "wp": self.wp}
        if self.bd is not None:
            init["bd"] = self.bd
        if self.bp is not None:
            init["bp"] = self.bp
        x_shape = ("N", self.c, *["S"] * len(self.size)) if symbolic else self.x.shape
        inputs = [TensorInfo("x", "float32", x_shape)]
        if self.residual:
            inputs.append(TensorInfo("r", "float32", ("N", self.cout, *["T"] * len(self.size)) if symbolic
                                     else self.r.shape))
        node = Node("ConvDwPw", ["x", "wd", "bd" if self.bd is not None else "", "wp",
                                 "bp" if self.bp is not None else "", "r" if self.residual else ""], ["y"],
                    self.attrs(), name="dwpw")
        graph = Graph([node], inputs, [TensorInfo("y", "float32")], init)
        return read_model(model_to_bytes(Model(graph)))  # the attributes go through the file format

    def feeds(self):
        return {"x": self.x, "r": self.r} if self.residual else {"x": self.x}


def run_everywhere(case: Case, backends=None, *, allow_fallback=False):
    want = case.reference()[0]
    model = case.ir_model()
    for backend in backends or backends_under_test():
        session = session_for(model, backend)
        (got,) = session.run(None, case.feeds())
        gpu = backend.startswith("wgpu")
        if gpu and not allow_fallback:
            assert session.report()["fallbacks"] == [], backend
        np.testing.assert_allclose(got, want, rtol=1e-4 if gpu else 1e-5, atol=1e-4 if gpu else 1e-5, err_msg=backend)


# ---------------------------------------------------------------------------- against onnxruntime
CASES = {
    "c6-cout3": {"c": 6, "cout": 3},
    "c10-cout24-stride2-batch2-residual": {"c": 10, "cout": 24, "stride": 2, "batch": 2, "residual": True},
    "c10-cout1-stride2": {"c": 10, "cout": 1, "stride": 2, "size": (9, 7)},
    "c8-cout32-no-biases": {"c": 8, "cout": 32, "dw_bias": False, "pw_bias": False},
    "c5-cout4-1x1-image": {"c": 5, "cout": 4, "size": (1, 1), "residual": True},
    "c6-cout24-2x3-stride2": {"c": 6, "cout": 24, "stride": 2, "size": (2, 3), "pw_bias": False},
    "c12-cout3-2x3-no-dw-bias-relu": {"c": 12, "cout": 3, "size": (2, 3), "dw_bias": False, "act": {"kind": "relu"}},
    "c6-cout5-no-dw-act-sigmoid": {"c": 6, "cout": 5, "dw_act": None, "act": {"kind": "sigmoid"}, "residual": True},
    "c4-cout8-asymmetric-pads": {"c": 4, "cout": 8, "size": (6, 5), "pads": [0, 1, 1, 0]},
}


@pytest.mark.parametrize("options", CASES.values(), ids=CASES.keys())
def test_matches_the_conv_pair(options):
    run_everywhere(Case(**options))


def test_general_windows_run_on_numpy():
    """The op is not limited to what the GPU kernel runs: 1-D, 5x5 with dilation, SAME padding."""
    for options in ({"c": 6, "cout": 3, "size": (11,), "kernel": (3,), "stride": 2},
                    {"c": 5, "cout": 7, "size": (9, 8), "kernel": (5, 5), "dilations": [2, 1], "pads": [4, 2, 4, 2]},
                    {"c": 6, "cout": 2, "size": (7, 6), "stride": 2, "auto_pad": "SAME_UPPER", "residual": True}):
        run_everywhere(Case(**options), ["numpy"])


def test_depthwise_result_in_shared_scratch(monkeypatch):
    """Big depthwise results and Conv buffers live in the numpy backend's shared scratch: the
    intermediate is placed past the Conv plans' range there (forced with tiny limits)."""
    monkeypatch.setattr(numpy_composite, "RESIDENT_BYTES", 64)
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 64)
    run_everywhere(Case(c=10, cout=12, stride=1, batch=2, residual=True, pw_bias=True), ["numpy"])
    run_everywhere(Case(c=3, cout=6, stride=2, size=(9, 9)), ["numpy"])  # C_out > C: the bias rides in im2col


# ---------------------------------------------------------------------------- GPU
@pytest.fixture
def kernel_types(monkeypatch):
    """What the pipelines were built with (helpers.record_pipelines)."""
    return record_pipelines(monkeypatch)


def dwpw_dispatches(session):
    return [d for segment in session.session.segments for step, ex in segment.steps if step.op.op_type == "ConvDwPw"
            for d in getattr(ex, "dispatches", [])]


def dwpw_blocks(session) -> list[tuple[int, int]]:
    """The pixel block each GPU ConvDwPw step runs."""
    return [ex.block for segment in session.session.segments for step, ex in segment.steps
            if step.op.op_type == "ConvDwPw" and hasattr(ex, "block")]





# Odd sizes for every block: 1x1 and 3x5 images, widths and heights no multiple of the block (5x7 at
# stride 1, 9x11 -> 5x6 at stride 2), batch 2, channels no multiple of 4, residual.
BLOCK_CASES = {
    "c5-cout4-1x1-image-residual": {"c": 5, "cout": 4, "size": (1, 1), "residual": True},
    "c6-cout9-3x5-batch2-residual": {"c": 6, "cout": 9, "size": (3, 5), "batch": 2, "residual": True},
    "c7-cout13-5x7-relu": {"c": 7, "cout": 13, "size": (5, 7), "act": {"kind": "relu"}},
    "c10-cout24-9x11-stride2-batch2-residual": {"c": 10, "cout": 24, "stride": 2, "size": (9, 11), "batch": 2,
                                               "residual": True},
    "c3-cout2-2x3-stride2": {"c": 3, "cout": 2, "stride": 2, "size": (2, 3)},
    # 8 output slices, the most a kernel holds (blocks past the quick one specialise on the count)
    "c4-cout31-6x6": {"c": 4, "cout": 31, "size": (6, 6)},
}


@needs_gpu
@pytest.mark.parametrize("block", BLOCKS, ids=block_name)
@pytest.mark.parametrize("options", BLOCK_CASES.values(), ids=BLOCK_CASES.keys())
def test_every_block_matches_the_conv_pair(monkeypatch, block, options):
    monkeypatch.setenv(BLOCK_ENV, block_name(block))
    case = Case(**options)
    want = case.reference()[0]
    model = case.ir_model()
    numpy_got = session_for(model, "numpy").run(None, case.feeds())[0]
    np.testing.assert_allclose(numpy_got, want, rtol=1e-5, atol=1e-5)
    for adapter in ADAPTERS:
        session = session_for(model, f"wgpu:{adapter['index']}")
        got = session.run(None, case.feeds())[0]
        assert session.report()["fallbacks"] == [] and dwpw_blocks(session) == [block], adapter["index"]
        np.testing.assert_allclose(got, numpy_got, rtol=1e-4, atol=1e-4, err_msg=f"wgpu:{adapter['index']}")


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
@pytest.mark.parametrize("storage, precision", STORAGE_PRECISIONS)
@pytest.mark.parametrize("stride", [1, 2])
def test_storages_and_precisions(kernel_types, monkeypatch, adapter, storage, precision, stride):
    info = ADAPTERS[adapter]
    f16 = "shader-f16" in info["features"]
    if precision != "fp32" and storage == "buffer" and not f16:
        pytest.skip("16-bit buffers need shader-f16")
    # Without a residual the kernel binds x in its place (a texture too, on texture storage).
    case = Case(c=10, cout=24, stride=stride, size=(7, 9), batch=2, residual=stride == 1)
    want = case.reference()[0]
    config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage, precision=precision)
    for block in blocks_for(storage, precision):
        monkeypatch.setenv(BLOCK_ENV, block_name(block))
        session = wgnn.InferenceSession(case.ir_model(), config=config)
        got = session.run(None, case.feeds())[0]
        error = float(np.abs(got - want).max() / np.abs(want).max())
        assert error <= (1e-5 if precision == "fp32" else 4e-3), f"{block}: max relative error {error:.3g}"
        placements = session.session.backends[0].placements
        assert {p.storage for p in placements.values()} == {storage}
        dispatches = dwpw_dispatches(session)
        assert len(dispatches) == 1 and dispatches[0].kernel.path == KERNEL
        assert dwpw_blocks(session) == [block]
        half = precision == "fp16-arith" and f16
        assert kernel_types.float_of(dispatches[0].kernel) == ("f16" if half else "f32")


@needs_gpu
def test_weights_in_storage_buffers(monkeypatch):
    """WGNN_CONV_WEIGHTS=storage keeps the weights in storage buffers (the A/B switch of the convs)."""
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "storage")
    run_everywhere(Case(c=6, cout=24, stride=2, residual=True), [f"wgpu:{a['index']}" for a in ADAPTERS])


@needs_gpu
def test_weights_past_a_uniform_buffer():
    """Pointwise weights over 64 KiB (C = 520: 130 slices x 8 x 4 vec4s) go to a storage buffer."""
    run_everywhere(Case(c=520, cout=32, size=(3, 2)), [f"wgpu:{a['index']}" for a in ADAPTERS])


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_compiles_nothing(adapter):
    """The first prepare compiles every block's pipeline: resizes that change the block (on
    lavapipe 1x1 at a 1x1 output, 1x2 at 4x4, 2x2 at 3x3 in a batch of 2, 2x4 at 6x6) compile nothing."""
    case = Case(c=10, cout=24, stride=2, residual=True)
    model = case.ir_model(symbolic=True)
    numpy_session = wgnn.InferenceSession(model, providers=["numpy"])
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    cache = pipeline_cache(session.session.backends[0].context)
    compiled, blocks = None, set()
    for batch, size in ((1, 1), (1, 7), (2, 5), (1, 12), (1, 7)):
        out = (size - 1) // 2 + 1
        feeds = {"x": r(batch, 10, size, size), "r": r(batch, 24, out, out)}
        np.testing.assert_allclose(session.run(None, feeds)[0], numpy_session.run(None, feeds)[0], rtol=1e-4,
                                   atol=1e-4)
        compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled, "a resize compiled pipelines"
        blocks.update(dwpw_blocks(session))
    if dwpw_dispatches(session)[0].kernel.workgroup == 8:  # the sizes above are picked for 8-lane workgroups
        assert blocks == set(BLOCKS)


# ---------------------------------------------------------------------------- the block rule
LAVAPIPE = replace(CPU_WEIGHTS, workers=2, workgroup=8)  # this project's 2-core machines, 8-lane SIMD groups


def expand_shape(size: int, stride: int, c: int, project: int, expand: int, *, n: int = 1,
                 residual: bool = False) -> BlockShape:
    """A ConvDwPwExpand's (expand 0: a ConvDwPw's) cost inputs at a square output of `size`."""
    c4s, o4s, e4s = -(-c // 4), -(-project // 4), -(-expand // 4)
    return BlockShape(n, size, size, stride, c4s, o4s, e4s, stores=e4s or o4s, residual=residual)


def test_the_block_follows_the_output_size():
    """MobileNetV2 (width 16) on lavapipe, measured: 2x4 is fastest on 16x16 and 8x8 outputs (one
    full SIMD group or more), 1x2 on 4x4 ones (2x4 leaves 6 of 8 lanes idle: 1.3-1.5x faster), 1x1 on
    2x2 ones (1.4-1.9x); at 224 every map keeps 2x4."""
    blocks = [choose_block(shape, LAVAPIPE) for shape in (
        expand_shape(16, 1, 16, 16, 96, residual=True), expand_shape(8, 2, 96, 24, 144),
        expand_shape(8, 1, 144, 24, 144, residual=True), expand_shape(4, 2, 144, 32, 192),
        expand_shape(4, 1, 192, 32, 64, residual=True))]
    assert blocks == [(2, 4), (2, 4), (2, 4), (1, 2), (1, 2)]
    assert choose_block(expand_shape(2, 2, 144, 32, 192), LAVAPIPE) == (1, 1)
    assert choose_block(expand_shape(1, 1, 192, 32, 64), LAVAPIPE) == (1, 1)
    assert choose_block(expand_shape(4, 2, 144, 32, 0), LAVAPIPE) == (1, 2)  # ConvDwPw alone
    assert choose_block(expand_shape(8, 1, 144, 24, 0, residual=True), LAVAPIPE) == (2, 4)
    for size in (112, 56, 28, 14):
        assert choose_block(expand_shape(size, 1, 144, 32, 192), LAVAPIPE) == (2, 4), size


def test_the_block_counts_invocations_not_pixels():
    """Images of a batch fill lanes as pixels do; a wider workgroup wants more invocations; a
    second worker thread pays for its start; ties go to the larger block."""
    assert [choose_block(expand_shape(4, 2, 144, 32, 192, n=n), LAVAPIPE) for n in (1, 2, 8)] == [
        (1, 2), (2, 2), (2, 4)]
    assert choose_block(expand_shape(8, 2, 144, 32, 192), replace(LAVAPIPE, workgroup=32)) == (1, 1)
    assert choose_block(expand_shape(8, 2, 144, 32, 192), LAVAPIPE) == (2, 2)  # two workgroups, two workers
    assert choose_block(expand_shape(8, 2, 144, 32, 192), replace(LAVAPIPE, workers=1)) == (2, 4)
    assert choose_block(expand_shape(0, 1, 16, 16, 0), LAVAPIPE) == (2, 4)  # nothing to do
    # Real GPUs (weights fitted on an H200): one wave of short chains, so the smallest block on
    # MobileNetV2's maps (measured there: 1x1 fastest on all five ops at 224, 2x4 1.5-2.8x slower);
    # once the invocations fill several waves, blocks that need fewer of them.
    # With expand groups (choose_layout) the 112x112 map takes 1x2 blocks of 4 groups.
    assert [choose_block(expand_shape(size, 1, 144, 32, 192), GPU_WEIGHTS) for size in (56, 14, 7)] == [
        (1, 1)] * 3
    assert choose_block(expand_shape(448, 1, 144, 32, 192, n=8), GPU_WEIGHTS) == (2, 4)


def test_a_forced_block(monkeypatch):
    monkeypatch.setenv(BLOCK_ENV, "1x2")
    assert choose_block(expand_shape(112, 1, 16, 16, 96), LAVAPIPE) == (1, 2)
    monkeypatch.setenv(BLOCK_ENV, "3x3")
    with pytest.raises(WgnnError, match="WGNN_DWPW_BLOCK=3x3: the dwpw kernels run blocks 2x4, 2x2, 1x2, 1x1"):
        choose_block(expand_shape(8, 1, 16, 16, 0), LAVAPIPE)


def test_empty_batch():
    case = Case(c=6, cout=3, residual=True)
    model = case.ir_model(symbolic=True)
    feeds = {"x": np.zeros((0, 6, 7, 7), np.float32), "r": np.zeros((0, 3, 7, 7), np.float32)}
    for backend in backends_under_test():
        session = session_for(model, backend)
        assert session.run(None, feeds)[0].shape == (0, 3, 7, 7)
        assert session.report()["fallbacks"] == [], backend


REFUSED = {
    "5x5": ({"c": 6, "cout": 3, "kernel": (5, 5)}, "3x3"),
    "dilation 2": ({"c": 6, "cout": 3, "dilations": [2, 2], "pads": [2, 2, 2, 2]}, "dilation"),
    "stride 3": ({"c": 6, "cout": 3, "stride": 3}, "stride"),
    "40 outputs": ({"c": 6, "cout": 40}, "at most 32"),
    "1-D": ({"c": 6, "cout": 3, "size": (9,), "kernel": (3,)}, "2-D"),
}


@needs_gpu
@pytest.mark.parametrize("options, reason", REFUSED.values(), ids=REFUSED.keys())
def test_what_the_gpu_kernel_refuses_runs_on_numpy(options, reason):
    case = Case(**options)
    want = case.reference()[0]
    for adapter in ADAPTERS:
        session = session_for(case.ir_model(), f"wgpu:{adapter['index']}")
        np.testing.assert_allclose(session.run(None, case.feeds())[0], want, rtol=1e-5, atol=1e-5)
        (fallback,) = session.report()["fallbacks"]
        assert fallback["op"].startswith("ConvDwPw") and any(reason in why for why in fallback["reasons"])


@needs_gpu
def test_runtime_weights_run_on_numpy():
    case = Case(c=6, cout=3)
    model = case.ir_model()
    model.graph.inputs.append(TensorInfo("wp", "float32", case.wp.shape))
    del model.graph.initializers["wp"]
    feeds = {**case.feeds(), "wp": case.wp}
    session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
    np.testing.assert_allclose(session.run(None, feeds)[0], case.reference()[0], rtol=1e-5, atol=1e-5)
    (fallback,) = session.report()["fallbacks"]
    assert any("known at resize" in why for why in fallback["reasons"])


# ---------------------------------------------------------------------------- shape function
def test_flops():
    case = Case(c=6, cout=3, stride=2, size=(7, 9), batch=2, residual=True)
    session = wgnn.InferenceSession(case.ir_model(), providers=["numpy"])
    session.run(None, case.feeds())
    pixels = 2 * 4 * 5
    assert session.report()["flops"] == 2 * pixels * 6 * 9 + 2 * pixels * 3 * 6 + pixels * 3


def failing(case: Case, **changes):
    model = case.ir_model()
    node = model.graph.nodes[0]
    for key, value in changes.items():
        if key in ("wd", "wp", "bd", "bp"):
            model.graph.initializers[key] = value
        else:
            node.attrs[key] = value
    with pytest.raises(ShapeError) as info:
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, case.feeds())
    return str(info.value)


def test_shape_errors():
    case = Case(c=6, cout=3, residual=True)
    assert "depthwise weight must be (6, 1, kernel...)" in failing(case, wd=r(6, 2, 3, 3))
    assert "pointwise weight must be (C_out, 6, 1, 1)" in failing(case, wp=r(3, 6, 3, 3))
    assert "pointwise weight must be (C_out, 6, 1, 1)" in failing(case, wp=r(3, 5, 1, 1))
    assert "depthwise bias must be float32 of shape (6,)" in failing(case, bd=r(5))
    assert "pointwise bias must be float32 of shape (3,)" in failing(case, bp=r(6))
    assert "unknown depthwise activation 'nope'" in failing(case, dw_activation="nope")
    assert "unknown fused activation 'nope'" in failing(case, activation="nope")
    assert "does not fit the padded input" in failing(case, pads=[0, 0, 0, 0], strides=[1, 1], dilations=[4, 4])
    assert "strides [1] has 1 entries" in failing(case, strides=[1])
    assert "residual must be float32 of the output's shape [1, 3, 5, 7]" in failing(case, pads=[0, 0, 0, 0])
    assert "input must be (N, C, spatial...)" in str(_rank2_error())


def _rank2_error():
    node = Node("ConvDwPw", ["x", "wd", "", "wp"], ["y"], {}, name="flat")
    graph = Graph([node], [TensorInfo("x", "float32", (2, 3))], [TensorInfo("y", "float32")],
                  {"wd": r(3, 1), "wp": r(2, 3)})
    with pytest.raises(ShapeError) as info:
        wgnn.InferenceSession(Model(graph), providers=["numpy"]).run(None, {"x": r(2, 3)})
    return info.value


def test_blocks_past_the_quick_one_specialise_on_the_project_slices():
    """PROJECT_SLICES: the op's count in kernels of blocks bigger than QUICK_BLOCK (their code has
    no sums past it), 0 (read from the params: one kernel for every op) in the quick and smaller."""
    from wgnn.backends.wgpu.conv_dwpw import QUICK_BLOCK, BlockShape, block_constants

    shape = BlockShape(n=1, oh=8, ow=8, stride=1, c4s=4, o4s=6, residual=True)
    for block in BLOCKS:
        expected = 6 if block[0] * block[1] > QUICK_BLOCK[0] * QUICK_BLOCK[1] else 0
        assert block_constants(block, shape) == {"RESIDUAL": 1, "PROJECT_SLICES": expected}
