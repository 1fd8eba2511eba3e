"""ConvDwPwExpand (engine/ops/conv_dwpw_expand.py) and fuse_dwpw_expand
(tools/convert/fusion_dwpw_expand.py): a ConvDwPw and the next block's 1x1 expand Conv as one op.

Each case converts an ONNX MobileNet-style pair (depthwise 3x3 + ReLU6, 1x1 project [+ residual],
1x1 expand + ReLU6), checks the fused op types, that numpy computes exactly what the unfused graph
computes on numpy, and that numpy and every GPU adapter (buffer and texture storage, fp16 storage,
fp16-arith) match onnxruntime; the GPU runs the pair in one dispatch, with every pixel block its
kernel is compiled for (backends/wgpu/conv_dwpw.py) on odd sizes, and resizes that change the block
compile nothing. Refusals keep the Conv."""
import numpy as np
import onnxruntime as ort
import pytest
from dwpw_block_cases import STORAGE_PRECISIONS, block_name, blocks_for
from helpers import gpu_adapters, record_pipelines
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu.conv_dwpw import BLOCK_ENV, BLOCKS, GROUPS_ENV
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.engine.errors import ShapeError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models.format import model_to_bytes
from wgnn.models.zoo import example_inputs, mobilenetv2
from wgnn.tools.convert import fusion
from wgnn.tools.convert.fusion_dwpw_expand import fuse_dwpw_expand

import wgnn

rng = np.random.default_rng(7)
FLOAT = TensorProto.FLOAT
ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
KERNEL = "conv/dwpw_expand_nc4hw4.wgsl"


def test_the_pass_runs_after_the_depthwise_pointwise_one():
    passes = list(fusion.FUSION_PASSES)
    assert passes.index(fuse_dwpw_expand) == passes.index(fusion.fuse_depthwise_pointwise) + 1


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def pair(c=6, project=4, expand=10, *, stride=1, residual=False, extra=None, size=(7, 9), batch=2,
         ex_kernel=1, ex_stride=1, ex_weights_input=False):
    """ONNX: depthwise Conv + Clip(0, 6), 1x1 Conv [+ Add r] -> blk, expand Conv + Clip(0, 6) -> y.
    extra: another reader of blk: "relu" (a Relu node), "output" (blk a graph output), "subgraph"
    (read inside an If branch)."""
    out = [(s - 1) // stride + 1 for s in size]
    inits = {"wd": r(c, 1, 3, 3), "bd": r(c), "wp": r(project, c, 1, 1, scale=c ** -0.5), "bp": r(project),
             "we": r(expand, project, ex_kernel, ex_kernel, scale=project ** -0.5), "be": r(expand),
             "lo": np.float32(0.0), "hi": np.float32(6.0)}
    nodes = [helper.make_node("Conv", ["x", "wd", "bd"], ["d0"], group=c, pads=[1] * 4, strides=[stride] * 2),
             helper.make_node("Clip", ["d0", "lo", "hi"], ["d"]),
             helper.make_node("Conv", ["d", "wp", "bp"], ["p" if residual else "blk"])]
    inputs = {"x": [batch, c, *size]}
    feeds = {"x": r(batch, c, *size, scale=2.0)}
    if residual:
        nodes.append(helper.make_node("Add", ["p", "r"], ["blk"]))
        inputs["r"] = [batch, project, *out]
        feeds["r"] = r(batch, project, *out)
    nodes += [helper.make_node("Conv", ["blk", "we", "be"], ["e0"], pads=[ex_kernel // 2] * 4,
                               strides=[ex_stride] * 2),
              helper.make_node("Clip", ["e0", "lo", "hi"], ["y"])]
    outputs = ["y"]
    if extra == "relu":
        nodes.append(helper.make_node("Relu", ["blk"], ["blk_relu"]))
        outputs.append("blk_relu")
    elif extra == "output":
        outputs.append("blk")
    elif extra == "subgraph":
        branch = helper.make_graph([helper.make_node("Neg", ["blk"], ["neg"])], "then", [],
                                   [helper.make_tensor_value_info("neg", FLOAT, None)])
        other = helper.make_graph([helper.make_node("Identity", ["blk"], ["same"])], "else", [],
                                  [helper.make_tensor_value_info("same", FLOAT, None)])
        inits["flag"] = np.array(True)
        nodes.append(helper.make_node("If", ["flag"], ["branch"], then_branch=branch, else_branch=other))
        outputs.append("branch")
    if ex_weights_input:
        inputs["we"] = list(inits.pop("we").shape)
        feeds["we"] = r(expand, project, ex_kernel, ex_kernel, scale=project ** -0.5)
    graph = helper.make_graph(
        nodes, "pair", [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, FLOAT, None) for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, feeds


def reference(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def unfused_numpy(model, feeds, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(fusion, "FUSION_PASSES", tuple(p for p in fusion.FUSION_PASSES if p is not fuse_dwpw_expand))
        converted = wgnn.convert(model)
    assert "ConvDwPwExpand" not in [n.op_type for n in converted.graph.nodes]
    return wgnn.InferenceSession(model_to_bytes(converted), providers=["numpy"]).run(None, feeds)


def fused_dispatches(session) -> list:
    return [d for segment in session.session.segments for step, ex in segment.steps
            if step.op.op_type == "ConvDwPwExpand" for d in getattr(ex, "dispatches", [])]


def fused_blocks(session) -> list[tuple[int, int]]:
    return [ex.block for segment in session.session.segments for step, ex in segment.steps
            if step.op.op_type == "ConvDwPwExpand" and hasattr(ex, "block")]




def check(model, feeds, expected_ops, monkeypatch, *, configs=None, block=None):
    converted = wgnn.convert(model)
    assert [n.op_type for n in converted.graph.nodes] == expected_ops
    want = reference(model, feeds)
    data = model_to_bytes(converted)
    got = wgnn.InferenceSession(data, providers=["numpy"]).run(None, feeds)
    for g, u, w in zip(got, unfused_numpy(model, feeds, monkeypatch), want, strict=True):
        np.testing.assert_array_equal(g, u)  # the same Conv steps, the same numbers
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    if configs is None:
        configs = [wgnn.Config(providers=("wgpu", "numpy"), adapter=a["index"]) for a in ADAPTERS]
    for config in configs:
        session = wgnn.InferenceSession(data, config=config)
        result = session.run(None, feeds)
        assert session.report()["fallbacks"] == [], config
        fused = "ConvDwPwExpand" in expected_ops
        assert len(fused_dispatches(session)) == int(fused)
        if fused:
            assert fused_dispatches(session)[0].kernel.path == KERNEL
            assert block is None or fused_blocks(session) == [block], config
        half = config.precision != "fp32"
        for g, w in zip(result, want, strict=True):
            error = float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-6))
            assert error <= (4e-3 if half else 1e-5), f"{config}: max relative error {error:.3g}"
    return converted.graph


CASES = {
    "c6-p4-e10": {"c": 6, "project": 4, "expand": 10},
    "c16-p8-e1-stride2-residual": {"c": 16, "project": 8, "expand": 1, "stride": 2, "residual": True},
    "c24-p24-e96-residual-kept": {"c": 24, "project": 24, "expand": 96, "residual": True, "extra": "relu"},
    "c6-p8-e96-stride2-output-kept": {"c": 6, "project": 8, "expand": 96, "stride": 2, "extra": "output"},
    "c16-p24-e10-batch1-3x5": {"c": 16, "project": 24, "expand": 10, "batch": 1, "size": (3, 5)},
}


def test_intermediates_in_shared_scratch(monkeypatch):
    """With tiny resident limits the depthwise result and the block output both live in the numpy
    backend's shared scratch: the block's range follows the depthwise result's, both past the Conv
    plans' ranges, and the numbers stay the unfused graph's."""
    from wgnn.backends.numpy import composite as numpy_composite
    from wgnn.backends.numpy import conv as numpy_conv

    monkeypatch.setattr(numpy_composite, "RESIDENT_BYTES", 64)
    monkeypatch.setattr(numpy_conv, "RESIDENT_BYTES", 64)
    model, feeds = pair(c=10, project=8, expand=12, residual=True)
    check(model, feeds, ["ConvDwPwExpand"], monkeypatch, configs=[])
    session = wgnn.InferenceSession(wgnn.convert(model), providers=["numpy"])
    session.run(None, feeds)
    (plan,) = [ex.state["dwpw_expand"] for seg in session.session.segments for step, ex in seg.steps
               if step.op.op_type == "ConvDwPwExpand"]
    middle, block = plan.pair.middle_memory, plan.block
    assert middle.shared and block.shared and block.offset >= middle.total
    assert session.session.backends[0].scratch_bytes >= block.total


@pytest.mark.parametrize("options", CASES.values(), ids=CASES.keys())
def test_the_pair_fuses(options, monkeypatch):
    model, feeds = pair(**options)
    extra = options.get("extra")
    ops = ["ConvDwPwExpand"] + (["Unary"] if extra == "relu" else [])
    graph = check(model, feeds, ops, monkeypatch)
    node = graph.nodes[0]
    assert node.outputs == (["y", "blk"] if extra else ["y"])
    assert node.attrs["ex_activation"] == "clip" and node.attrs["ex_activation_beta"] == 6.0
    assert node.inputs[5] == ("r" if options.get("residual") else "")


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
@pytest.mark.parametrize("storage, precision", STORAGE_PRECISIONS)
def test_storages_and_precisions(adapter, storage, precision, monkeypatch):
    """Every block in fp32 buffers; each other storage and precision with two blocks, the
    combinations rotating so that every block meets several (each kernel variant costs a
    compile of ~1 s on lavapipe with a cold driver cache)."""
    f16 = "shader-f16" in ADAPTERS[adapter]["features"]
    if precision != "fp32" and storage == "buffer" and not f16:
        pytest.skip("16-bit buffers need shader-f16")
    pipelines = record_pipelines(monkeypatch)
    model, feeds = pair(c=16, project=24, expand=40, stride=1, residual=True, extra="relu")
    config = wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter, storage=storage, precision=precision)
    for block in blocks_for(storage, precision):
        monkeypatch.setenv(BLOCK_ENV, block_name(block))
        check(model, feeds, ["ConvDwPwExpand", "Unary"], monkeypatch, configs=[config], block=block)
    floats = {float_type for path, float_type, _ in pipelines.values() if path == KERNEL}
    assert floats == {"f16" if precision == "fp16-arith" and f16 else "f32"}


# Odd sizes for every block: 1x1 and 3x5 images, widths and heights no multiple of the block (5x7 at
# stride 1, 9x11 -> 5x6 at stride 2), batch 2, channels no multiple of 4, residual, the block output
# kept (read by another node, or a graph output).
BLOCK_CASES = {
    "c5-p3-e6-1x1-image-residual": {"c": 5, "project": 3, "expand": 6, "size": (1, 1), "residual": True},
    "c6-p8-e10-3x5-kept": {"c": 6, "project": 8, "expand": 10, "size": (3, 5), "extra": "relu"},
    "c7-p5-e13-5x7-batch1": {"c": 7, "project": 5, "expand": 13, "size": (5, 7), "batch": 1},
    "c10-p24-e9-9x11-stride2-residual-output-kept": {"c": 10, "project": 24, "expand": 9, "stride": 2,
                                                     "size": (9, 11), "residual": True, "extra": "output"},
    # 8 project slices, the most a kernel holds (blocks past the quick one specialise on the count)
    "c4-p29-e7-6x6": {"c": 4, "project": 29, "expand": 7, "size": (6, 6)},
}


@pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
@pytest.mark.parametrize("block", BLOCKS, ids=block_name)
@pytest.mark.parametrize("options", BLOCK_CASES.values(), ids=BLOCK_CASES.keys())
def test_every_block(options, block, monkeypatch):
    monkeypatch.setenv(BLOCK_ENV, block_name(block))
    model, feeds = pair(**options)
    check(model, feeds, ["ConvDwPwExpand"] + (["Unary"] if options.get("extra") == "relu" else []), monkeypatch,
          block=block)


@pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
@pytest.mark.parametrize("groups", [2, 3, 8])
@pytest.mark.parametrize("case", ["c5-p3-e6-1x1-image-residual", "c6-p8-e10-3x5-kept",
                                  "c10-p24-e9-9x11-stride2-residual-output-kept"])
def test_expand_groups(case, groups, monkeypatch):
    """Expand groups (real GPUs' choice on small maps, forced here): invocations sharing a pixel
    block split the expand slices (shares that do not divide them, groups with none at 8), and
    only group 0 stores the kept block output; blocks 1x1 and 2x4."""
    monkeypatch.setenv(GROUPS_ENV, str(groups))
    for block in ((1, 1), (2, 4)):
        monkeypatch.setenv(BLOCK_ENV, block_name(block))
        model, feeds = pair(**BLOCK_CASES[case])
        check(model, feeds, ["ConvDwPwExpand"] + (["Unary"] if BLOCK_CASES[case].get("extra") == "relu" else []),
              monkeypatch, block=block)
        session = wgnn.InferenceSession(model_to_bytes(wgnn.convert(model)), providers=["wgpu"])
        session.run(None, feeds)
        assert [ex.expand_groups for segment in session.session.segments for step, ex in segment.steps
                if step.op.op_type == "ConvDwPwExpand"] == [groups]


def test_expand_groups_rule():
    """Real GPUs split MobileNetV2's expand slices in groups (shorter chains, one wave); lavapipe
    keeps one group (the repeated depthwise and project work costs its cores); ConvDwPw has none."""
    from dataclasses import replace

    from wgnn.backends.wgpu.conv_dwpw import BlockShape, choose_layout
    from wgnn.backends.wgpu.conv_paths import CPU_WEIGHTS, GPU_WEIGHTS

    lavapipe = replace(CPU_WEIGHTS, workers=2, workgroup=8)
    for size in (4, 28):
        shape = BlockShape(1, size, size, 1, 36, 8, 48, stores=48)
        assert choose_layout(shape, GPU_WEIGHTS)[1] > 1
        assert choose_layout(shape, lavapipe)[1] == 1
    assert choose_layout(BlockShape(1, 4, 4, 1, 36, 8, 0, stores=8), GPU_WEIGHTS)[1] == 1


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_compiles_nothing(adapter):
    """The first prepare compiles every block's pipeline: resizes that change the block (on
    lavapipe 1x1 at a 1x1 output, 1x2 at 4x4, 2x2 at 3x3 in a batch of 2, 2x4 at 6x6) compile nothing."""
    # (No residual: the converter adds one only where it knows its shape to be the block's.)
    model, _ = pair(c=10, project=8, expand=12, stride=2, extra="output", size=(7, 7), batch=1)
    dims = model.graph.input[0].type.tensor_type.shape.dim  # x: N, H, W symbolic
    for i, name in ((0, "N"), (2, "H"), (3, "W")):
        dims[i].dim_param = name
    data = model_to_bytes(wgnn.convert(model))
    numpy_session = wgnn.InferenceSession(data, providers=["numpy"])
    session = wgnn.InferenceSession(data, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    cache = pipeline_cache(session.session.backends[0].context)
    compiled, blocks = None, set()
    for batch, size in ((1, 1), (1, 7), (2, 5), (1, 12), (1, 7)):
        feeds = {"x": r(batch, 10, size, size, scale=2.0)}
        for got, want in zip(session.run(None, feeds), numpy_session.run(None, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled, "a resize compiled pipelines"
        blocks.update(fused_blocks(session))
    if fused_dispatches(session)[0].kernel.workgroup == 8:  # the sizes above are picked for 8-lane workgroups
        assert blocks == set(BLOCKS)


REFUSED = {
    "expand 3x3": {"ex_kernel": 3},
    "expand stride 2": {"ex_stride": 2},
    "expand weights at run time": {"ex_weights_input": True},
}


@pytest.mark.parametrize("options", REFUSED.values(), ids=REFUSED.keys())
def test_refusals_keep_the_conv(options, monkeypatch):
    model, feeds = pair(c=6, project=4, expand=10, **options)
    check(model, feeds, ["ConvDwPw", "Conv"], monkeypatch)


def test_block_read_in_a_subgraph_stays(monkeypatch):
    model, feeds = pair(c=6, project=4, expand=10, extra="subgraph")
    converted = wgnn.convert(model)
    ops = [n.op_type for n in converted.graph.nodes]
    assert "ConvDwPwExpand" not in ops and "ConvDwPw" in ops and "Conv" in ops
    got = wgnn.InferenceSession(model_to_bytes(converted), providers=["numpy"]).run(None, feeds)
    for g, w in zip(got, reference(model, feeds), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_zoo_mobilenetv2_loses_dispatches(monkeypatch):
    model = mobilenetv2(batch=1)
    graph = wgnn.convert(model).graph
    ops = [n.op_type for n in graph.nodes]
    assert ops == ["Conv", *["ConvDwPwExpand"] * 5, "GlobalPoolMatMul"]  # 12 dispatches -> 7
    feeds = example_inputs(model, seed=0)
    want = reference(model, feeds)
    got = wgnn.InferenceSession(model_to_bytes(wgnn.convert(model)), providers=["numpy"]).run(None, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


def test_shape_errors():
    x = r(1, 6, 5, 5)
    init = {"wd": r(6, 1, 3, 3), "wp": r(4, 6, 1, 1), "we": r(10, 4, 1, 1), "be": r(10)}

    def error(**changes):
        values = {**init, **changes}
        node = Node("ConvDwPwExpand", ["x", "wd", "", "wp", "", "", "we", "be"], ["y"], {"pads": [1] * 4},
                    name="fused")
        graph = Graph([node], [TensorInfo("x", "float32", x.shape)], [TensorInfo("y", "float32")], values)
        with pytest.raises(ShapeError) as info:
            wgnn.InferenceSession(Model(graph), providers=["numpy"]).run(None, {"x": x})
        return str(info.value)

    assert "expand weight must be (C_ex, 4, 1, 1)" in error(we=r(10, 5, 1, 1))
    assert "expand weight must be (C_ex, 4, 1, 1)" in error(we=r(10, 4, 3, 3))
    assert "expand bias must be float32 of shape (10,)" in error(be=r(4))
    assert "pointwise weight must be" in error(wp=r(4, 5, 1, 1))


@needs_gpu
def test_more_expand_channels_than_the_kernel_runs_fall_back():
    """The IR op takes any expand width; past 256 channels the GPU kernel refuses it (numpy runs it)."""
    x = r(1, 6, 5, 5)
    init = {"wd": r(6, 1, 3, 3), "wp": r(4, 6, 1, 1), "we": r(260, 4, 1, 1)}
    node = Node("ConvDwPwExpand", ["x", "wd", "", "wp", "", "", "we"], ["y", "z"], {"pads": [1] * 4}, name="wide")
    graph = Graph([node], [TensorInfo("x", "float32", x.shape)], [TensorInfo("y", "float32"),
                                                                  TensorInfo("z", "float32")], init)
    want = wgnn.InferenceSession(Model(graph), providers=["numpy"]).run(None, {"x": x})
    session = wgnn.InferenceSession(Model(graph), config=wgnn.Config(providers=("wgpu", "numpy"),
                                                                     adapter=ADAPTERS[0]["index"]))
    for g, w in zip(session.run(None, {"x": x}), want, strict=True):
        np.testing.assert_array_equal(g, w)
    (fallback,) = session.report()["fallbacks"]
    assert any("at most 256" in why for why in fallback["reasons"])
