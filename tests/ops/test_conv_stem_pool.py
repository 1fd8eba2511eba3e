"""conv_stem_maxpool_nc4hw4.wgsl (backends/wgpu/conv_pool.py: ConvMaxPool of a stem conv, one group
and one input slice, whose pool windows tile its output; weights and bias written into its text by
conv_paths.stem_text): compared with the numpy backend on every GPU adapter (buffer and texture
storage, fp16 storage, fp16-arith) over 1 to 4 input channels, outputs not a multiple of 4 and
several slice groups, batch 2, odd conv outputs (partial windows under ceil_mode and pool pads,
conv outputs no window holds when the conv output is kept), conv pads, strides and dilations,
relu / clip / none; which kernel runs for fitting and non-fitting ops; resizes compiling nothing;
and the block's shared loads in the generated text."""
import numpy as np
import pytest
from helpers import assert_close, gpu_adapters, gpu_fallbacks, record_pipelines
from wgnn.backends.wgpu import conv_paths, conv_pool
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models.format import model_to_bytes, read_model

import wgnn

ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(23)
STEM = conv_pool.STEM_KERNEL
GENERAL = conv_pool.KERNEL
TOL = {"rtol": 1e-4, "atol": 1e-4}


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def op_model(cin, cout, kernel, *, conv=None, pool=(2, 2), pool_pads=None, ceil=0, keep=False, bias=True, act=None,
             group=1, weights=None, x_shape=None) -> Model:
    """One ConvMaxPool node (pool strides = pool kernel: the windows tile the conv output), through
    the file format; weights at 1 / sqrt(fan-in)."""
    attrs = {"group": group, "pool_kernel_shape": list(pool), "pool_strides": list(pool),
             "pool_pads": list(pool_pads or [0, 0, 0, 0]), "pool_ceil_mode": ceil, **(conv or {})}
    if act == "relu":
        attrs["activation"] = "relu"
    elif act == "clip":
        attrs.update(activation="clip", activation_alpha=0.0, activation_beta=6.0)
    init = {"w": r(cout, cin // group, *kernel, scale=(cin // group * kernel[0] * kernel[1]) ** -0.5)
            if weights is None else weights}
    if bias:
        init["b"] = r(cout)
    outputs = ["y", "z"] if keep else ["y"]
    node = Node("ConvMaxPool", ["x", "w", "b" if bias else ""], outputs, attrs, name="cp")
    shape = x_shape or ("N", cin, "H", "W")
    graph = Graph([node], [TensorInfo("x", "float32", shape)], [TensorInfo(n, "float32") for n in outputs], init)
    return read_model(model_to_bytes(Model(graph)))


def fused_kernels(session) -> list[str]:
    return [d.kernel.path for segment in session.session.segments for step, ex in segment.steps
            if step.op.op_type == "ConvMaxPool" for d in ex.dispatches]


def check(model, x, *, kernel=STEM, storage="auto", precision="fp32", tol=None, adapters=None):
    """Every adapter (or `adapters`) against the numpy backend, the op run by `kernel`; returns the
    last session."""
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"x": x})
    session = None
    for adapter in adapters or ADAPTERS:
        config = wgnn.Config(providers=("wgpu",), adapter=adapter["index"], storage=storage, precision=precision)
        session = wgnn.InferenceSession(model, config=config)
        got = session.run(None, {"x": x})
        assert not gpu_fallbacks(session)
        assert fused_kernels(session) == [kernel], f"adapter {adapter['index']}"
        assert len(got) == len(want)
        for name, g, w in zip("yz"[:len(want)], got, want, strict=True):
            assert_close(g, w, what=f"{name} on adapter {adapter['index']} ({storage}, {precision})", **(tol or TOL))
    return session


# (x shape, C_out, kernel, options, storage): each case covers several edges at once.
CASES = {
    # UNet's first level at odd sizes: conv output 9x13 kept, pooled 4x6 (a conv row and column
    # that no window holds, stored to z only), batch 2.
    "unet-level-odd-keep": ((2, 3, 9, 13), 8, (3, 3), {"conv": {"pads": [1, 1, 1, 1]}, "keep": True,
                                                       "act": "relu"}, "buffer"),
    # One input channel, 5 outputs, ceil_mode: conv output 7x11 pooled 4x6 with partial edge windows.
    "cin1-ceil": ((1, 1, 9, 13), 5, (3, 3), {"ceil": 1, "act": "clip"}, "texture"),
    # Stride 2 (input rows and columns shared two taps apart), asymmetric conv pads, pool pads
    # (partial first windows), kept conv output, no activation (negative maxima), no bias.
    "cin2-stride2-pool-pads": ((2, 2, 11, 12), 6, (3, 3), {"conv": {"strides": [2, 2], "pads": [1, 0, 2, 1]},
                                                           "pool_pads": [1, 0, 0, 1], "keep": True, "bias": False},
                               "buffer"),
    # 4 input channels, dilation 2 (stride 1 is no multiple of it: no shared loads), 3x3 / 3
    # windows under ceil_mode, batch 2.
    "cin4-dilation2-3x3-pool": ((2, 4, 12, 14), 7, (3, 3), {"conv": {"dilations": [2, 2], "pads": [2, 1, 2, 2]},
                                                            "pool": (3, 3), "ceil": 1, "act": "relu"}, "texture"),
    # 5x5 stride 2 (MobileNet-like stem), 12 outputs (3 slices), kept conv output, clip.
    "cin3-5x5s2": ((1, 3, 15, 17), 12, (5, 5), {"conv": {"strides": [2, 2], "pads": [2, 2, 2, 2]}, "keep": True,
                                                "act": "clip"}, "texture"),
    # 38 outputs: 10 slices over the 8-pixel block in groups (4 + 4 + 2), each loading the input.
    "cin3-cout38-groups": ((1, 3, 6, 10), 38, (3, 3), {"conv": {"pads": [1, 1, 1, 1]}, "keep": True},
                           "buffer"),
    # W stride 3 with W dilation 2 (no shared columns), H stride 1; 1x3 windows (one conv row, one
    # pooled pixel per invocation) and 4x1 windows (4 rows, 4 pooled pixels).
    "strides3x1-pool1x3": ((1, 3, 7, 20), 4, (3, 3), {"conv": {"strides": [1, 3], "dilations": [1, 2]},
                                                      "pool": (1, 3), "ceil": 1}, "buffer"),
    "pool4x1": ((2, 2, 10, 6), 9, (2, 3), {"conv": {"pads": [0, 1, 1, 1]}, "pool": (4, 1), "keep": True,
                                           "act": "relu"}, "texture"),
    # 1x1 conv, pooled output a single pixel per row.
    "1x1-tiny": ((1, 3, 3, 2), 3, (1, 1), {"keep": True}, "buffer"),
}


@needs_gpu
@pytest.mark.parametrize("x_shape, cout, kernel, options, storage", CASES.values(), ids=CASES.keys())
def test_stem_pool_kernel_matches_numpy(x_shape, cout, kernel, options, storage):
    check(op_model(x_shape[1], cout, kernel, **options), r(*x_shape), storage=storage)


@needs_gpu
@pytest.mark.parametrize("storage", ["buffer", "texture"])
def test_stem_pool_kernel_in_16_bits(monkeypatch, storage):
    """fp16 storage (f32 arithmetic) and fp16-arith (16-bit products, f32 sums, weights rounded to
    f16 literals) where the adapter has shader-f16; 16-bit buffers need it too."""
    pipelines = record_pipelines(monkeypatch)
    model = op_model(3, 10, (3, 3), conv={"strides": [2, 2], "pads": [1, 1, 1, 1]}, keep=True, act="relu")
    x = r(2, 3, 13, 11)
    for adapter in ADAPTERS:
        half = "shader-f16" in adapter["features"]
        if storage == "buffer" and not half:
            continue
        for precision in ("fp16", "fp16-arith"):
            session = check(model, x, storage=storage, precision=precision, tol={"rtol": 1e-2, "atol": 2e-2},
                            adapters=[adapter])
            kernel = next(d.kernel for segment in session.session.segments for step, ex in segment.steps
                          if step.op.op_type == "ConvMaxPool" for d in ex.dispatches)
            assert pipelines.float_of(kernel) == ("f16" if half and precision == "fp16-arith" else "f32")


# Ops the stem kernel does not run (the general kernel does): (cin, cout, kernel, options).
def _infinite_weights():
    w = r(4, 3, 3, 3)
    w[1, 2, 0, 1] = -np.inf
    return w


NOT_STEMS = {
    "two input slices": (5, 8, (3, 3), {"conv": {"pads": [1, 1, 1, 1]}}),
    "overlapping windows": (3, 8, (3, 3), {"pool": (3, 3)}),  # strides set below
    "groups": (4, 8, (3, 3), {"group": 2}),
    "too many products": (3, 16, (7, 7), {"conv": {"pads": [3, 3, 3, 3]}}),  # 49 x 3 x 4 slices x 8 pixels
    "infinite weight": (3, 4, (3, 3), {"weights": _infinite_weights()}),
}


@needs_gpu
@pytest.mark.parametrize("name", list(NOT_STEMS))
def test_what_the_stem_kernel_leaves_to_the_general_one(name):
    cin, cout, kernel, options = NOT_STEMS[name]
    model = op_model(cin, cout, kernel, **options)
    if name == "overlapping windows":
        model.graph.nodes[0].attrs["pool_strides"] = [2, 2]
    x = r(1, cin, 9, 10)
    if name == "infinite weight":  # inf * 0 padding products: compare the finite part only
        x = np.abs(x) + 0.5
    check(model, x, kernel=GENERAL, adapters=ADAPTERS[:1])


@needs_gpu
def test_routing_depends_on_weights_and_attributes_only():
    """stem_pool_block of a fitting op: the 2x2 / 2 block is 2 conv rows x 4 columns (2 pooled
    pixels), 3x3 / 3 is 3 x 3 (1 pooled pixel); the plain stem budget counts the block's pixels."""
    session = wgnn.InferenceSession(op_model(3, 8, (3, 3), conv={"pads": [1, 1, 1, 1]}, keep=True),
                                    config=wgnn.Config(providers=("wgpu",), adapter=ADAPTERS[0]["index"]))
    session.run(None, {"x": r(1, 3, 8, 8)})
    (step, _), = [(s, ex) for segment in session.session.segments for s, ex in segment.steps
                  if s.op.op_type == "ConvMaxPool"]
    assert conv_pool.stem_pool_block(step) == (2, 4, 2)
    step.attrs["pool_kernel_shape"] = step.attrs["pool_strides"] = [3, 3]
    assert conv_pool.stem_pool_block(step) == (3, 3, 1)
    step.attrs["pool_strides"] = [3, 2]
    assert conv_pool.stem_pool_block(step) is None


@needs_gpu
def test_resizes_compile_nothing():
    """The text depends on the weights and attributes, the sizes go in the params: batch, odd and
    even sizes (partial windows, leftover conv rows for z) compile nothing after the first."""
    model = op_model(3, 6, (3, 3), conv={"pads": [1, 1, 1, 1]}, pool_pads=[0, 1, 1, 0], ceil=1, keep=True,
                     act="relu")
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    for adapter in ADAPTERS:
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter["index"]))
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = None
        for shape in ((1, 3, 12, 10), (2, 3, 7, 9), (1, 3, 21, 16), (0, 3, 5, 5)):
            x = r(*shape)
            for got, want in zip(session.run(None, {"x": x}), reference.run(None, {"x": x}), strict=True):
                assert_close(got, want, what=f"{shape} on adapter {adapter['index']}", **TOL)
            if shape[0]:
                assert fused_kernels(session) == [STEM]
            compiled = cache.compiled if compiled is None else compiled
            assert cache.compiled == compiled, f"a resize to {shape} compiled pipelines"


def test_block_loads_each_input_row_and_column_once():
    """stem_text for a 2 x 4 block of a 3x3 conv: 4 input rows x 6 columns loaded (stride 1), 5 x 9
    at stride 2, 6 x 12 at dilation 2 with stride 1 (nothing shared); the plain stem's one row
    of 4 pixels loads 3 rows x 6 columns."""
    w = r(8, 3, 3, 3)

    def loads(strides, dilations, rows, cols):
        geo = {"kernel": [3, 3], "strides": strides, "dilations": dilations, "group": 1}
        text = conv_paths.stem_text(geo, w, None, False, "f32", rows=rows, cols=cols,
                                    epilogue=lambda o4, sums: [f"// {o4} {sorted(sums)}"])
        return text["TAPS"].count("tap(n, 0, iy,"), text["TAPS"].count("let iy =")

    assert loads([1, 1], [1, 1], 2, 4) == (24, 4)
    assert loads([2, 2], [1, 1], 2, 4) == (45, 5)
    assert loads([1, 1], [2, 2], 2, 4) == (72, 6)
    assert loads([1, 1], [1, 1], 1, 4) == (18, 3)
    # Groups of output slices: sums of slices x pixels within the plain stem's 8 x 4.
    assert [len(g) for g in conv_paths.stem_groups(40, 8)] == [4, 4, 2]
    assert [len(g) for g in conv_paths.stem_groups(40)] == [5, 5]


@needs_gpu
def test_zoo_unet_runs_its_first_level_through_the_stem_kernel():
    """zoo:unet's first ConvMaxPool (3 -> 8, 3x3, 2x2 / 2, conv output kept for the skip
    connection) takes the stem kernel, its second (8 -> 16: two input slices) the general one."""
    from wgnn.models.zoo import build, example_inputs

    model = wgnn.convert(build("unet"))
    feeds = example_inputs(build("unet"), 2)
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
    for adapter in ADAPTERS:
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter["index"]))
        got = session.run(None, feeds)
        assert fused_kernels(session) == [STEM, GENERAL]
        for g, w in zip(got, want, strict=True):
            assert_close(g, w, what=f"unet on adapter {adapter['index']}", **TOL)
