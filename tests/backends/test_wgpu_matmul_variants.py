"""Every MatMul kernel variant (WGNN_MATMUL_VARIANT=blocked|subgroup|tiled) on every adapter against
numpy: odd M/N/K, K = 1, vectors, batch broadcasting, constant B (repacked at prepare, read as vec4)
and run-time B (read as vec4 only where its strides allow), fused bias and activation, integers;
plus the variant rule, the override and its errors."""
import math

import numpy as np
import pytest
from helpers import Const, check_op, gpu_adapters, session_for
from onnx import TensorProto, helper, numpy_helper

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
TOL = {"rtol": 1e-4, "atol": 1e-5}
VARIANTS = ["blocked", "subgroup", "tiled", "tiled-128"]  # tiled: the 32x32 tiles these shapes get
rng = np.random.default_rng(7)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(params=VARIANTS)
def variant(request, monkeypatch):
    kernel, _, tile = request.param.partition("-")
    monkeypatch.setenv("WGNN_MATMUL_VARIANT", kernel)
    if tile:
        monkeypatch.setenv("WGNN_MATMUL_TILE", tile)
    return request.param


def kernel_paths(session) -> list[str]:
    return [d.kernel.path for s in session.session.segments for _, ex in s.steps for d in getattr(ex, "dispatches", [])]


SHAPES = [
    ((37, 45), (45, 70)),  # ragged 8x8 blocks, one full strip of 8 blocks and a narrow one
    ((5, 3), (3, 6)),  # smaller than one block
    ((9, 1), (1, 13)),  # K = 1
    ((45,), (45, 11)),  # vector @ matrix
    ((6, 21), (21,)),  # matrix @ vector
    ((7,), (7,)),  # dot product
    ((2, 1, 19, 12), (3, 12, 16)),  # broadcast batch axes; N a multiple of 4 (vec4 B at run time)
    ((3, 10, 9), (9, 8)),  # batches whose blocks do not start at a multiple of 8 lanes
    ((1, 70, 3), (3, 130)),  # many row blocks, wide N: full strips with shared A rows
]


@pytest.mark.parametrize("a, b", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_runtime_b(variant, a, b):
    check_op("MatMul", [r(*a), r(*b)], backends=GPUS, **TOL)


@pytest.mark.parametrize("a, b", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_constant_b(variant, a, b):
    """A constant B is repacked (blocked, subgroup) into rows of 8-column blocks."""
    check_op("MatMul", [r(*a), Const(r(*b))], backends=GPUS, **TOL)


def test_constant_batched_b_broadcast(variant):
    check_op("MatMul", [r(2, 1, 6, 5), Const(r(3, 5, 12))], backends=GPUS, **TOL)
    check_op("MatMul", [r(6, 5), Const(r(2, 3, 5, 9))], backends=GPUS, **TOL)


@pytest.mark.parametrize("trans_a, trans_b", [(0, 1), (1, 0), (1, 1)])
def test_gemm_transposes_bias(variant, trans_a, trans_b):
    a = r(13, 11) if trans_a else r(11, 13)
    b = r(10, 13) if trans_b else r(13, 10)
    attrs = {"transA": trans_a, "transB": trans_b, "alpha": 0.75, "beta": -1.5}
    check_op("Gemm", [a, Const(b), Const(r(10))], attrs, opset=13, backends=GPUS, **TOL)
    check_op("Gemm", [a, b, r(11, 1)], attrs, opset=13, backends=GPUS, **TOL)


def test_integers(variant):
    a = rng.integers(-4, 5, (3, 7, 9)).astype(np.int32)
    b = rng.integers(-4, 5, (9, 12)).astype(np.int32)
    check_op("MatMul", [a, b], backends=GPUS)
    check_op("MatMul", [a, Const(b)], backends=GPUS)
    check_op("MatMul", [a.astype(np.int64), Const(b.astype(np.int64))], backends=GPUS)


def test_k0_and_empty(variant):
    check_op("Gemm", [r(5, 0), Const(r(0, 6)), Const(r(6))], {"beta": 2.0}, opset=13, backends=GPUS, **TOL)
    check_op("MatMul", [r(0, 4), Const(r(4, 3))], backends=GPUS, **TOL)


def _linear_model(k: int, n: int | str, relu: bool = True):
    """x [M, k] @ w + bias, then Relu: converts to one MatMul with a fused bias and activation."""
    w = r(k, n) if isinstance(n, int) else None
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "bias"], ["z"])]
    nodes.append(helper.make_node("Relu" if relu else "Identity", ["z"], ["out"]))
    inits = [numpy_helper.from_array(r(n), "bias")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])]
    if w is None:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [k, n]))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, w, numpy_helper.to_array(inits[0])


def test_fused_bias_relu_and_resize(variant):
    """One fused MatMul; a resize to other row counts compiles no new pipeline."""
    from wgnn.backends.wgpu.loader import pipeline_cache

    model, w, bias = _linear_model(19, 21)
    converted = wgnn.convert(model)
    assert [n.op_type for n in converted.graph.nodes] == ["MatMul"]
    for backend in GPUS:
        session = session_for(converted, backend)
        session.run(None, {"x": r(3, 19)})
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = cache.compiled
        for rows in (1, 8, 17):
            x = r(rows, 19)
            np.testing.assert_allclose(session.run(None, {"x": x})[0], np.maximum(x @ w + bias, 0), **TOL)
        assert cache.compiled == compiled


def test_runtime_b_vec4_and_scalar_paths_share_a_pipeline():
    """A run-time B switches between its vec4 and scalar reads by a parameter, not a new pipeline."""
    from wgnn.backends.wgpu.loader import pipeline_cache

    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, 6])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [6, "N"])
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g", [a, b],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = wgnn.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))
    for backend in GPUS:
        session = session_for(model, backend)
        av = r(5, 6)
        session.run(None, {"a": av, "b": r(6, 8)})
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = cache.compiled
        for n in (7, 12, 3):
            bv = r(6, n)
            np.testing.assert_allclose(session.run(None, {"a": av, "b": bv})[0], av @ bv, **TOL)
        assert cache.compiled == compiled


def _paths_for(variant_env: str | None, backend: str, monkeypatch) -> list[str]:
    if variant_env is None:
        monkeypatch.delenv("WGNN_MATMUL_VARIANT", raising=False)
    else:
        monkeypatch.setenv("WGNN_MATMUL_VARIANT", variant_env)
    model, *_ = _linear_model(5, 6)
    session = session_for(wgnn.convert(model), backend)
    session.run(None, {"x": r(2, 5)})
    return kernel_paths(session)


def test_variant_rule_and_override(monkeypatch):
    """CPU adapters: subgroup where the adapter has subgroups, else blocked; the override wins, and
    a forced subgroup kernel on an adapter without subgroups runs the blocked one."""
    for info in gpu_adapters():
        backend = f"wgpu:{info['index']}"
        has_subgroups = "subgroup" in info["features"]
        default = _paths_for(None, backend, monkeypatch)
        if info["adapter_type"] == "CPU":
            want = "matmul_subgroup" if has_subgroups else "matmul_blocked"
        else:
            want = "matmul_tiled"
        assert default == [f"matmul/{want}.wgsl"], info["name"]
        assert _paths_for("tiled", backend, monkeypatch) == ["matmul/matmul_tiled.wgsl"]
        assert _paths_for("blocked", backend, monkeypatch) == ["matmul/matmul_blocked.wgsl"]
        forced = _paths_for("subgroup", backend, monkeypatch)
        assert forced == ["matmul/matmul_subgroup.wgsl" if has_subgroups else "matmul/matmul_blocked.wgsl"]


def test_tuned_variant_is_followed(monkeypatch, tmp_path):
    """What wgnn tune stored for an adapter picks its kernel where no variable forces one."""
    from wgnn.backends.wgpu.context import get_context
    from wgnn.backends.wgpu.tuning import save_entry

    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    for info in gpu_adapters():
        save_entry(get_context(info["index"]).info, {"variants": {"matmul": "tiled"}})
        assert _paths_for(None, f"wgpu:{info['index']}", monkeypatch) == ["matmul/matmul_tiled.wgsl"]
        assert _paths_for("blocked", f"wgpu:{info['index']}", monkeypatch) == ["matmul/matmul_blocked.wgsl"]


@pytest.mark.parametrize("tile", ["32", "128"])
@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 1)])
def test_tiled_kernel_several_tiles(monkeypatch, tile, trans_a, trans_b):
    """Both tile shapes over several tiles along M, N and the batch, ragged at every edge, K not a
    multiple of the staged slice; A and B staged along their contiguous axis whether transposed or
    not; bias, alpha and beta in the epilogue."""
    monkeypatch.setenv("WGNN_MATMUL_VARIANT", "tiled")
    monkeypatch.setenv("WGNN_MATMUL_TILE", tile)
    a = r(21, 133) if trans_a else r(133, 21)
    b = r(259, 21) if trans_b else r(21, 259)
    attrs = {"transA": trans_a, "transB": trans_b, "alpha": 0.5, "beta": 2.0}
    check_op("Gemm", [a, b, r(259)], attrs, opset=13, backends=GPUS, **TOL)
    check_op("MatMul", [r(2, 1, 70, 37), r(3, 37, 150)], backends=GPUS, **TOL)


def test_tile_rule(monkeypatch):
    """128x128 tiles where a product has at least LARGE_TILE_MIN_TILES of them, else 32x32; the
    variable forces one; a resize between them compiles nothing (both are compiled at prepare)."""
    from wgnn.backends.wgpu.loader import pipeline_cache
    from wgnn.backends.wgpu.matmul import LARGE_TILE_MIN_TILES, choose_tile, tile_settings

    class Shape:  # what choose_tile reads of a MatMulLayout
        def __init__(self, batch, m, n):
            self.batch_count, self.m, self.n = batch, m, n

    tiles = math.isqrt(LARGE_TILE_MIN_TILES - 1) + 1  # the fewest tiles per side whose square is enough
    side = 128 * tiles
    assert choose_tile(Shape(1, side, side)) == 128
    assert choose_tile(Shape(1, side - 128, side - 128)) == 32
    assert choose_tile(Shape(LARGE_TILE_MIN_TILES, 100, 100)) == 128
    monkeypatch.setenv("WGNN_MATMUL_TILE", "32")
    assert choose_tile(Shape(1, side, side)) == 32
    monkeypatch.setenv("WGNN_MATMUL_TILE", "64")
    with pytest.raises(wgnn.WgnnError, match="WGNN_MATMUL_TILE='64'"):
        choose_tile(Shape(1, 8, 8))
    assert tile_settings(128) == ({"TILE": "128", "TM": "8", "KT": "8"}, {"WG": 256})
    assert tile_settings(32) == ({"TILE": "32", "TM": "4", "KT": "16"}, {"WG": 64})

    monkeypatch.delenv("WGNN_MATMUL_TILE")
    monkeypatch.setenv("WGNN_MATMUL_VARIANT", "tiled")
    monkeypatch.setattr("wgnn.backends.wgpu.matmul.LARGE_TILE_MIN_TILES", 4)  # 256 x 256 takes 128s
    model, w, bias = _linear_model(19, 300)
    session = session_for(wgnn.convert(model), GPUS[0])
    session.run(None, {"x": r(3, 19)})
    cache = pipeline_cache(session.session.backends[0].context)
    compiled = cache.compiled
    for rows in (300, 5):
        x = r(rows, 19)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], np.maximum(x @ w + bias, 0), **TOL)
    assert cache.compiled == compiled


def test_bad_override_is_an_error(monkeypatch):
    monkeypatch.setenv("WGNN_MATMUL_VARIANT", "fastest")
    model, *_ = _linear_model(5, 6)
    session = session_for(wgnn.convert(model), GPUS[0])
    with pytest.raises(wgnn.WgnnError, match="WGNN_MATMUL_VARIANT='fastest'"):
        session.run(None, {"x": r(2, 5)})


PERMUTED = [  # (A's shape as stored, perm_a, B's shape as stored, perm_b)
    ((2, 5, 3, 4), [0, 2, 1, 3], (2, 5, 3, 4), [0, 2, 3, 1]),  # attention scores: Q and K heads split
    ((5, 3, 4), [2, 0, 1], (4, 3, 9), []),  # the batch axis from the last: strides that do not merge
    ((7, 6), [1, 0], (7, 10), [1, 0]),  # B's perm, then trans_b: the identity
]


# perm_y per PERMUTED case: the product's axes as stored (a Transpose of the product folded in)
PERM_Y = {"scores": [0, 2, 1, 3], "batch_last": [2, 0, 1], "2d": [1, 0]}


@pytest.mark.parametrize("permuted_y", [False, True], ids=["y", "y_permuted"])
@pytest.mark.parametrize("constant_b", [False, True], ids=["runtime_b", "constant_b"])
@pytest.mark.parametrize("case, a, perm_a, b, perm_b", [(k, *c) for k, c in zip(PERM_Y, PERMUTED)], ids=list(PERM_Y))
def test_permuted_operands(variant, case, a, perm_a, b, perm_b, constant_b, permuted_y):
    """perm_a / perm_b (a Transpose the converter folded in): the operands are read through permuted
    strides; a constant B is permuted before it is repacked. perm_y: the product is stored through
    permuted strides."""
    trans_b = int(len(b) == 2 and bool(perm_b))
    x, w = r(*a), r(*b)
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))
              for name, shape in (("x", a), ("w", b)) if name == "x" or not constant_b]
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")] if constant_b else [])
    model = wgnn.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    (node,) = model.graph.nodes
    perm_y = PERM_Y[case] if permuted_y else []
    node.attrs.update(perm_a=perm_a, perm_b=perm_b, trans_b=trans_b, perm_y=perm_y)
    bt = np.transpose(w, perm_b) if perm_b else w
    want = np.matmul(np.transpose(x, perm_a), np.swapaxes(bt, -1, -2) if trans_b else bt)
    want = np.transpose(want, perm_y) if perm_y else want
    feeds = {"x": x} if constant_b else {"x": x, "w": w}
    for backend in ["numpy", *GPUS]:
        np.testing.assert_allclose(session_for(model, backend).run(None, feeds)[0], want, **TOL, err_msg=backend)


@pytest.mark.parametrize("a, b, c, perm_y", [
    ((2, 3, 5, 4), (4, 6), (6,), [0, 2, 1, 3]),  # attention's context: heads merged back
    ((3, 9, 4), (3, 4, 10), (3, 1, 10), [2, 0, 1]),  # N becomes the first axis; a batched bias
    ((9, 4), (4, 11), (9, 1), [1, 0]),  # a stored transpose; a bias per row
])
def test_permuted_output_with_bias_residual_activation(variant, a, b, c, perm_y):
    """With perm_y the bias broadcasts over the product (before the permutation) and the residual
    has the stored shape (it is added after it), then the activation."""
    x, w, bias = r(*a), r(*b), r(*c)
    product = np.matmul(x, w) + bias
    y_shape = np.transpose(product, perm_y).shape
    res = r(*y_shape)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
              for n, v in (("x", x), ("w", w), ("c", bias), ("res", res))]
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = wgnn.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    (node,) = model.graph.nodes
    node.inputs = ["x", "w", "c", "res"]
    node.attrs.update(perm_y=perm_y, activation="relu")
    want = np.maximum(np.transpose(product, perm_y) + res, 0)
    feeds = {"x": x, "w": w, "c": bias, "res": res}
    for backend in ["numpy", *GPUS]:
        np.testing.assert_allclose(session_for(model, backend).run(None, feeds)[0], want, **TOL, err_msg=backend)


@pytest.mark.parametrize("a, b, split, bias, constant_b", [
    ((2, 5, 7), (7, 15), 3, (15,), True),  # Q, K, V of width 5: parts not a multiple of the 8-column blocks
    ((3, 1, 6, 5), (2, 5, 12), 2, None, False),  # broadcast batch axes, run-time B
    ((9, 4), (4, 48), 3, (1,), True),  # a bias that broadcasts over every part
])
def test_split_product(variant, a, b, split, bias, constant_b):
    """split_y: the product's columns go to `split` outputs, after the bias and the activation."""
    x, w = r(*a), r(*b)
    c = r(*bias) if bias is not None else None
    names = ["x", "w"] + (["c"] if c is not None else [])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a))]
    if not constant_b:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(b)))
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")] if constant_b else [])
    model = wgnn.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    if c is not None:
        model.graph.initializers["c"] = c
    (node,) = model.graph.nodes
    outputs = [f"y{i}" for i in range(split)]
    node.inputs, node.outputs = names, outputs
    node.attrs.update(split_y=split, activation="leaky_relu", activation_alpha=0.25)
    model.graph.outputs = [type(model.graph.outputs[0])(name=o, dtype="float32", shape=None) for o in outputs]
    product = np.matmul(x, w) + (c if c is not None else 0)
    product = np.where(product > 0, product, 0.25 * product)
    want = np.split(product, split, axis=-1)
    feeds = {"x": x} if constant_b else {"x": x, "w": w}
    for backend in ["numpy", *GPUS]:
        got = session_for(model, backend).run(None, feeds)
        assert len(got) == split
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, **TOL, err_msg=backend)
