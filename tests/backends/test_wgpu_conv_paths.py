"""The NC4HW4 Conv paths (backends/wgpu/conv_paths.py: direct, gemm1x1, Winograd F(2,3) / F(4,3)),
each forced in turn with WGNN_CONV_PATH, against onnxruntime on odd shapes (channels 3, 5, 7, 13,
odd H/W, batch 2, pads, groups, dilations for the direct path), with bias, fused activations and a
fused residual Add, on every GPU adapter and both NC4HW4 storages; the residual in the linear
kernels; the cost model's choices; resizes that compile nothing."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import assert_close, gpu_adapters, gpu_fallbacks, record_pipelines
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu.conv_paths import CPU_WEIGHTS, GPU_WEIGHTS, choose_path
from wgnn.models.zoo import build, example_inputs

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
ADAPTERS = [a["index"] for a in gpu_adapters()]
rng = np.random.default_rng(3)
# F(4,3)'s transforms scale values by up to 8 x 5: a few float32 ulps of the sums, not of each pixel.
TOL = {"rtol": 1e-4, "atol": 1e-4}
ACTIVATIONS = {"relu": ("Relu", {}), "leaky_relu": ("LeakyRelu", {"alpha": 0.1}), "sigmoid": ("Sigmoid", {}),
               "clip": ("Clip", {})}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def conv_model(x_shape, w, bias=None, attrs=None, *, residual=None, act=None, weights_input=False):
    """Conv [-> Add(residual input r of shape `residual`)] [-> activation], inputs x (and r, w),
    output out."""
    inits = {} if weights_input else {"w": w}
    if bias is not None:
        inits["b"] = bias
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if bias is not None else []), ["c"], **(attrs or {}))]
    last = "c"
    if residual:
        nodes.append(helper.make_node("Add", [last, "r"], ["s"]))
        last = "s"
    if act:
        op, act_attrs = ACTIVATIONS[act]
        extra = []
        if op == "Clip":
            inits.update(lo=np.array(-0.5, np.float32), hi=np.array(0.8, np.float32))
            extra = ["lo", "hi"]
        nodes.append(helper.make_node(op, [last, *extra], ["a"], **act_attrs))
    nodes[-1].output[0] = "out"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    if weights_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, list(residual)))
    graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def conv_executions(session) -> list:
    return [ex for segment in session.session.segments for _, ex in segment.steps if type(ex).__name__ == "ConvGpu"]


def check(model, feeds, *, path=None, storage="auto", precision="fp32", tol=None):
    """Every adapter against onnxruntime; no fallback, one fused Conv step, and it took `path`."""
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for adapter in ADAPTERS:
        config = wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter, storage=storage, precision=precision)
        session = wgnn.InferenceSession(model, config=config)
        got = session.run(None, feeds)[0]
        assert not gpu_fallbacks(session)
        convs = conv_executions(session)
        assert len(convs) == 1 and len(session.session.steps) == 1, "activation / residual not fused"
        if path:
            assert convs[0].path == path
        assert_close(got, want, what=f"conv on adapter {adapter} ({storage}, {precision})", **(tol or TOL))


def output_shape(x, w, attrs, weights_input=False) -> tuple:
    model = conv_model(x.shape, w, None, attrs, weights_input=weights_input)
    feeds = {"x": x, **({"w": w} if weights_input else {})}
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0].shape


def case(x_shape, cout, kernel, attrs=None, *, bias=True, residual=False, act=None, group=1):
    """(model, feeds) of a Conv with random weights (and a residual input of the output's shape)."""
    w = r(cout, x_shape[1] // group, *kernel)
    x = r(*x_shape)
    attrs = {"group": group, **(attrs or {})}
    shape = output_shape(x, w, attrs) if residual else None
    model = conv_model(x_shape, w, r(cout) if bias else None, attrs, residual=shape, act=act)
    return model, {"x": x, **({"r": r(*shape)} if residual else {})}


# ------------------------------------------------------------------------------- each path, forced
WINOGRAD_CASES = [
    ((2, 5, 7, 9), 7, {"pads": [1, 0, 2, 1]}, {}),
    ((1, 13, 6, 5), 13, {"pads": [1, 1, 1, 1]}, {"residual": True, "act": "relu"}),
    ((2, 3, 1, 2), 3, {"pads": [1, 1, 1, 1]}, {"act": "leaky_relu", "bias": False}),  # smaller than a tile
    ((1, 7, 5, 11), 5, {"auto_pad": "SAME_UPPER"}, {"residual": True, "act": "clip", "bias": False}),
    ((2, 4, 9, 6), 9, {}, {"act": "sigmoid"}),  # no padding
]


@pytest.mark.parametrize("unit", [2, 4])
@pytest.mark.parametrize("x_shape, cout, attrs, options", WINOGRAD_CASES)
def test_winograd(monkeypatch, unit, x_shape, cout, attrs, options):
    monkeypatch.setenv("WGNN_CONV_PATH", f"winograd{unit}")
    check(*case(x_shape, cout, (3, 3), attrs, **options), path=f"winograd{unit}")


def test_winograd_lets_the_cost_model_pick_the_unit(monkeypatch):
    monkeypatch.setenv("WGNN_CONV_PATH", "winograd")
    model, feeds = case((1, 8, 12, 12), 8, (3, 3), {"pads": [1, 1, 1, 1]})
    check(model, feeds)
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=ADAPTERS[0]))
    session.run(None, feeds)
    assert conv_executions(session)[0].path.startswith("winograd")


GEMM_CASES = [
    ((2, 7, 5, 3), 13, {}),  # 15 pixels: a partial block; 4 output slices
    ((1, 3, 1, 1), 5, {"residual": True, "act": "relu"}),  # one pixel, a partial slice pair
    ((1, 13, 4, 4), 3, {"bias": False}),  # one output slice of a pair
    ((2, 5, 3, 3), 8, {"residual": True, "act": "sigmoid"}),
]


@pytest.mark.parametrize("x_shape, cout, options", GEMM_CASES)
def test_gemm1x1(monkeypatch, x_shape, cout, options):
    monkeypatch.setenv("WGNN_CONV_PATH", "gemm1x1")
    check(*case(x_shape, cout, (1, 1), **options), path="gemm1x1")


DIRECT_CASES = [
    ((2, 5, 7, 9), 7, (3, 3), {"pads": [1, 0, 2, 1]}, {"residual": True, "act": "relu"}),
    ((1, 13, 5, 6), 3, (1, 1), {}, {"residual": True}),
    ((2, 8, 7, 5), 8, (3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, {"group": 2, "act": "clip"}),
    ((1, 3, 9, 8), 5, (3, 2), {"strides": [2, 3], "dilations": [2, 1], "pads": [1, 2, 0, 1]}, {"bias": False}),
    ((2, 13, 11, 19), 21, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, {"residual": True, "act": "relu"}),
    ((2, 5, 6, 7), 5, (3, 3), {"pads": [1, 1, 1, 1]}, {"group": 5, "residual": True, "act": "leaky_relu"}),
    ((1, 7, 5, 9), 7, (3, 3), {"pads": [0, 1, 2, 0]}, {"group": 7, "bias": False}),  # 3x3 depthwise blocks
    ((2, 6, 9, 7), 6, (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}, {"group": 6, "act": "relu"}),  # row segments
    # 3x3 stride-2 depthwise blocks (4 x 4 output pixels): partial blocks, odd sizes, channels not a
    # multiple of 4, asymmetric and SAME_UPPER pads, outputs of one row or column.
    ((2, 6, 9, 7), 6, (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {"group": 6, "act": "relu"}),
    ((2, 7, 19, 17), 7, (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]},
     {"group": 7, "residual": True, "act": "leaky_relu"}),
    ((1, 5, 10, 13), 5, (3, 3), {"pads": [0, 1, 1, 0], "strides": [2, 2]}, {"group": 5, "bias": False}),
    ((2, 9, 16, 11), 9, (3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
     {"group": 9, "residual": True, "act": "clip", "bias": False}),
    ((1, 3, 3, 18), 3, (3, 3), {"strides": [2, 2]}, {"group": 3, "act": "sigmoid"}),
    ((1, 4, 18, 4), 4, (3, 3), {"pads": [0, 0, 1, 0], "strides": [2, 2]}, {"group": 4, "residual": True}),
]
DW_S2_KERNEL = "conv/depthwise3x3s2_nc4hw4.wgsl"


def stride2_depthwise(x_shape, cout, kernel, attrs, options) -> bool:
    """Whether a DIRECT_CASES entry is a 3x3 stride-2 depthwise conv (depthwise3x3s2_nc4hw4.wgsl's)."""
    return (options.get("group") == x_shape[1] == cout and kernel == (3, 3) and attrs.get("strides") == [2, 2]
            and attrs.get("dilations", [1, 1]) == [1, 1])


ONE_GROUP = [c for c in DIRECT_CASES if "group" not in c[4]]


@pytest.mark.parametrize("x_shape, cout, kernel, attrs, options, quads",
                         [(*c, False) for c in DIRECT_CASES] + [(*c, True) for c in ONE_GROUP])
def test_direct(monkeypatch, x_shape, cout, kernel, attrs, options, quads):
    """Each kernel of the direct path: the one-slice ones (or depthwise) and, for one group, the
    4-slice conv4_nc4hw4.wgsl (the cost model's pick between them is overridden)."""
    from wgnn.backends.wgpu import conv_paths

    monkeypatch.setenv("WGNN_CONV_PATH", "direct")
    chosen = conv_paths.cheapest
    quad_kernel = "conv/conv4_nc4hw4.wgsl"

    def pick(variants, weights):
        others = {k: v for k, v in variants.items() if k != quad_kernel}
        return quad_kernel if quads and quad_kernel in variants else chosen(others or variants, weights)

    monkeypatch.setattr(conv_paths, "cheapest", pick)
    model, feeds = case(x_shape, cout, kernel, attrs, **options)
    check(model, feeds, path="direct")
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=ADAPTERS[0]))
    session.run(None, feeds)
    ran = conv_executions(session)[0].dispatches[0].kernel.path
    assert (ran == quad_kernel) == quads
    assert (ran == DW_S2_KERNEL) == stride2_depthwise(x_shape, cout, kernel, attrs, options)


@pytest.mark.parametrize("storage", ["buffer", "texture"])
def test_stride2_depthwise_in_fp16_arith(monkeypatch, storage):
    """depthwise3x3s2_nc4hw4.wgsl multiplies and sums in 16 bits under precision fp16-arith on adapters
    with shader-f16 (others run it as fp16: 32-bit arithmetic on 16-bit feature maps)."""
    pipelines = record_pipelines(monkeypatch)
    model, feeds = case((2, 7, 13, 11), 7, (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, residual=True,
                        act="relu", group=7)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for adapter in gpu_adapters():
        half = "shader-f16" in adapter["features"]
        if storage == "buffer" and not half:
            continue  # 16-bit buffers need shader-f16
        config = wgnn.Config(providers=("wgpu",), adapter=adapter["index"], storage=storage, precision="fp16-arith")
        session = wgnn.InferenceSession(model, config=config)
        got = session.run(None, feeds)[0]
        assert_close(got, want, what=f"adapter {adapter['index']} ({storage})", rtol=1e-2, atol=2e-2)
        kernel = conv_executions(session)[0].dispatches[0].kernel
        assert kernel.path == DW_S2_KERNEL and pipelines.float_of(kernel) == ("f16" if half else "f32")


TILED_CASES = [
    # 71 output channels: two blocks of 16 slices, the second partial; a pixel tile spans both images
    ((2, 13, 11, 19), 71, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, {"residual": True, "act": "relu"}),
    ((1, 37, 9, 10), 20, (3, 3), {"pads": [1, 1, 1, 1]}, {"act": "sigmoid"}),  # 10 input slices: 3 chunks, one partial
    ((2, 5, 7, 9), 7, (3, 3), {"pads": [1, 0, 2, 1]}, {"residual": True, "act": "leaky_relu"}),
    ((1, 3, 9, 8), 5, (3, 2), {"strides": [2, 3], "dilations": [2, 1], "pads": [1, 2, 0, 1]}, {"bias": False}),
    ((1, 13, 5, 6), 3, (1, 1), {}, {"residual": True, "act": "clip"}),  # 30 pixels: one partial tile
    ((1, 3, 17, 17), 16, (7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, {"act": "relu"}),  # a stem
]


@pytest.mark.parametrize("x_shape, cout, kernel, attrs, options", TILED_CASES)
def test_tiled(monkeypatch, x_shape, cout, kernel, attrs, options):
    """The implicit GEMM tiled in workgroup memory: partial pixel tiles, slice blocks and input
    chunks, strides, dilations, asymmetric pads, 1x1 and 7x7 kernels, residual and activations."""
    monkeypatch.setenv("WGNN_CONV_PATH", "tiled")
    check(*case(x_shape, cout, kernel, attrs, **options), path="tiled")


def test_forced_path_that_cannot_run_leaves_the_choice_to_the_cost_model(monkeypatch):
    monkeypatch.setenv("WGNN_CONV_PATH", "gemm1x1")  # a strided 3x3 conv has only the direct path
    check(*case((1, 5, 7, 7), 6, (3, 3), {"strides": [2, 2]}), path="direct")


@pytest.mark.parametrize("storage", ["texture", "buffer"])
@pytest.mark.parametrize("path, kernel, group", [("direct", (3, 3), 1), ("direct", (3, 3), 6), ("gemm1x1", (1, 1), 1),
                                                 ("winograd2", (3, 3), 1), ("winograd4", (3, 3), 1),
                                                 ("tiled", (3, 3), 1)])
def test_paths_on_both_storages_and_fp16(monkeypatch, storage, path, kernel, group):
    monkeypatch.setenv("WGNN_CONV_PATH", path)
    attrs = {"pads": [1, 1, 1, 1]} if kernel == (3, 3) else {}
    model, feeds = case((2, 6, 5, 7), 6 if group > 1 else 7, kernel, attrs, residual=True, act="relu", group=group)
    check(model, feeds, path=path, storage=storage)
    if storage == "texture":  # fp16 feature maps (16-bit textures), f32 arithmetic
        check(model, feeds, path=path, storage=storage, precision="fp16", tol={"rtol": 1e-2, "atol": 2e-2})


def test_invalid_path_name(monkeypatch):
    monkeypatch.setenv("WGNN_CONV_PATH", "fft")
    model, feeds = case((1, 4, 5, 5), 4, (3, 3), {"pads": [1, 1, 1, 1]})
    with pytest.raises(wgnn.WgnnError, match="WGNN_CONV_PATH='fft'"):
        wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=ADAPTERS[0])).run(None, feeds)


# --------------------------------------------------------------------------- residual, linear kernels
@pytest.mark.parametrize("x_shape, w_shape, attrs, weights_input", [
    ((2, 5, 11), (7, 5, 3), {"pads": [1, 1]}, False),  # 1-D: conv_slide.wgsl
    ((1, 4, 3, 5, 4), (6, 2, 3, 1, 2), {"group": 2, "strides": [2, 1, 2]}, False),  # 3-D: conv.wgsl
    ((2, 3, 5, 6), (6, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}, False),  # multiplier 2: depthwise.wgsl
    ((1, 5, 6, 5), (3, 5, 3, 3), {"pads": [1, 1, 1, 1]}, True),  # weights known at run time: linear
])
def test_residual_and_activation_in_linear_kernels(x_shape, w_shape, attrs, weights_input):
    w, x = r(*w_shape), r(*x_shape)
    shape = output_shape(x, w, attrs, weights_input)
    model = conv_model(x_shape, w, r(w_shape[0]), attrs, residual=shape, act="relu", weights_input=weights_input)
    check(model, {"x": x, "r": r(*shape), **({"w": w} if weights_input else {})})


# ------------------------------------------------------------------------------------ cost model
class _Step:
    """The parts of a Step that choose_path reads."""

    def __init__(self, x, w, y, *, pads=1, stride=1, group=1, inputs=3):
        from wgnn.engine.graph import Node
        from wgnn.engine.ops.base import TensorSpec, get_op

        self.node = Node("Conv", ["x", "w", "b", "r"][:inputs], ["y"], name="c")
        self.attrs = get_op("Conv").resolve_attrs(Node("Conv", [], [], {"pads": [pads] * 4, "strides": [stride] * 2,
                                                                         "group": group}))
        self.inputs = list(self.node.inputs)
        self.input_specs = [TensorSpec(x, "float32"), TensorSpec(w, "float32"), TensorSpec((w[0],), "float32"),
                            TensorSpec(y, "float32")][:inputs]
        self.output_specs = [TensorSpec(y, "float32")]
        self.input_values = [None] * inputs


def test_cost_model_choices():
    big3x3 = _Step((1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 56, 56))
    path, estimates = choose_path(big3x3, "conv", CPU_WEIGHTS)
    assert path.startswith("winograd") and set(estimates) == {"direct", "winograd2", "winograd4"}
    assert estimates[path] < estimates["direct"] / 2
    # A tiny conv: three dispatches of the Winograd path cost more than the work they save.
    assert choose_path(_Step((1, 8, 4, 4), (8, 8, 3, 3), (1, 8, 4, 4)), "conv", CPU_WEIGHTS)[0] == "direct"
    # Strided: direct only; 1x1: direct or GEMM.
    assert choose_path(_Step((1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 28, 28), stride=2), "conv", CPU_WEIGHTS)[1] \
        .keys() == {"direct"}
    one = _Step((1, 64, 56, 56), (256, 64, 1, 1), (1, 256, 56, 56), pads=0)
    assert set(choose_path(one, "conv", CPU_WEIGHTS)[1]) == {"direct", "gemm1x1"}
    # Forcing: a path the conv allows wins regardless of cost; "winograd" picks the cheaper unit.
    assert choose_path(big3x3, "conv", CPU_WEIGHTS, "direct")[0] == "direct"
    unit, estimates = choose_path(big3x3, "conv", GPU_WEIGHTS, "winograd")
    assert unit == min(("winograd2", "winograd4"), key=estimates.get)


def test_tiled_path_is_offered_where_barriers_are_cheap(monkeypatch):
    """Real GPUs weigh the tiled path against the others; CPU adapters (a barrier switches every
    invocation) only run it when forced, and then its estimate counts the barriers and the
    padding of its 64-pixel x 64-channel tiles."""
    from dataclasses import replace

    from wgnn.backends.wgpu.conv_paths import TILED_PIXELS, geometry, tiled_cost

    conv = _Step((1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 56, 56))
    assert "tiled" in choose_path(conv, "conv", GPU_WEIGHTS)[1]
    assert "tiled" not in choose_path(conv, "conv", CPU_WEIGHTS)[1]
    monkeypatch.setenv("WGNN_CONV_PATH", "tiled")
    path, estimates = choose_path(conv, "conv", CPU_WEIGHTS, "tiled")
    assert path == "tiled" and estimates["tiled"] > 2 * estimates["direct"]
    free_barriers = replace(CPU_WEIGHTS, barrier_ns=0.0)
    assert choose_path(conv, "conv", free_barriers, "tiled")[1]["tiled"] < estimates["tiled"]
    # 3136 pixels: 49 tiles; 64 -> 65 output channels adds a second block of slices, doubling the work.
    cost = tiled_cost(conv, geometry(conv), 0)
    wider = _Step((1, 64, 56, 56), (65, 64, 3, 3), (1, 65, 56, 56))
    assert cost.invocations == 49 * TILED_PIXELS and tiled_cost(wider, geometry(wider), 0).invocations == 2 * 49 * 64
    assert cost.barriers == 2 * 9 * 4 and cost.fmas == 9 * 4 * 4 * 64  # 9 taps x 4 chunks of 4 slices
    # Grouped convs have no tiled path.
    grouped = _Step((1, 8, 8, 8), (8, 4, 3, 3), (1, 8, 8, 8), group=2)
    assert "tiled" not in choose_path(grouped, "conv", GPU_WEIGHTS)[1]


def test_tuned_conv_variant_decides_whether_the_tiled_path_is_offered(monkeypatch, tmp_path):
    """What wgnn tune stored: "tiled" makes the tiled path a candidate on the adapter (the cost
    model still picks per conv), "registers" takes it away; untuned, the adapter type decides.
    While wgnn tune measures the "tiled" variant, convs run it."""
    from wgnn.backends.wgpu.context import get_context
    from wgnn.backends.wgpu.conv_paths import adapter_weights
    from wgnn.backends.wgpu.tuning import save_entry, trial_variants

    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    conv = _Step((1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 56, 56))
    for index in ADAPTERS:
        context = get_context(index)
        assert adapter_weights(context).workgroup_memory == (context.info.adapter_type != "CPU")
        for variant in ("tiled", "registers"):
            save_entry(context.info, {"variants": {"conv": variant}})
            weights = adapter_weights(context)
            assert weights.workgroup_memory == (variant == "tiled")
            assert ("tiled" in choose_path(conv, "conv", weights)[1]) == (variant == "tiled")
    with trial_variants({"conv": "tiled"}):
        check(*case((1, 8, 6, 6), 8, (3, 3), {"pads": [1, 1, 1, 1]}), path="tiled")


def test_cost_model_spreads_invocations_by_the_adapters_workgroup_size():
    """A worker thread runs whole workgroups: 32 invocations are one 64-wide workgroup (one busy
    core) but four 8-wide ones (every core, the second one started at wake_us). On lavapipe the
    model uses the preferred size."""
    from dataclasses import replace

    from wgnn.backends.wgpu.context import get_context
    from wgnn.backends.wgpu.conv_paths import (
        KernelCost,
        adapter_weights,
        cheapest,
        direct_variants,
        estimate_us,
        geometry,
    )
    from wgnn.backends.wgpu.tuning import preferred_workgroup

    small = KernelCost(invocations=32, loads=100, stores=8, fmas=400)
    two = replace(CPU_WEIGHTS, workers=2)
    wide, narrow = estimate_us([small], replace(two, workgroup=64)), estimate_us([small], replace(two, workgroup=8))
    assert wide - two.dispatch_us == pytest.approx(2 * (narrow - two.dispatch_us - two.wake_us))
    context = get_context(ADAPTERS[0])
    assert adapter_weights(context).workgroup == preferred_workgroup(context)
    # ResNet's stem (7x7 stride 2 from 3 channels to 16): 4 output slices per invocation load a
    # quarter of the input; its 32 invocations keep both cores busy only as 8-wide groups.
    stem = _Step((1, 3, 32, 32), (16, 3, 7, 7), (1, 16, 16, 16), stride=2, pads=3)
    variants = direct_variants(stem, "conv", geometry(stem))
    quads = [variants["conv/conv4_nc4hw4.wgsl"]]
    assert estimate_us(quads, replace(two, workgroup=8)) < estimate_us(quads, replace(two, workgroup=64))
    variants.pop("conv/conv_stem_nc4hw4.wgsl")  # beats both (tests/ops/test_conv_stem.py)
    assert cheapest(variants, replace(two, workgroup=8)) == "conv/conv4_nc4hw4.wgsl"


def test_cost_model_prices_uniform_weight_loads(monkeypatch):
    """Weights that go to a uniform buffer load at about half the price of a storage load on CPU
    adapters: UNet's 16->8 3x3 conv at 224x224 runs direct (measured 21 ms against Winograd
    F(4,3)'s 27 ms), and so does ResNet's 16->16 at 56x56, which with weights kept in storage would
    take Winograd F(4,3)."""
    from dataclasses import replace

    unet_conv = _Step((1, 16, 224, 224), (8, 16, 3, 3), (1, 8, 224, 224))
    resnet_conv = _Step((1, 16, 56, 56), (16, 16, 3, 3), (1, 16, 56, 56))
    two = replace(CPU_WEIGHTS, workers=2, workgroup=8)
    assert choose_path(unet_conv, "conv", two)[0] == "direct"
    assert choose_path(resnet_conv, "conv", two)[0] == "direct"
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "storage")
    assert choose_path(resnet_conv, "conv", two)[0] == "winograd4"
    monkeypatch.delenv("WGNN_CONV_WEIGHTS")
    big = _Step((1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 56, 56))  # 147 KiB of weights: storage
    assert choose_path(big, "conv", two)[0] == "winograd4"


def test_resize_compiles_nothing_when_the_path_changes(monkeypatch):
    """The path may differ per shape (tiny: direct, large: Winograd); a resize compiles nothing, and
    returning to a shape whose path ran before keeps it (and its packed weights)."""
    from wgnn.backends.wgpu import conv_paths
    from wgnn.backends.wgpu.loader import pipeline_cache

    monkeypatch.setattr(conv_paths.os, "cpu_count", lambda: 2)  # the estimates this test relies on
    w, b = r(32, 32, 3, 3) / 17, r(32)  # weights at the usual 1 / sqrt(fan-in) scale
    model = conv_model(("N", 32, "H", "W"), w, b, {"pads": [1, 1, 1, 1]}, act="relu")
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for adapter in ADAPTERS:
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
        cache = pipeline_cache(session.session.backends[0].context)
        compiled, paths = None, []
        for shape in ((1, 32, 3, 3), (2, 32, 40, 33), (1, 32, 5, 4)):
            x = r(*shape)
            assert_close(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], what=str(shape), **TOL)
            paths.append(conv_executions(session)[0].path)
            compiled = cache.compiled if compiled is None else compiled
            assert cache.compiled == compiled
        assert paths == ["direct", "winograd4", "direct"]


def test_a_resize_keeps_a_path_within_the_margin():
    near = _Step((1, 24, 12, 12), (24, 24, 3, 3), (1, 24, 12, 12))
    path, estimates = choose_path(near, "conv", CPU_WEIGHTS)
    assert path == "direct" and estimates["direct"] < estimates["winograd4"] < 1.5 * estimates["direct"]
    assert choose_path(near, "conv", CPU_WEIGHTS, previous=frozenset({"winograd4"}))[0] == "winograd4"
    assert choose_path(near, "conv", CPU_WEIGHTS, previous=frozenset({"winograd4", "direct"}))[0] == "direct"
    far = _Step((1, 16, 8, 8), (16, 16, 3, 3), (1, 16, 8, 8))
    path, estimates = choose_path(far, "conv", CPU_WEIGHTS, previous=frozenset({"winograd4"}))
    assert path == "direct" and estimates["winograd4"] > 1.5 * estimates["direct"]


# ------------------------------------------------------------------------------- residual fusion
def test_zoo_resnet_fuses_residual_adds_on_the_gpu():
    model = build("resnet")
    feeds = example_inputs(model, 2)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for adapter in ADAPTERS:
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
        got = session.run(None, feeds)[0]
        assert float(np.abs(got - want).max() / np.abs(want).max()) <= 1e-4
        ops = [step.op.op_type for step in session.session.steps]
        assert "Binary" not in ops and "Unary" not in ops  # Add and Relu live in the convs' epilogue
        residuals = [s for s in session.session.steps if s.op.op_type == "Conv" and len(s.inputs) > 3 and s.inputs[3]]
        assert len(residuals) == 3


# ------------------------------------------------------------------------------- weights' binding
def weight_bindings(session) -> dict[str, str]:
    """Conv weights tensor -> "uniform" or "storage", as the backend binds it."""
    backend = session.session.backends[0]
    return {name: backend.binding_kind(name, False) for name in backend.packed if "weights" in name}


@pytest.mark.parametrize("weights", ["auto", "storage", "uniform"])
@pytest.mark.parametrize("path, kernel, cout, group", [("gemm1x1", (1, 1), 7, 1), ("direct", (3, 3), 9, 1),
                                                       ("direct", (3, 3), 6, 6), ("direct", (1, 3), 5, 1)])
def test_weights_in_uniform_buffers_on_cpu_adapters(monkeypatch, weights, path, kernel, cout, group):
    """Small 32-bit weights are bound as uniform buffers on CPU adapters (WGNN_CONV_WEIGHTS=storage
    keeps storage buffers, =uniform takes uniform ones on any adapter); results match onnxruntime
    either way, bias or none."""
    monkeypatch.setenv("WGNN_CONV_PATH", path)
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", weights)
    attrs = {"pads": [1, 1, 1, 1]} if kernel == (3, 3) else {}
    for bias in (True, False):
        model, feeds = case((2, 6, 5, 7), cout, kernel, attrs, bias=bias, residual=True, act="relu", group=group)
        check(model, feeds, path=path)
        for adapter in gpu_adapters():
            session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter["index"]))
            session.run(None, feeds)
            uniform = weights == "uniform" or (weights == "auto" and adapter["adapter_type"] == "CPU")
            assert set(weight_bindings(session).values()) == {"uniform" if uniform else "storage"}


def test_unknown_weight_placement_is_an_error(monkeypatch):
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "constant")
    model, feeds = case((1, 4, 5, 6), 4, (3, 3), {"pads": [1, 1, 1, 1]})
    with pytest.raises(wgnn.WgnnError, match="WGNN_CONV_WEIGHTS='constant': expected one of auto, storage, uniform"):
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=ADAPTERS[0]))
        session.run(None, feeds)


def test_weights_past_the_uniform_limit_stay_in_storage():
    """3x3 48 -> 40: 69 KiB of weights, past a uniform buffer's 64 KiB."""
    model, feeds = case((1, 48, 5, 6), 40, (3, 3), {"pads": [1, 1, 1, 1]})
    check(model, feeds)
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=ADAPTERS[0]))
    session.run(None, feeds)
    assert set(weight_bindings(session).values()) == {"storage"}


# ------------------------------------------------------------------- the cost fit (tools/fit_conv_cost.py)
def test_nnls_keeps_prices_non_negative():
    from wgnn.tools.fit_conv_cost import nnls

    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    # Unconstrained least squares gives (1, -1); with x >= 0 the second is 0 and the first 1/2.
    assert nnls(a, np.array([1.0, -1.0, 0.0])) == pytest.approx([0.5, 0.0])
    assert nnls(a, np.array([2.0, 3.0, 5.0])) == pytest.approx([2.0, 3.0])


def test_fit_recovers_known_prices_from_synthetic_timings():
    """Kernel times made from known prices (the fit's own model) give those prices back, and
    wall times made as a + b x work / busy give dispatch_us = a / b."""
    from wgnn.backends.wgpu.conv_paths import KernelCost
    from wgnn.tools.fit_conv_cost import busy, fit, fit_dispatch, predicted_us, work_us

    gen = np.random.default_rng(5)
    costs = [KernelCost(int(gen.integers(1, 20000)), float(gen.uniform(8, 900)), float(gen.integers(1, 65)),
                        float(gen.uniform(40, 9000)), float(gen.uniform(10, 1200)) * int(gen.integers(0, 2)))
             for _ in range(80)]
    truth = {"dispatch_cpu_us": 22.0, "invocation_ns": 9.0, "load_ns": 4.0, "uniform_load_ns": 1.5,
             "store_ns": 9.5, "fma_ns": 0.27}
    cpu = [predicted_us(c, truth) for c in costs]
    assert fit(costs, cpu) == pytest.approx(truth, rel=1e-6)
    # With 3% noise the prices of small terms drift (they are nearly collinear), the times do not.
    noisy = fit(costs, [t * gen.uniform(0.97, 1.03) for t in cpu])
    assert np.median([abs(predicted_us(c, noisy) / t - 1) for c, t in zip(costs, cpu)]) < 0.02
    assert noisy["fma_ns"] == pytest.approx(truth["fma_ns"], rel=0.1)
    rows = [{"cost": vars(c), "wall_us": 30.0 + 1.5 * work_us(c, truth) / busy(c, 2, 8)} for c in costs]
    dispatch = fit_dispatch(rows, truth, 2, 8)
    assert dispatch["dispatch_us"] == pytest.approx(20.0) and dispatch["wall_per_work"] == pytest.approx(1.5)


def test_fit_confusion_counts_the_model_choices_against_the_fastest():
    from dataclasses import replace

    from wgnn.tools.fit_conv_cost import confusion

    big = {"invocations": 6400, "loads": 100.0, "stores": 8.0, "fmas": 400.0, "uniform_loads": 0.0}
    small = {**big, "invocations": 8}
    check = {"case": "c", "workers": 2, "workgroup": 8,
             "options": {"direct:conv4": {"wall_us": 200.0, "costs": [big]},
                         "winograd4": {"wall_us": 300.0, "costs": [small, small, small]}}}
    result = confusion([check], CPU_WEIGHTS)  # three small kernels cost less than one big one
    assert result["right"] == 0 and result["wrong"][0]["chosen"] == "winograd4"
    assert result["wrong"][0]["ratio"] == pytest.approx(1.5) and result["extra_us"] == pytest.approx(100.0)
    # Where dispatches cost far more than the work, the one-dispatch path wins: the fastest one here.
    assert confusion([check], replace(CPU_WEIGHTS, dispatch_us=1e6))["right"] == 1


def test_fit_measures_each_kernel_of_a_conv():
    """One small 1x1 conv: the direct kernels and gemm1x1, each with uniform and storage weights,
    timed (rounds=1) with the KernelCosts the cost model gives them."""
    from wgnn.tools.fit_conv_cost import ConvCase, measure_case, untuned

    with untuned():
        rows = measure_case(ConvCase(8, 12, 1, 1, 6), ADAPTERS[0], rounds=1, target_ms=0.2)
    kernels = {(r["kernel"], r["bound"]) for r in rows}
    for kernel in ("conv/conv_nc4hw4.wgsl", "conv/conv4_nc4hw4.wgsl", "conv/gemm1x1_nc4hw4.wgsl"):
        assert {(kernel, "uniform"), (kernel, "storage")} <= kernels
    for r in rows:  # the storage twin prices its weight loads as storage loads
        assert (r["cost"]["uniform_loads"] > 0) == (r["bound"] == "uniform")
        assert r["cost"]["invocations"] > 0 and r["repeat"] >= 1


def test_gpu_estimates_count_one_chain_per_wave():
    """Real GPUs: a kernel's estimate is one invocation's chain per wave of `concurrency`
    invocations, so on ResNet's 16->16 3x3 conv at 56x56 the orders measured on an H200 hold
    (tiled 26 us < F(2,3) 35 us < F(4,3) 41 us < conv4 43 us) and a batch that stays in one wave
    costs nothing more, while one that needs twice the waves costs about twice as much."""
    from dataclasses import replace

    from wgnn.backends.wgpu.conv_paths import cheapest, direct_variants, geometry, path_costs

    conv = _Step((1, 16, 56, 56), (16, 16, 3, 3), (1, 16, 56, 56))
    estimates = choose_path(conv, "conv", GPU_WEIGHTS)[1]
    assert estimates["tiled"] < estimates["winograd2"] < estimates["winograd4"]
    variants = direct_variants(conv, "conv", geometry(conv))
    assert cheapest(variants, GPU_WEIGHTS) != "conv/conv4_nc4hw4.wgsl"
    batch = _Step((4, 16, 56, 56), (16, 16, 3, 3), (4, 16, 56, 56))
    assert choose_path(batch, "conv", GPU_WEIGHTS)[1]["tiled"] == pytest.approx(estimates["tiled"])
    tiled = path_costs(batch, "conv", GPU_WEIGHTS)["tiled"][0]
    two_waves = replace(GPU_WEIGHTS, concurrency=tiled.invocations // 2)
    work_us = estimates["tiled"] - GPU_WEIGHTS.dispatch_us
    assert choose_path(batch, "conv", two_waves)[1]["tiled"] == pytest.approx(GPU_WEIGHTS.dispatch_us + 2 * work_us)


def test_broadcast_weights_go_to_a_uniform_buffer_on_real_gpus(monkeypatch):
    """Weights every invocation reads at once (the dwpw kernels) go to a uniform buffer on real
    GPUs too; per-invocation weights stay in storage there; 16-bit weights and weights past a
    uniform buffer's size stay in storage everywhere; WGNN_CONV_WEIGHTS overrides the rule."""
    from types import SimpleNamespace

    from wgnn.backends.wgpu.backend import UNIFORM_ARRAY_BYTES
    from wgnn.backends.wgpu.conv_paths import weights_binding

    def placed(adapter_type: str, size: int = 64, **kw) -> bool:
        made = {}

        def packed_constant(key, source, pack, uniform):
            made["uniform"] = uniform
            return key

        info = SimpleNamespace(adapter_type=adapter_type)
        ex = SimpleNamespace(backend=SimpleNamespace(context=SimpleNamespace(info=info)),
                             packed_constant=packed_constant)
        _, declaration = weights_binding(ex, "w", np.ones(size, np.float32), lambda v: v, **kw)
        assert made["uniform"] == ("var<uniform>" in declaration)
        return made["uniform"]

    assert placed("DiscreteGPU", half=False, broadcast=True)
    assert not placed("DiscreteGPU", half=False)
    assert placed("CPU", half=False)
    assert not placed("DiscreteGPU", half=True, broadcast=True)
    assert not placed("DiscreteGPU", UNIFORM_ARRAY_BYTES // 4 + 1, half=False, broadcast=True)
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "storage")
    assert not placed("DiscreteGPU", half=False, broadcast=True)
    monkeypatch.setenv("WGNN_CONV_WEIGHTS", "uniform")
    assert placed("IntegratedGPU", half=False)
