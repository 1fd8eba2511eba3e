"""Attention (engine/ops/attention.py), made by the converter from MatMul -> Softmax -> MatMul
(tools/convert/fusion_matmul.py, fuse_attention): the converted graph, and the numbers on numpy and
every GPU adapter (the kernel's vec4 and scalar reads, row blocks that do not divide the queries,
masks that broadcast or hold -inf, cross-attention) against onnxruntime; the patterns it leaves
alone; shape errors; and a resize that compiles nothing."""
import numpy as np
import pytest
from helpers import check_model, gpu_adapters, record_pipelines, session_for
from onnx import TensorProto, helper, numpy_helper
from wgnn.engine.errors import ShapeError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models import zoo

import wgnn

rng = np.random.default_rng(5)
ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def attention_model(b, s_q, s_k, heads, d, dv=None, *, mask=None, merge=True, scale=None, k_as_heads=False,
                    symbolic=False):
    """Multi-head attention as exporters write it: Q, K, V of (B, S, heads * d) split into heads
    by Reshape + Transpose, scores (divided by sqrt(d)) plus an optional mask of shape `mask`,
    Softmax, context, heads merged back by Transpose (+ Reshape with `merge`). k_as_heads: K comes
    in already as (B, heads, d, S_k), read as it is (no Transpose, so not contiguous along d).
    symbolic: the sequence lengths are dims "S" (and the Reshapes keep them with 0 / -1)."""
    dv = dv or d
    nodes = [helper.make_node("Reshape", ["q", "q_shape"], ["q4"]),
             helper.make_node("Reshape", ["v", "v_shape"], ["v4"]),
             helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3])]
    if k_as_heads:
        key = "k"
    else:
        nodes += [helper.make_node("Reshape", ["k", "k_shape"], ["k4"]),
                  helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1])]
        key = "kt"
    nodes += [helper.make_node("MatMul", ["qt", key], ["scores"]),
              helper.make_node("Div", ["scores", "scale"], ["scaled"])]
    scores = "scaled"
    if mask is not None:
        nodes.append(helper.make_node("Add", ["scaled", "mask"], ["masked"]))
        scores = "masked"
    nodes += [helper.make_node("Softmax", [scores], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "vt"], ["context"]),
              helper.make_node("Transpose", ["context"], ["merged" if merge else "y"], perm=[0, 2, 1, 3])]
    if merge:
        nodes.append(helper.make_node("Reshape", ["merged", "y_shape"], ["y"]))
    k_shape = [b, heads, d, s_k] if k_as_heads else [b, s_k, heads * d]
    inputs = {"q": [b, s_q, heads * d], "k": k_shape, "v": [b, s_k, heads * dv]}
    if mask is not None:
        inputs["mask"] = list(mask)
    feeds = {n: r(*s) for n, s in inputs.items()}
    if symbolic:
        inputs = {n: ["S" if dim == s_q else dim for dim in shape] for n, shape in inputs.items()}
        s_q = s_k = -1
    constants = {"scale": np.float32(scale or np.sqrt(d)), "q_shape": np.array([0, s_q, heads, d], np.int64),
                 "k_shape": np.array([0, s_k, heads, d], np.int64), "v_shape": np.array([0, s_k, heads, dv], np.int64),
                 "y_shape": np.array([0, s_q, heads * dv], np.int64)}
    graph = helper.make_graph(nodes, "attention",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, feeds


def attention_nodes(model) -> list[Node]:
    return [n for n in wgnn.convert(model).graph.nodes if n.op_type == "Attention"]


@pytest.mark.parametrize("b, s_q, s_k, heads, d, dv, mask", [
    (2, 5, 5, 3, 8, None, (2, 1, 1, 5)),  # vec4 reads; 5 queries: a row block past the end
    (1, 8, 8, 2, 6, None, (1, 1, 8, 8)),  # head of 6: scalar reads, lanes past it zero
    (2, 4, 7, 2, 8, 12, (2, 1, 1, 7)),  # cross-attention (S_q != S_k), D_v != D
    (1, 9, 9, 1, 64, None, None),  # the widest head fused, no mask
])
def test_attention_becomes_one_op(b, s_q, s_k, heads, d, dv, mask):
    model, feeds = attention_model(b, s_q, s_k, heads, d, dv, mask=mask)
    (node,) = attention_nodes(model)
    assert len(node.inputs) == (4 if mask else 3) and node.attrs["perm_y"] == [0, 2, 1, 3]
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["rows", "tiled"])
@pytest.mark.parametrize("tokens", [6, 40])  # tiled: one tile of 16 keys not full; three, the last not full
def test_causal_mask_with_minus_infinity(variant, tokens, monkeypatch):
    """-inf above the diagonal: those keys weigh exactly nothing (the first row only sees itself,
    and in the tiled kernel whole tiles of its keys score -inf)."""
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", variant)
    model, feeds = attention_model(2, tokens, tokens, 2, 4, mask=(1, 1, tokens, tokens))
    feeds["mask"] = np.triu(np.full((tokens, tokens), -np.inf, np.float32), 1)[None, None]
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)


def test_keys_not_contiguous_along_the_head_are_read_one_by_one():
    model, feeds = attention_model(2, 5, 6, 2, 8, mask=(2, 1, 1, 6), k_as_heads=True)
    assert len(attention_nodes(model)) == 1
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)


def test_patterns_left_alone():
    """Probabilities read elsewhere, a head wider than 256, a softmax over another axis."""
    model, feeds = attention_model(1, 4, 4, 2, 8)
    model.graph.output.append(helper.make_tensor_value_info("probs", TensorProto.FLOAT, None))
    assert attention_nodes(model) == []
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)
    model, _ = attention_model(1, 4, 4, 1, 260)
    assert attention_nodes(model) == []
    model, feeds = attention_model(1, 4, 4, 2, 8)
    next(n for n in model.graph.node if n.op_type == "Softmax").attribute[0].i = 2
    assert attention_nodes(model) == []
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)


def test_zoo_bert_runs_attention_as_one_op():
    model = zoo.build("bert")
    assert len(attention_nodes(model)) == 2
    if ADAPTERS:
        feeds = zoo.example_inputs(model, 2, seq=5)
        session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
        session.run(None, feeds)
        assert session.report()["fallbacks"] == []
        dispatches = sum(len(getattr(ex, "dispatches", [])) for seg in session.session.segments for _, ex in seg.steps)
        assert dispatches == 17  # 22 before the Attention op, 18 before the embeddings Add joined their LayerNorm


def ir_attention(shapes: dict, attrs: dict) -> Model:
    inputs = [TensorInfo(n, "float32", s) for n, s in shapes.items()]
    node = Node("Attention", list(shapes), ["y"], attrs, name="att")
    return Model(Graph([node], inputs, [TensorInfo("y", "float32")]))


@pytest.mark.parametrize("shapes, attrs, message", [
    ({"q": (2, 3, 4), "k": (3, 4, 5), "v": (2, 5, 4)}, {}, "batch axes differ"),
    ({"q": (2, 3, 4), "k": (2, 5, 5), "v": (2, 5, 4)}, {}, "inner dimensions differ"),
    ({"q": (2, 3, 4), "k": (2, 4, 5), "v": (2, 5, 4)}, {"perm_y": [0, 0, 1]}, "perm_y"),
    ({"q": (2, 3, 4), "k": (2, 4, 5), "v": (2, 5, 4), "m": (2, 2, 3, 5)}, {}, "does not broadcast to the scores"),
])
def test_shape_errors(shapes, attrs, message):
    feeds = {n: r(*s) for n, s in shapes.items()}
    with pytest.raises(ShapeError, match=message) as info:
        wgnn.InferenceSession(ir_attention(shapes, attrs), providers=["numpy"]).run(None, feeds)
    assert '"att"' in str(info.value)


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_compiles_nothing(adapter, monkeypatch):
    """Another sequence length is other params, not another kernel."""
    model, feeds = attention_model(1, 8, 8, 2, 8, mask=(1, 1, 1, 8), symbolic=True)
    assert len(attention_nodes(model)) == 1
    seen = record_pipelines(monkeypatch)
    session = wgnn.InferenceSession(model.SerializeToString(), config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    session.run(None, feeds)
    compiled = len(seen)
    shorter = {"q": r(1, 5, 16), "k": r(1, 5, 16), "v": r(1, 5, 16), "mask": r(1, 1, 1, 5)}
    got = session.run(None, shorter)[0]
    assert len(seen) == compiled
    want = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, shorter)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_gpu
@pytest.mark.parametrize("rows", [1, 4])
def test_rows_per_invocation(rows, monkeypatch):
    """The kernel with one query row per invocation (what real GPUs get) and with 4 (CPU adapters),
    whatever the adapter here."""
    from wgnn.backends.wgpu import attention

    monkeypatch.setattr(attention, "rows_per_invocation", lambda cpu: rows)
    model, feeds = attention_model(2, 7, 6, 2, 12, 8, mask=(2, 1, 7, 6))
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5,
                backends=[f"wgpu:{a['index']}" for a in ADAPTERS])


@needs_gpu
@pytest.mark.parametrize("variant", ["rows", "tiled"])
@pytest.mark.parametrize("b, s_q, s_k, heads, d, dv, mask, k_as_heads", [
    (2, 70, 37, 2, 8, None, (2, 1, 70, 37), False),  # 2 groups of 64 rows, 3 tiles of 16 keys (the last of 5)
    (1, 9, 17, 1, 6, 12, (1, 1, 1, 17), False),  # heads of 6 and 12: read one by one, lanes past them zero
    (2, 5, 6, 2, 8, None, None, True),  # K not contiguous along the head
    (1, 3, 20, 1, 64, None, None, False),  # the widest head: 16 vec4s per tile row
])
def test_kernel_variants(variant, b, s_q, s_k, heads, d, dv, mask, k_as_heads, monkeypatch):
    """Both kernels (rows: CPU adapters; tiled, with workgroup memory: real GPUs) on every adapter
    here, against onnxruntime."""
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", variant)
    model, feeds = attention_model(b, s_q, s_k, heads, d, dv, mask=mask, k_as_heads=k_as_heads)
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5,
                backends=[f"wgpu:{a['index']}" for a in ADAPTERS])
    session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
    session.run(None, feeds)
    paths = [d.kernel.path for seg in session.session.segments for _, ex in seg.steps
             for d in getattr(ex, "dispatches", [])]
    assert paths == [f"matmul/{'attention' if variant == 'rows' else 'attention_tiled'}.wgsl"]


@needs_gpu
@pytest.mark.parametrize("variant", ["rows", "tiled"])
@pytest.mark.parametrize("b, s_q, s_k, heads, d, dv, mask", [
    (2, 5, 19, 2, 128, None, (2, 1, 1, 19)),  # tiled: 8 keys per tile; rows: the three ops
    (1, 6, 16, 1, 72, 200, (1, 1, 6, 16)),  # D != D_v: tiles of 7 keys (the last of 2)
])
def test_wide_heads(variant, b, s_q, s_k, heads, d, dv, mask, monkeypatch):
    """Heads past the rows kernel's 64: one tiled kernel with fewer keys per tile, or the scores
    MatMul, Softmax and context MatMul through scratch buffers, within the one Attention step."""
    from wgnn.backends.wgpu.attention import tile_keys

    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", variant)
    model, feeds = attention_model(b, s_q, s_k, heads, d, dv, mask=mask)
    assert len(attention_nodes(model)) == 1
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)
    session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
    session.run(None, feeds)
    assert session.report()["fallbacks"] == []
    (step_dispatches,) = [[d.kernel.path for d in ex.dispatches] for seg in session.session.segments
                          for _, ex in seg.steps if getattr(ex, "dispatches", None)]
    if variant == "tiled":
        assert step_dispatches == ["matmul/attention_tiled.wgsl"]
        assert tile_keys(d, dv or d) == (8 if d == 128 else 7)  # 7: 16 * (18 + 50) bytes a key
    else:
        assert step_dispatches[1].startswith("softmax/softmax") and len(step_dispatches) == 3
        assert step_dispatches[0] == step_dispatches[2] and step_dispatches[0].startswith("matmul/matmul_")


@needs_gpu
def test_wide_heads_share_their_scratch_buffers(monkeypatch):
    """Two Attention steps of one size run as three ops each through one pair of buffers."""
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", "rows")
    shapes = {"q": (2, 5, 96), "k": (2, 7, 96), "v": (2, 7, 96)}
    attrs = {"trans_k": 1, "alpha": 0.1}
    nodes = [Node("Attention", ["q", "k", "v"], ["a"], attrs, name="first"),
             Node("Attention", ["a", "k", "v"], ["y"], attrs, name="second")]
    model = Model(Graph(nodes, [TensorInfo(n, "float32", s) for n, s in shapes.items()], [TensorInfo("y", "float32")]))
    feeds = {n: r(*s) for n, s in shapes.items()}
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0]
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=ADAPTERS[0]["index"]))
    np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)
    backend = session.session.backends[0]
    assert sorted(name for name in backend.packed if name.startswith("scratch/")) == [
        "scratch/attention probabilities/18", "scratch/attention scores/18"]  # 2 x 5 x 7 floats in vec4s


def attention_paths(session) -> list[str]:
    """The kernels of the session's Attention steps."""
    return [d.kernel.path for seg in session.session.segments for step, ex in seg.steps
            if step.op.op_type == "Attention" for d in getattr(ex, "dispatches", None) or []]


@needs_gpu
@pytest.mark.parametrize("b, s_q, s_k, heads, d, dv, mask, split, splits", [
    (2, 70, 37, 2, 8, None, (2, 1, 70, 37), 16, 3),  # the last split of 5 keys; 2 row groups
    (1, 9, 40, 1, 6, 12, (1, 1, 1, 40), 8, 5),  # scalar reads; D != D_v
    (1, 3, 20, 1, 64, None, None, 7, 3),  # the widest head; splits not a whole number of tiles
    (2, 5, 6, 2, 8, None, None, 1, 6),  # a key per split
])
def test_split_keys(b, s_q, s_k, heads, d, dv, mask, split, splits, monkeypatch):
    """The tiled kernel over splits of the keys into partials, then the merge, against onnxruntime."""
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", "tiled")
    monkeypatch.setenv("WGNN_ATTENTION_SPLIT", str(split))
    model, feeds = attention_model(b, s_q, s_k, heads, d, dv, mask=mask)
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5,
                backends=[f"wgpu:{a['index']}" for a in ADAPTERS])
    session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
    session.run(None, feeds)
    assert attention_paths(session) == ["matmul/attention_tiled.wgsl", "matmul/attention_merge.wgsl"]
    (dispatch,) = [d for seg in session.session.segments for _, ex in seg.steps
                   for d in getattr(ex, "dispatches", None) or [] if d.kernel.path.endswith("tiled.wgsl")]
    assert dispatch.groups == (b * heads * -(-s_q // 64) * splits, 1, 1)  # workgroups of 64 rows x splits


@needs_gpu
def test_split_keys_with_masked_splits(monkeypatch):
    """A causal mask of -inf: the first rows' later splits see no key at all and weigh nothing;
    a row whose keys are all -inf is NaN, as the unsplit kernel and onnxruntime give."""
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", "tiled")
    monkeypatch.setenv("WGNN_ATTENTION_SPLIT", "4")
    model, feeds = attention_model(2, 12, 12, 2, 8, mask=(1, 1, 12, 12))
    causal = np.triu(np.full((12, 12), -np.inf, np.float32), 1)
    causal[5] = -np.inf
    feeds["mask"] = causal[None, None]
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0]
    assert np.isnan(want[:, 5]).all() and not np.isnan(np.delete(want, 5, axis=1)).any()
    for adapter in ADAPTERS:
        got = session_for(model, f"wgpu:{adapter['index']}").run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_gpu
def test_split_keys_resize_compiles_nothing(monkeypatch):
    """Where a split may run, a resize between split and whole keys compiles nothing."""
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", "tiled")
    monkeypatch.setenv("WGNN_ATTENTION_SPLIT", "16")
    model, feeds = attention_model(1, 8, 8, 2, 8, mask=(1, 1, 1, 8), symbolic=True)
    seen = record_pipelines(monkeypatch)
    session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
    session.run(None, feeds)  # 8 keys: one split
    assert attention_paths(session) == ["matmul/attention_tiled.wgsl"]
    compiled = len(seen)
    longer = {"q": r(1, 40, 16), "k": r(1, 40, 16), "v": r(1, 40, 16), "mask": r(1, 1, 1, 40)}
    got = session.run(None, longer)[0]
    assert len(seen) == compiled
    assert attention_paths(session) == ["matmul/attention_tiled.wgsl", "matmul/attention_merge.wgsl"]
    want = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, longer)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_gpu
@pytest.mark.parametrize("records, splits", [
    (2, 2),  # 2 splits of 32 keys, not 8 of 8
    (1, 1),  # not even two splits fit: whole keys
])
def test_split_keys_fit_one_binding(records, splits, monkeypatch):
    """Partials past the adapter's largest storage binding take fewer, longer splits."""
    from wgnn.backends.wgpu.backend import WgpuBackend

    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", "tiled")
    monkeypatch.setenv("WGNN_ATTENTION_SPLIT", "8")
    record = 2 * 64 * (8 + 2) * 4  # one split's partials (batch entries x rows x (D_v + 2) floats): past Q, K, V
    original = WgpuBackend.__init__

    def small_bindings(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.max_binding = records * record

    monkeypatch.setattr(WgpuBackend, "__init__", small_bindings)
    model, feeds = attention_model(1, 64, 64, 2, 8, mask=(1, 1, 1, 64))
    session = session_for(model, f"wgpu:{ADAPTERS[0]['index']}")
    got = session.run(None, feeds)[0]
    assert session.report()["fallbacks"] == []
    merge = ["matmul/attention_merge.wgsl"] if splits > 1 else []
    assert attention_paths(session) == ["matmul/attention_tiled.wgsl", *merge]
    (tiled,) = [d for seg in session.session.segments for step, ex in seg.steps if step.op.op_type == "Attention"
                for d in ex.dispatches if d.kernel.path.endswith("tiled.wgsl")]
    assert tiled.groups == (2 * splits, 1, 1)  # 2 heads of one row group, x splits
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_split_keys_rule(monkeypatch):
    """Real GPUs split the keys of few workgroups (BERT-base's 12 x 512 queries: 96) into whole
    tiles until SPLIT_WORKGROUPS run; CPU adapters and well-filled GPUs do not; the variable over both."""
    from types import SimpleNamespace

    from wgnn.backends.wgpu.attention import SPLIT_MIN_KEYS, SPLIT_WORKGROUPS, split_keys
    from wgnn.engine.errors import WgnnError

    cpu, gpu = (SimpleNamespace(info=SimpleNamespace(adapter_type=t)) for t in ("CPU", "DiscreteGPU"))
    monkeypatch.delenv("WGNN_ATTENTION_SPLIT", raising=False)
    assert split_keys(gpu, 96, 512, 16) == 128  # 4 splits of 128 keys: 384 workgroups
    assert split_keys(gpu, 8, 128, 16) == 16  # 4 heads of 128: one tile per split, 8 splits
    assert split_keys(gpu, 16, 1024, 16) == 48  # 22 splits (352 workgroups): 47 keys, 3 tiles
    assert split_keys(gpu, 200, 1000, 16) == 512  # 2 splits reach SPLIT_WORKGROUPS
    assert split_keys(gpu, 96, 512, 7) == 126 + 7  # tiles of 7 keys: 128 rounded up to 133
    assert split_keys(gpu, SPLIT_WORKGROUPS, 4096, 16) == 0
    assert split_keys(gpu, 96, 2 * SPLIT_MIN_KEYS - 1, 16) == 0
    assert split_keys(cpu, 96, 512, 16) == 0
    monkeypatch.setenv("WGNN_ATTENTION_SPLIT", "100")
    assert (split_keys(cpu, 96, 512, 16), split_keys(gpu, 96, 100, 16)) == (100, 0)
    monkeypatch.setenv("WGNN_ATTENTION_SPLIT", "0")
    assert split_keys(gpu, 96, 512, 16) == 0
    monkeypatch.setenv("WGNN_ATTENTION_SPLIT", "many")
    with pytest.raises(WgnnError, match="WGNN_ATTENTION_SPLIT='many': expected keys per split"):
        split_keys(gpu, 96, 512, 16)


def test_kernel_variant_rule(monkeypatch, tmp_path):
    """By adapter type; what wgnn tune stored for the adapter; the variable over both."""
    from types import SimpleNamespace

    from wgnn.backends.wgpu.attention import kernel_variant
    from wgnn.backends.wgpu.tuning import save_entry
    from wgnn.engine.errors import WgnnError

    def context(adapter_type):
        info = SimpleNamespace(name=f"{adapter_type} adapter", backend="Vulkan", driver="1", adapter_type=adapter_type)
        return SimpleNamespace(info=info, name=info.name)

    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WGNN_ATTENTION_VARIANT", raising=False)
    cpu, gpu = context("CPU"), context("DiscreteGPU")
    assert (kernel_variant(cpu), kernel_variant(gpu)) == ("rows", "tiled")
    save_entry(gpu.info, {"variants": {"attention": "rows"}})
    assert (kernel_variant(cpu), kernel_variant(gpu)) == ("rows", "rows")
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", "tiled")
    assert (kernel_variant(cpu), kernel_variant(gpu)) == ("tiled", "tiled")
    monkeypatch.setenv("WGNN_ATTENTION_VARIANT", "flash")
    with pytest.raises(WgnnError, match="WGNN_ATTENTION_VARIANT='flash': expected one of rows, tiled"):
        kernel_variant(cpu)


@pytest.mark.parametrize("q, k, v, k_perm", [
    ((3, 7, 8), (3, 5, 8), (3, 5, 6), [0, 2, 1]),  # one head: rank 3, K transposed by its Transpose
    ((7, 8), (5, 8), (5, 4), [1, 0]),  # no batch axis at all
])
def test_attention_without_heads(q, k, v, k_perm):
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=k_perm),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    shapes = {"q": q, "k": k, "v": v}
    graph = helper.make_graph(nodes, "plain",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (node,) = attention_nodes(model)
    assert node.attrs["perm_k"] == k_perm and len(node.inputs) == 3
    check_model(model, {n: r(*s) for n, s in shapes.items()}, reference="ort", rtol=1e-4, atol=1e-5)
