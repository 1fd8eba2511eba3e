"""The tiled MatMul kernel (matmul_tiled.wgsl, for real GPUs) forced on every adapter with each of
its tiles, against numpy in float64: K around and between the staged slices' KT (16 for 32x32
tiles, 8 for 128x128), M and N ragged against the tile and the 4-wide vec4s it stages (M = 1,
N = 1), A and B contiguous along k or not (trans_a / trans_b), broadcast batches, and the
epilogue (alpha, beta times a bias, a residual, an activation); integers."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import gpu_adapters, matmul_reference, session_for
from wgnn.engine.graph import Graph, Model, Node, TensorInfo

rng = np.random.default_rng(23)
GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
TOL = {"rtol": 1e-4, "atol": 1e-4}
WORKGROUP = {"32": 64, "128": 256}  # invocations per workgroup of each tile (matmul.TILES)

pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU adapter (install mesa-vulkan-drivers)")


def r(*shape, dtype=np.float32):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-4, 5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(params=["32", "128"])
def tile(request, monkeypatch):
    monkeypatch.setenv("WGNN_MATMUL_VARIANT", "tiled")
    monkeypatch.setenv("WGNN_MATMUL_TILE", request.param)
    return request.param


def check(tile: str, a_shape, b_shape, *, c_shape=None, residual=False, attrs=None, dtype=np.float32):
    """One IR MatMul(a, b[, c][, res]) on every GPU adapter, checked to run the tiled kernel with
    the forced tile, against numpy."""
    attrs = dict(attrs or {})
    a, b = r(*a_shape, dtype=dtype), r(*b_shape, dtype=dtype)
    c = r(*c_shape, dtype=dtype) if c_shape is not None else None
    want = matmul_reference(a, b, c, None, attrs)
    res = r(*want.shape, dtype=dtype) if residual else None
    if residual:
        want = matmul_reference(a, b, c, res, attrs)
    dt = np.dtype(dtype).name
    feeds = {"a": a, "b": b, **({"c": c} if c is not None else {}), **({"res": res} if residual else {})}
    node = Node("MatMul", ["a", "b", "c" if c is not None else "", "res" if residual else ""], ["y"], attrs,
                name="mm")
    graph = Graph(nodes=[node], inputs=[TensorInfo(k, dt, v.shape) for k, v in feeds.items()],
                  outputs=[TensorInfo("y", dt)])
    for backend in GPUS:
        session = session_for(Model(graph), backend)
        got = session.run(None, feeds)[0]
        kernels = [(d.kernel.path, d.kernel.workgroup) for s in session.session.segments for _, ex in s.steps
                   for d in getattr(ex, "dispatches", [])]
        assert kernels == [("matmul/matmul_tiled.wgsl", WORKGROUP[tile])], kernels
        assert got.shape == want.shape, (got.shape, want.shape)
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, **TOL, err_msg=backend)
        else:
            np.testing.assert_array_equal(got, want, err_msg=backend)


@pytest.mark.parametrize("k", [1, 3, 8, 15, 16, 17, 24, 40, 131])
def test_k_around_the_staged_slice(tile, k):
    """One slice shorter than KT, exactly KT, KT plus one, 8 but not 16, several slices."""
    check(tile, (37, k), (k, 45))


@pytest.mark.parametrize("m, n", [(1, 1), (1, 70), (2, 35), (31, 33), (33, 31), (129, 3), (3, 130), (130, 129)])
def test_m_n_ragged(tile, m, n):
    """M and N 1, 2 or 3 past a multiple of 4 (the staged vec4s cut by the edge), under one tile and
    past it, for both tiles."""
    check(tile, (m, 19), (19, n))


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("m, n, k", [(35, 42, 27), (1, 37, 20), (34, 1, 9), (130, 66, 17)])
def test_orientations(tile, trans_a, trans_b, m, n, k):
    """A staged along k (row-major) or along M (trans_a), B along N or along k (trans_b)."""
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    check(tile, a_shape, b_shape, attrs={"trans_a": trans_a, "trans_b": trans_b})


@pytest.mark.parametrize("a_shape, b_shape", [
    ((2, 1, 33, 20), (3, 20, 37)),  # both broadcast
    ((33, 20), (2, 3, 20, 37)),  # A shared by every product
    ((4, 33, 20), (20, 37)),  # B shared
    ((3, 1, 20), (3, 20, 37)),  # M = 1 per product
    ((20,), (3, 20, 37)),  # a vector A: row stride 0
    ((2, 35, 20), (20,)),  # a vector B: column stride 0
])
def test_batches(tile, a_shape, b_shape):
    check(tile, a_shape, b_shape)


@pytest.mark.parametrize("c_shape, attrs", [
    ((45,), {"alpha": 0.5, "beta": -2.0, "activation": "relu"}),
    ((2, 35, 1), {"trans_b": 1, "activation": "leaky_relu", "activation_alpha": 0.25}),
    ((1, 45), {"trans_a": 1, "alpha": 1.5, "activation": "clip", "activation_alpha": -1.0,
               "activation_beta": 2.0}),
    (None, {"activation": "relu"}),
])
def test_bias_residual_activation(tile, c_shape, attrs):
    a_shape = (2, 21, 35) if attrs.get("trans_a") else (2, 35, 21)
    b_shape = (45, 21) if attrs.get("trans_b") else (21, 45)
    check(tile, a_shape, b_shape, c_shape=c_shape, residual=True, attrs=attrs)


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_infinities_stay_in_their_row_and_column(tile, trans_a, trans_b):
    """The last slice past K is zero in both operands, not what lies beyond K in the buffer: an
    infinity at A[1, 0] and at B[0, 1] (next in memory after row 0 of a row-major A, column 0 of a
    transposed B) makes row 1 and column 1 infinite, no NaN elsewhere."""
    m, n, k = 37, 45, 17
    a, b = r(m, k), r(k, n)
    a[1, 0] = b[0, 1] = np.inf
    with np.errstate(invalid="ignore"):  # numpy's BLAS warns of its own steps; its result has no NaN
        want = a.astype(np.float64) @ b.astype(np.float64)
    feeds = {"a": np.ascontiguousarray(a.T) if trans_a else a, "b": np.ascontiguousarray(b.T) if trans_b else b}
    node = Node("MatMul", ["a", "b"], ["y"], {"trans_a": trans_a, "trans_b": trans_b}, name="mm")
    graph = Graph(nodes=[node], inputs=[TensorInfo(name, "float32", v.shape) for name, v in feeds.items()],
                  outputs=[TensorInfo("y", "float32")])
    for backend in GPUS:
        got = session_for(Model(graph), backend).run(None, feeds)[0]
        assert not np.isnan(got[np.arange(m) != 1][:, np.arange(n) != 1]).any()
        np.testing.assert_allclose(got, want, **TOL, err_msg=backend)


def test_integers(tile):
    check(tile, (3, 37, 19), (19, 45), c_shape=(45,), residual=True, attrs={"activation": "relu"}, dtype=np.int32)
