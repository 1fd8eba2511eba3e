"""precision="fp16-arith": 16-bit storage and, where the adapter has shader-f16, 16-bit arithmetic in
the NC4HW4 conv kernels (direct, conv4, 1x1 GEMM, Winograd F(2,3) GEMM, 3x3 depthwise) and the
NC4HW4 Unary / Binary kernels; on adapters without shader-f16 it runs as "fp16".

Accuracy: the zoo models against onnxruntime, and each 16-bit kernel on odd shapes against
onnxruntime, with the pipeline that ran checked to be the 16-bit one. Measured on lavapipe (max
error over 6 input seeds, relative to the output's largest magnitude; f16 buffers / rgba16float
textures): mobilenetv2 1.0e-3 / 1.7e-3, resnet 1.2e-3 / 1.2e-3, unet 1.5e-3 / 2.7e-3, bert 4e-7
(no NC4HW4 feature maps: all f32). (Precision fp16 on textures is worse, up to 5e-3: lavapipe's
rgba16float stores round f32 values less well than the shader's own f32 -> f16 conversion, which
fp16-arith kernels do before storing.) The tolerances leave about 3x margin."""
import logging
import math

import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters, record_pipelines
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu import conv_paths, elementwise, loader
from wgnn.backends.wgpu.layout import nc4hw4_dims
from wgnn.models.zoo import build, example_inputs

import wgnn

ADAPTERS = gpu_adapters()
pytestmark = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
F16 = [a["index"] for a in ADAPTERS if "shader-f16" in a["features"]]
NO_F16 = [a["index"] for a in ADAPTERS if "shader-f16" not in a["features"]]
STORAGES = ("buffer", "texture")
# Zoo models against onnxruntime: max |error| / max |expected| (measures in the docstring); fp16
# (the fallback without shader-f16) as in test_wgpu_fp16.py.
ZOO_TOLERANCE = {"buffer": 5e-3, "texture": 8e-3}
FP16_TOLERANCE = 1e-2
rng = np.random.default_rng(11)


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class Kernels:
    """The pipelines asked for while the test runs (helpers.record_pipelines) and, per session, the
    arithmetic types (FLOAT) of the dispatches it runs."""

    def __init__(self, pipelines):
        self.pipelines = pipelines

    def ran(self, session, path: str) -> set:
        """The arithmetic types of the dispatches of `path` the session runs (not only compiled:
        the conv paths also compile their alternatives' pipelines)."""
        return {self.pipelines.float_of(d.kernel) for segment in session.session.segments for _, ex in segment.steps
                for d in getattr(ex, "dispatches", []) if d.kernel.path == path}

    def asked(self) -> set:
        """The arithmetic types of every pipeline asked for since the last clear()."""
        return {float_type for _, float_type, _ in self.pipelines.values()}

    def clear(self) -> None:
        self.pipelines.clear()


@pytest.fixture
def kernels(monkeypatch):
    return Kernels(record_pipelines(monkeypatch))


def gpu_session(model, adapter, storage, precision="fp16-arith"):
    config = wgnn.Config(providers=("wgpu",), adapter=adapter, precision=precision, storage=storage)
    return wgnn.InferenceSession(model, config=config)


def relative_error(got, want) -> float:
    want = np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


# ------------------------------------------------------------------------------- configuration
def test_config_validates_precision():
    assert wgnn.Config(precision="fp16-arith").precision == "fp16-arith"
    with pytest.raises(wgnn.WgnnError, match="fp16-arith"):
        wgnn.Config(precision="fp16-math")


# ------------------------------------------------------------------------------- zoo models
ZOO_TARGETS = [(a, s) for a in F16 for s in STORAGES]


@pytest.mark.parametrize("name", ["mobilenetv2", "resnet", "bert", "unet"])
@pytest.mark.parametrize(("adapter", "storage"), ZOO_TARGETS, ids=[f"wgpu{a}-{s}" for a, s in ZOO_TARGETS])
def test_zoo_models_in_fp16_arith(kernels, name, adapter, storage):
    model = build(name)
    feeds = example_inputs(model, 2, seed=3)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    session = gpu_session(model, adapter, storage)
    got = session.run(None, feeds)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == np.float32 and have.shape == want.shape
        error = relative_error(have, want)
        assert error <= ZOO_TOLERANCE[storage], f"{name} fp16-arith on adapter {adapter} ({storage}): {error:.3g}"
    backend = session.session.backends[0]
    assert backend.half, "precision fp16-arith must store feature maps in 16 bits (backend.half)"
    assert all(p.half and p.storage == storage for p in backend.placements.values())
    assert session.report()["fallbacks"] == []
    if name != "bert":  # bert has no 4-D feature maps: nothing runs NC4HW4
        assert any("f16" in kernels.ran(session, k) for k in conv_paths.HALF_SUMS), "no conv kernel ran in f16"


def test_fp16_arith_resize_compiles_nothing():
    if not F16:
        pytest.skip("no adapter with shader-f16")
    model = build("mobilenetv2")
    session = gpu_session(model, F16[0], "buffer")
    cache = loader.pipeline_cache(session.session.backends[0].context)
    session.run(None, example_inputs(model, 1, seed=1))
    compiled = cache.compiled
    got = session.run(None, example_inputs(model, 3, seed=2))[0]
    assert got.shape[0] == 3
    assert cache.compiled == compiled, "a resize compiled pipelines"


def test_fp16_arith_packs_weights_in_16_bits(monkeypatch):
    if not F16:
        pytest.skip("no adapter with shader-f16")
    # 32-bit weights may go to uniform buffers padded to 64 KiB on CPU adapters: compare storage.
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "storage")
    model = build("resnet")
    feeds = example_inputs(model, 1)
    sizes = {}
    for precision in ("fp16", "fp16-arith"):
        session = gpu_session(model, F16[0], "buffer", precision)
        session.run(None, feeds)
        packed = session.session.backends[0].packed
        sizes[precision] = {name: nbytes for name, (_, _, nbytes) in packed.items() if "weights" in name}
    assert sizes["fp16"].keys() == sizes["fp16-arith"].keys() and sizes["fp16"]
    halved = [n for n, b in sizes["fp16-arith"].items() if 2 * b == sizes["fp16"][n]]
    assert halved, "no conv weights were packed as f16"
    assert all(b in (sizes["fp16"][n], sizes["fp16"][n] // 2) for n, b in sizes["fp16-arith"].items())


# ------------------------------------------------------------------------------- without shader-f16
@pytest.mark.parametrize("name", ["mobilenetv2", "resnet", "bert", "unet"])
def test_without_shader_f16_fp16_arith_runs_as_fp16(kernels, caplog, name):
    if not NO_F16:
        pytest.skip("every adapter here has shader-f16")
    adapter = NO_F16[0]
    model = build(name)
    feeds = example_inputs(model, 2, seed=3)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    as_fp16 = gpu_session(model, adapter, "auto", "fp16").run(None, feeds)
    kernels.clear()
    with caplog.at_level(logging.INFO, logger="wgnn.wgpu"):
        session = gpu_session(model, adapter, "auto")
        got = session.run(None, feeds)
    for want, same, have in zip(expected, as_fp16, got, strict=True):
        np.testing.assert_array_equal(have, same)  # the very kernels of fp16: f32 arithmetic
        assert relative_error(have, want) <= FP16_TOLERANCE
    assert kernels.asked() <= {"f32", None}
    backend = session.session.backends[0]
    assert backend.half and all(p.half and p.storage == "texture" for p in backend.placements.values())
    told = [r.getMessage() for r in caplog.records if "fp16-arith" in r.getMessage()]
    assert len(told) == 1 and "shader-f16" in told[0] and "f32" in told[0]


# ------------------------------------------------------------------------------- each kernel
TARGETS = [(a, s) for a in F16 for s in STORAGES]
TARGET_IDS = [f"wgpu{a}-{s}" for a, s in TARGETS]
# Odd-shape kernels: max |error| / max |expected|. Measured on lavapipe: at most 2.8e-3 (buffers)
# and 3.4e-3 (textures) over these cases.
KERNEL_TOLERANCE = {"buffer": 6e-3, "texture": 8e-3}


def conv_model(x_shape, w, bias, attrs, *, residual=None, act=None):
    inits = {"w": w, "b": bias}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    last = "c"
    if residual is not None:
        nodes.append(helper.make_node("Add", [last, "r"], ["s"]))
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, list(residual)))
        last = "s"
    if act == "clip":
        inits.update(lo=np.array(-0.5, np.float32), hi=np.array(0.8, np.float32))
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["a"]))
    elif act:
        nodes.append(helper.make_node(act, [last], ["a"]))
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


# (x shape, C_out, kernel, attrs, residual, activation, forced path, kernel that must run it)
CONV_CASES = {
    "conv_nc4hw4-groups": ((2, 8, 7, 9), 8, (3, 3), {"group": 2, "strides": [1, 2], "pads": [1, 0, 2, 1]},
                           True, "Relu", "direct", "conv/conv_nc4hw4.wgsl"),
    "conv_nc4hw4-odd": ((1, 5, 6, 7), 7, (1, 3), {"strides": [1, 2], "pads": [0, 1, 0, 1]},
                        False, "Sigmoid", "direct", "conv/conv_nc4hw4.wgsl"),
    "conv4": ((2, 5, 7, 9), 13, (3, 3), {"dilations": [2, 1], "pads": [2, 1, 2, 1]},
              True, "clip", "direct", "conv/conv4_nc4hw4.wgsl"),
    "gemm1x1": ((2, 7, 5, 3), 9, (1, 1), {}, True, "LeakyRelu", "gemm1x1", "conv/gemm1x1_nc4hw4.wgsl"),
    "winograd2": ((1, 13, 6, 5), 11, (3, 3), {"pads": [1, 1, 1, 1]}, False, "Relu", "winograd2",
                  "conv/winograd_gemm.wgsl"),
    "depthwise3x3": ((2, 7, 9, 6), 7, (3, 3), {"group": 7, "pads": [1, 0, 1, 2]}, True, "clip", "direct",
                     "conv/depthwise3x3_nc4hw4.wgsl"),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
def test_conv_kernels_in_f16(kernels, monkeypatch, case, adapter, storage):
    x_shape, cout, kernel_hw, attrs, residual, act, path, kernel = CONV_CASES[case]
    monkeypatch.setenv("WGNN_CONV_PATH", path)
    cheapest = conv_paths.cheapest
    monkeypatch.setattr(conv_paths, "cheapest", lambda variants, weights: kernel if kernel in variants
                        else cheapest(variants, weights))
    group = attrs.get("group", 1)
    w = r(cout, x_shape[1] // group, *kernel_hw, scale=1 / math.sqrt(x_shape[1] // group * math.prod(kernel_hw)))
    bias, feeds = r(cout), {"x": r(*x_shape)}
    if residual:  # of the conv output's shape
        plain = conv_model(x_shape, w, bias, attrs)
        shape = ort.InferenceSession(plain.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        feeds["r"] = r(*shape[0].shape)
    model = conv_model(x_shape, w, bias, attrs, residual=feeds["r"].shape if residual else None, act=act)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    session = gpu_session(model, adapter, storage)
    got = session.run(None, feeds)[0]
    steps = [s.op.op_type for s in session.session.steps]
    assert steps == ["Conv"], f"not one fused conv: {steps}"
    assert kernels.ran(session, kernel) == {"f16"}, f"{kernel} did not run in f16"
    error = relative_error(got, want)
    assert error <= KERNEL_TOLERANCE[storage], f"{case} on adapter {adapter} ({storage}): {error:.3g}"


def test_winograd4_gemm_stays_f32(kernels, monkeypatch):
    """F(4,3)'s output transform magnifies 16-bit rounding (1.3e-2 measured): its GEMM keeps f32."""
    if not F16:
        pytest.skip("no adapter with shader-f16")
    monkeypatch.setenv("WGNN_CONV_PATH", "winograd4")
    w = r(6, 5, 3, 3, scale=0.3)
    model = conv_model((1, 5, 9, 7), w, r(6), {"pads": [1, 1, 1, 1]})
    feeds = {"x": r(1, 5, 9, 7)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    session = gpu_session(model, F16[0], "buffer")
    got = session.run(None, feeds)[0]
    convs = [ex for _, ex in session.session.segments[0].steps if type(ex).__name__ == "ConvGpu"]
    assert convs[0].path == "winograd4"
    assert kernels.ran(session, "conv/winograd_gemm.wgsl") == {"f32"}
    assert relative_error(got, want) <= KERNEL_TOLERANCE["buffer"]


# Unary kinds: 16-bit ones, and ones that keep f32 (a prelude helper: tanh, gelu; periodic: sin).
# Clip-6 without max bounds by FLT_MAX, which the f16 kernel gets clamped to the f16 range.
UNARY_CASES = {"Sigmoid": ({}, "f16"), "HardSwish": ({}, "f16"), "LeakyRelu": ({"alpha": 0.2}, "f16"),
               "Elu": ({"alpha": 0.7}, "f16"), "Softsign": ({}, "f16"), "Exp": ({}, "f16"),
               "Clip": ({"min": -1.0}, "f16"), "Tanh": ({}, "f32"), "Sin": ({}, "f32")}


def one_node(op, shapes, attrs=None):
    names = "abcdefgh"[:len(shapes)]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(names, shapes)]
    graph = helper.make_graph([helper.make_node(op, list(names), ["y"], **(attrs or {}))], op, inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opset = 6 if op == "Clip" else 17  # Clip-6: bounds as attributes
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def prefer_nc4hw4(monkeypatch, cls):
    """Make a kernel prefer NC4HW4 where it accepts it: one-node graphs otherwise stay linear."""
    layouts = cls.layouts.__func__
    monkeypatch.setattr(cls, "layouts", classmethod(lambda c, step: tuple(sorted(layouts(c, step), reverse=True))))


def raw_half_blocks(session, name) -> np.ndarray:
    """An f16 NC4HW4 buffer tensor as stored (N, C4, H, W, 4), padding lanes included."""
    backend = session.session.backends[0]
    spec = backend.specs[name]
    buffer, offset, size = backend.locations[name]
    raw = backend.device.queue.read_buffer(buffer, offset, size)
    return np.frombuffer(raw, np.float16, count=math.prod(nc4hw4_dims(spec.shape)) * 4).reshape(
        *nc4hw4_dims(spec.shape), 4)


@pytest.mark.parametrize("op", list(UNARY_CASES))
@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
def test_unary_nc4hw4_in_f16(kernels, monkeypatch, op, adapter, storage):
    prefer_nc4hw4(monkeypatch, elementwise.UnaryGpu)
    attrs, arithmetic = UNARY_CASES[op]
    x = r(2, 5, 3, 7, scale=2.0)
    model = one_node(op, [x.shape], attrs)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": x})[0]
    session = gpu_session(model, adapter, storage)
    got = session.run(None, {"a": x})[0]
    assert kernels.ran(session, "elementwise/unary_nc4hw4.wgsl") == {arithmetic}
    error = relative_error(got, want)
    assert error <= KERNEL_TOLERANCE[storage], f"{op} on adapter {adapter} ({storage}): {error:.3g}"
    if storage == "buffer":  # sigmoid(0) = 0.5 and so on: the f16 store must zero the padding lanes
        blocks = raw_half_blocks(session, "y")
        assert not blocks[:, 1, :, :, 1:].any()


# (shapes of a and b: broadcasting over N, H, W and a splatted channel, kind arithmetic)
BINARY_CASES = {"Add": ([(2, 5, 3, 7), (1, 5, 1, 7)], "f16"), "Mul": ([(2, 1, 3, 7), (2, 5, 3, 1)], "f16"),
                "Div": ([(2, 5, 3, 7), (2, 5, 3, 7)], "f16"), "Max": ([(1, 5, 3, 7), (2, 5, 3, 7)], "f16"),
                "PRelu": ([(2, 5, 3, 7), (1, 5, 1, 1)], "f16"), "Pow": ([(2, 5, 3, 7), (2, 5, 3, 7)], "f32")}


@pytest.mark.parametrize("op", list(BINARY_CASES))
@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
def test_binary_nc4hw4_in_f16(kernels, monkeypatch, op, adapter, storage):
    prefer_nc4hw4(monkeypatch, elementwise.BinaryGpu)
    shapes, arithmetic = BINARY_CASES[op]
    a, b = r(*shapes[0]), r(*shapes[1])
    if op == "Div":
        b = np.where(np.abs(b) < 0.5, 0.5, b).astype(np.float32)  # f16's relative error, not a pole's
    if op == "Pow":
        a = np.abs(a) + 0.1
    model = one_node(op, shapes)
    feeds = {"a": a, "b": b}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    session = gpu_session(model, adapter, storage)
    got = session.run(None, feeds)[0]
    assert kernels.ran(session, "elementwise/binary_nc4hw4.wgsl") == {arithmetic}
    error = relative_error(got, want)
    assert error <= KERNEL_TOLERANCE[storage], f"{op} on adapter {adapter} ({storage}): {error:.3g}"
