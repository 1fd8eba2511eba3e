"""conv_stem_nc4hw4.wgsl (backends/wgpu/conv_paths.py: the direct kernel for one group and one input
slice, weights and bias written into its text): forced onto odd convs and compared with the numpy
backend on every GPU adapter (both NC4HW4 storages, fp16 storage, fp16-arith), its literals, and
the cost model's choice of it for ResNet's stem at 224x224 on CPU adapters."""
from dataclasses import replace

import numpy as np
import pytest
from helpers import assert_close, gpu_adapters, gpu_fallbacks, record_pipelines
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu import conv_paths
from wgnn.backends.wgpu.conv_paths import CPU_WEIGHTS, STEM_KERNEL

import wgnn

ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(11)


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def conv_model(x_shape, w, bias, attrs, *, residual=None, act=None):
    """Conv [-> Add(r)] [-> Relu | Clip(0, 6)]: inputs x (and r), output out."""
    inits = {"w": w, **({"b": bias} if bias is not None else {})}
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if bias is not None else []), ["c"], **attrs)]
    if residual is not None:
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
    if act == "relu":
        nodes.append(helper.make_node("Relu", [nodes[-1].output[0]], ["a"]))
    elif act == "clip":
        inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
        nodes.append(helper.make_node("Clip", [nodes[-1].output[0], "lo", "hi"], ["a"]))
    nodes[-1].output[0] = "out"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    if residual is not None:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, list(residual)))
    graph = helper.make_graph(nodes, "stem", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def case(x_shape, cout, kernel, attrs, *, bias=True, residual=False, act=None):
    """(model, feeds, numpy backend's output) of a Conv with weights at the usual 1 / sqrt(fan-in)."""
    cin = x_shape[1]
    w = r(cout, cin, *kernel, scale=1 / np.sqrt(cin * kernel[0] * kernel[1]))
    feeds = {"x": r(*x_shape)}
    b = r(cout) if bias else None
    if residual:
        plain = wgnn.InferenceSession(conv_model(x_shape, w, b, attrs), providers=["numpy"])
        feeds["r"] = r(*plain.run(None, feeds)[0].shape)
    model = conv_model(x_shape, w, b, attrs, residual=feeds["r"].shape if residual else None, act=act)
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0]
    return model, feeds, want


@pytest.fixture
def stem(monkeypatch):
    """Sessions made while active run the direct path through the stem kernel where the conv has
    it (the way tests/backends/test_wgpu_conv_paths.py forces a direct kernel)."""
    monkeypatch.setenv("WGNN_CONV_PATH", "direct")
    cheapest = conv_paths.cheapest
    monkeypatch.setattr(conv_paths, "cheapest", lambda variants, weights: STEM_KERNEL if STEM_KERNEL in variants
                        else cheapest(variants, weights))


def ran_stem(session) -> bool:
    """Whether the session ran one Conv step (Add and activation fused into it; layout conversions
    of graph inputs aside) through the stem kernel, with no fallback."""
    steps = [(step, ex) for segment in session.session.segments for step, ex in segment.steps
             if step.op.op_type != "Convert"]
    return (not gpu_fallbacks(session) and len(steps) == 1 and steps[0][0].op.op_type == "Conv"
            and steps[0][1].path == "direct" and [d.kernel.path for d in steps[0][1].dispatches] == [STEM_KERNEL])


def check(model, feeds, want, *, storage="auto", precision="fp32", tol=None, adapters=None):
    """Every adapter (or `adapters`) against the numpy backend's `want`; returns the last session."""
    session = None
    for adapter in adapters or ADAPTERS:
        config = wgnn.Config(providers=("wgpu",), adapter=adapter["index"], storage=storage, precision=precision)
        session = wgnn.InferenceSession(model, config=config)
        got = session.run(None, feeds)[0]
        assert ran_stem(session), f"the stem kernel did not run alone on adapter {adapter['index']}"
        assert_close(got, want, what=f"stem conv on adapter {adapter['index']} ({storage}, {precision})",
                     **(tol or {"rtol": 1e-4, "atol": 1e-4}))
    return session


# (x shape, C_out, kernel, attrs, options, storage): each case covers several edges at once.
CASES = [
    # ResNet's stem: 7x7 stride 2 pad 3, 3 channels, bias + relu, batch 2, odd sizes.
    ((2, 3, 9, 13), 16, (7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, {"act": "relu"}, "buffer"),
    # MobileNetV2's stem: 3x3 stride 2, clip 0..6, 18 outputs (a partial slice).
    ((1, 3, 11, 9), 18, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, {"act": "clip"}, "texture"),
    # One input channel, 5 outputs, asymmetric pads, no bias, residual.
    ((2, 1, 9, 13), 5, (3, 3), {"pads": [1, 0, 2, 1]}, {"bias": False, "residual": True}, "texture"),
    # 5x3 with strides 3 x 1 and dilation 2 (stride 1 is no multiple of dilation 2: no shared columns).
    ((1, 4, 14, 9), 18, (5, 3), {"strides": [3, 1], "dilations": [2, 2], "pads": [2, 1, 0, 3]},
     {"residual": True, "act": "relu"}, "buffer"),
    # Stride 2 with dilation 2: pixels share columns one tap apart; an output 2 wide (a partial block).
    ((2, 4, 7, 5), 5, (3, 3), {"strides": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}, {"act": "clip"},
     "texture"),
    # 1x1 (also a gemm1x1 conv): 40 outputs, 10 slices in two groups.
    ((1, 3, 5, 7), 40, (1, 1), {}, {"residual": True}, "buffer"),
    # One output pixel per row (past-the-end pixels of the block never stored).
    ((1, 3, 6, 1), 16, (3, 3), {"pads": [1, 1, 1, 1]}, {"bias": False, "act": "relu"}, "buffer"),
]


@needs_gpu
@pytest.mark.parametrize("x_shape, cout, kernel, attrs, options, storage", CASES)
def test_stem_kernel_matches_numpy(stem, x_shape, cout, kernel, attrs, options, storage):
    model, feeds, want = case(x_shape, cout, kernel, attrs, **options)
    check(model, feeds, want, storage=storage)


@needs_gpu
@pytest.mark.parametrize("storage", ["buffer", "texture"])
def test_stem_kernel_in_16_bits(stem, monkeypatch, storage):
    """fp16 storage (f32 arithmetic) and fp16-arith (16-bit products, f32 sums, weights rounded to
    f16 literals) where the adapter has shader-f16; 16-bit buffers need it too."""
    pipelines = record_pipelines(monkeypatch)
    model, feeds, want = case((2, 3, 10, 9), 18, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]},
                              residual=True, act="relu")
    for adapter in ADAPTERS:
        half = "shader-f16" in adapter["features"]
        if storage == "buffer" and not half:
            continue
        for precision in ("fp16", "fp16-arith"):
            session = check(model, feeds, want, storage=storage, precision=precision,
                            tol={"rtol": 1e-2, "atol": 2e-2}, adapters=[adapter])
            kernel = next(ex.dispatches[0].kernel for _, ex in session.session.segments[0].steps
                          if type(ex).__name__ == "ConvGpu")
            assert pipelines.float_of(kernel) == ("f16" if half and precision == "fp16-arith" else "f32")


@needs_gpu
def test_resizes_compile_nothing(monkeypatch):
    """The stem kernel's text depends on the weights and geometry, not on the input size: resizes
    that change the conv's kernel (on lavapipe the stem kernel at 48x40, conv4 at 9x9, whose 5x5
    outputs fill one workgroup of it and two of the stem kernel) compile nothing."""
    from wgnn.backends.wgpu.loader import pipeline_cache

    monkeypatch.setattr(conv_paths.os, "cpu_count", lambda: 2)
    w, b = r(16, 3, 3, 3, scale=0.2), r(16)
    model = conv_model(("N", 3, "H", "W"), w, b, {"strides": [2, 2], "pads": [1, 1, 1, 1]}, act="clip")
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    adapter = ADAPTERS[0]
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter["index"]))
    cache = pipeline_cache(session.session.backends[0].context)
    compiled, kernels = None, set()
    for shape in ((1, 3, 48, 40), (1, 3, 9, 9), (2, 3, 40, 33)):
        x = r(*shape)
        assert_close(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], what=str(shape),
                     rtol=1e-4, atol=1e-4)
        kernels |= {d.kernel.path for _, ex in session.session.segments[0].steps for d in ex.dispatches}
        compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled
    if adapter["adapter_type"] == "CPU":
        assert {STEM_KERNEL, "conv/conv4_nc4hw4.wgsl"} <= kernels


def test_literals_convert_back_to_the_rounded_weights():
    values = np.concatenate([r(200), r(50, scale=1e-6), r(50, scale=1e4), [0.0, -0.0, 1.0, 1 / 3, 7e4]])
    for v in values:
        f32 = conv_paths.wgsl_literal(v, half=False)
        assert np.float32(float(f32)) == np.float32(v)
        f16 = conv_paths.wgsl_literal(v, half=True)  # past the f16 range: the largest finite f16
        assert np.float16(float(f16)) == np.float16(np.clip(v, -65504.0, 65504.0))


# ------------------------------------------------------------------------------------ cost model
class _Step:
    """The parts of a Step that the cost model reads."""

    def __init__(self, x, w, y, *, stride=1, pads=0, values=None):
        from wgnn.engine.graph import Node
        from wgnn.engine.ops.base import TensorSpec, get_op

        self.node = Node("Conv", ["x", "w", "b"], ["y"], name="c")
        self.attrs = get_op("Conv").resolve_attrs(Node("Conv", [], [], {"pads": [pads] * 4, "strides": [stride] * 2}))
        self.inputs = list(self.node.inputs)
        self.input_specs = [TensorSpec(x, "float32"), TensorSpec(w, "float32"), TensorSpec((w[0],), "float32")]
        self.output_specs = [TensorSpec(y, "float32")]
        self.input_values = values or [None, None, None]


def direct_kernel(step, weights) -> str:
    path, _ = conv_paths.choose_path(step, "conv", weights)
    assert path == "direct"
    return conv_paths.cheapest(conv_paths.direct_variants(step, "conv", conv_paths.geometry(step)), weights)


def test_cost_model_picks_the_stem_kernel_for_resnets_stem_at_224():
    two = replace(CPU_WEIGHTS, workers=2, workgroup=8)  # lavapipe on this project's 2-core machines
    stem_224 = _Step((1, 3, 224, 224), (16, 3, 7, 7), (1, 16, 112, 112), stride=2, pads=3)
    assert direct_kernel(stem_224, two) == STEM_KERNEL
    mobilenet_224 = _Step((1, 3, 224, 224), (16, 3, 3, 3), (1, 16, 112, 112), stride=2, pads=1)
    assert direct_kernel(mobilenet_224, two) == STEM_KERNEL
    # Not a variant: several input slices, or more products than its text may unroll (ResNet-18's
    # 3 -> 64 7x7 stem), or weights that cannot be written as literals.
    wide = _Step((1, 64, 14, 14), (64, 64, 3, 3), (1, 64, 14, 14), pads=1)
    big = _Step((1, 3, 224, 224), (64, 3, 7, 7), (1, 64, 112, 112), stride=2, pads=3)
    w = np.ones((16, 3, 3, 3), np.float32)
    w[0, 0, 0, 0] = np.inf
    infinite = _Step((1, 3, 32, 32), (16, 3, 3, 3), (1, 16, 16, 16), stride=2, pads=1, values=[None, w, None])
    for step in (wide, big, infinite):
        assert STEM_KERNEL not in conv_paths.direct_variants(step, "conv", conv_paths.geometry(step))


@needs_gpu
def test_a_cpu_adapter_runs_resnets_stem_at_224_with_the_stem_kernel(monkeypatch):
    monkeypatch.setattr(conv_paths.os, "cpu_count", lambda: 2)  # the estimates this test relies on
    cpus = [a for a in ADAPTERS if a["adapter_type"] == "CPU"]
    if not cpus:
        pytest.skip("no CPU adapter")
    model, feeds, want = case((1, 3, 224, 224), 16, (7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, act="relu")
    check(model, feeds, want, adapters=cpus[:1])
