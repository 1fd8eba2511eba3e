import numpy as np
import pytest
from helpers import Const, check_op, make_model, run_wgnn

import wgnn

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 5, 3, 7)).astype(np.float32)  # batch 2, C = 5: not a multiple of 4
POSITIVE = np.abs(X) + 0.1  # ReduceLogSum needs a positive sum
TOL = {"rtol": 1e-4, "atol": 1e-5}

KINDS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES_INPUT_SINCE = {op: 13 if op == "ReduceSum" else 18 for op in KINDS}


def data_for(op):
    return POSITIVE if op == "ReduceLogSum" else X


def axes_form(op, opset, axes):
    """Inputs and attributes of a reduction in the form its opset uses."""
    if opset >= AXES_INPUT_SINCE[op]:
        return [None if axes is None else Const(np.array(axes, np.int64))], {}
    return [], ({} if axes is None else {"axes": axes})


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("op", KINDS)
def test_reduce_axes(op, keepdims):
    for axes in ([1], [-1, 1], [0, 2, 3], [0, 1, 2, 3], None):
        extra, attrs = axes_form(op, 18, axes)
        check_op(op, [data_for(op)] + extra, {"keepdims": keepdims, **attrs}, opset=18, **TOL)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", KINDS)
def test_reduce_older_opsets(op, opset):
    for axes in ([2], [-3, 3], None):
        extra, attrs = axes_form(op, opset, axes)
        check_op(op, [data_for(op)] + extra, {"keepdims": 0, **attrs}, opset=opset, **TOL)


@pytest.mark.parametrize("op", KINDS)
def test_reduce_empty_axes(op):
    x = data_for(op)
    # No axes: reduce everything, or nothing with noop_with_empty_axes=1 (composite kinds still
    # apply their element-wise part: ReduceL2 gives |x|, ReduceLogSum gives log x).
    opset = AXES_INPUT_SINCE[op]
    for axes in (None, Const(np.zeros(0, np.int64))):
        check_op(op, [x, axes], {"noop_with_empty_axes": 0}, opset=opset, **TOL)
        check_op(op, [x, axes], {"noop_with_empty_axes": 1, "keepdims": 0}, opset=opset, **TOL)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceSumSquare"])
def test_reduce_int64(op):
    x = rng.integers(-6, 7, (3, 5, 2)).astype(np.int64)
    extra, attrs = axes_form(op, 18, [1])
    out = check_op(op, [x] + extra, attrs, opset=18)[0]
    assert out.dtype == np.int64
    check_op(op, [x, None], {"keepdims": 0}, opset=18)


@pytest.mark.parametrize("op", KINDS)
def test_reduce_over_empty_axis(op):
    # Reducing a length-0 axis gives each kind's identity: 0, 1, -inf, +inf, ...
    x = np.zeros((2, 0, 3), np.float32)
    extra, attrs = axes_form(op, 18, [1])
    if op == "ReduceMean":  # the mean of nothing is NaN (0/0): compare without onnx.reference's warning
        out = run_wgnn(make_model(op, [x] + extra, attrs, opset=18), {"in0": x})[0]
        assert out.shape == (2, 1, 3) and np.isnan(out).all()
        return
    check_op(op, [x] + extra, attrs, opset=18)
    if op in ("ReduceMax", "ReduceMin"):
        check_op(op, [np.zeros((0, 4), np.int64)] + extra, {"keepdims": 0, **attrs}, opset=18)


def test_reduce_log_sum_exp_large_values():
    x = (rng.standard_normal((2, 3, 5)) * 10 + 500).astype(np.float32)  # exp(500) overflows float32
    check_op("ReduceLogSumExp", [x, Const(np.array([2], np.int64))], opset=18, **TOL)
    check_op("ReduceLogSumExp", [-x, Const(np.array([0, 2], np.int64))], opset=18, **TOL)


def test_reduce_axes_must_be_constant():
    model = make_model("ReduceSum", [X, np.array([1], np.int64)], opset=13)
    with pytest.raises(wgnn.ConversionError, match="axes"):
        wgnn.convert(model)


def test_reduce_bad_axes():
    with pytest.raises(wgnn.ShapeError, match="out of range"):
        run_wgnn(make_model("ReduceMax", [X, Const(np.array([4], np.int64))], opset=18), {"in0": X})
    with pytest.raises(wgnn.ShapeError, match="twice"):
        run_wgnn(make_model("ReduceMax", [X, Const(np.array([1, -3], np.int64))], opset=18), {"in0": X})


TIES = np.array([[[3, 1, 3, 0], [2, 2, 1, 2], [0, 5, 5, 5]],
                 [[1, 1, 1, 1], [4, 0, 4, 0], [7, 7, 6, 7]]], np.float32)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("select_last_index", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_reduce_ties(op, select_last_index, keepdims):
    for axis in (0, 1, 2, -1):
        attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": select_last_index}
        out = check_op(op, [TIES], attrs, opset=13)[0]
        assert out.dtype == np.int64


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce_forms(op):
    check_op(op, [X], opset=11)  # axis 0, keepdims 1 by default; no select_last_index before 12
    check_op(op, [X], {"axis": -3, "keepdims": 0}, opset=11)
    check_op(op, [rng.integers(0, 3, (4, 6)).astype(np.int64)], {"axis": 1, "select_last_index": 1}, opset=12)
    check_op(op, [np.array([2.0, 9.0, 9.0], np.float32)], {"keepdims": 0}, opset=13)


# The split (two-pass) reduction, forced on every GPU adapter with small chunks (WGNN_REDUCE_SPLIT:
# elements per chunk, where a workgroup per output runs), against the numpy backend.
SPLIT_KERNELS = ["reduce/reduce_split.wgsl", "reduce/reduce_split_merge.wgsl"]
SPLIT_CASES = [
    ((300,), [0]),  # one output
    ((2, 5, 3, 70), [1, 3]),  # 6 outputs over two separate reduced axes
    ((40, 3, 30), [0, 2]),  # 3 outputs; a chunk of 37 spans outer rows of 30 elements
    ((3, 3000), [1]),  # more chunks per output (82) than a workgroup has invocations
]


def gpu_backends():
    from helpers import gpu_adapters

    return [f"wgpu:{a['index']}" for a in gpu_adapters()]


@pytest.fixture
def split(monkeypatch):
    if not gpu_backends():
        pytest.skip("no GPU adapter (install mesa-vulkan-drivers)")
    monkeypatch.setenv("WGNN_ROW_KERNEL", "workgroup")
    monkeypatch.setenv("WGNN_REDUCE_SPLIT", "37")  # divides none of the rows
    return monkeypatch


def split_against_numpy(op, x, axes, keepdims=1, **tol):
    """Run a reduction on the numpy backend and on every GPU adapter; the GPU runs the split."""
    from helpers import session_for
    from wgnn.models.format import model_to_bytes, read_model

    model = make_model(op, [x, Const(np.array(axes, np.int64))], {"keepdims": keepdims}, opset=18)
    model = read_model(model_to_bytes(wgnn.convert(model)))
    want = session_for(model, "numpy").run(None, {"in0": x})[0]
    for backend in gpu_backends():
        session = session_for(model, backend)
        got = session.run(None, {"in0": x})[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, equal_nan=True, err_msg=f"{op} {x.shape} {axes} on {backend}",
                                   **(tol or TOL))
        paths = [d.kernel.path for seg in session.session.segments for _, ex in seg.steps
                 for d in getattr(ex, "dispatches", [])]
        assert paths == SPLIT_KERNELS, paths


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("op", KINDS)
def test_split_float_kinds(split, op, keepdims):
    for shape, axes in SPLIT_CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        if op in ("ReduceProd", "ReduceLogSum"):
            x = (1.0 + 0.05 * x).astype(np.float32)  # near 1: a product of thousands stays finite
        split_against_numpy(op, x, axes, keepdims)


def test_split_chunks_wider_than_a_workgroup(split):
    split.setenv("WGNN_REDUCE_SPLIT", "150")  # invocations walk up to three elements of a chunk's row
    for op in ("ReduceSum", "ReduceMean", "ReduceLogSumExp"):
        for shape, axes in SPLIT_CASES:
            split_against_numpy(op, rng.standard_normal(shape).astype(np.float32), axes)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_split_int32(split, op):
    for shape, axes in SPLIT_CASES:
        if op == "ReduceProd":  # odd factors: the product wraps (in both) but never reaches 0
            x = rng.choice(np.array([-3, -1, 1, 3], np.int32), shape)
        else:
            x = rng.integers(-1000, 1000, shape).astype(np.int32)
        split_against_numpy(op, x, axes, keepdims=0, rtol=0, atol=0)


def test_split_nan_and_infinities(split):
    x = rng.standard_normal((4, 300)).astype(np.float32)
    x[0, 250] = np.nan  # in the last chunk only
    x[1, 10] = np.nan
    x[1, 200] = np.inf
    x[2, 100] = -np.inf
    x[3, 40] = np.inf
    for op in ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"):
        split_against_numpy(op, x, [1])


def test_split_log_sum_exp_shifts(split):
    """Each chunk's sums are shifted by its own largest finite element; pass 2 rescales them to the
    row's, except where a chunk has no finite element or an infinite sum (chunks of 37 here)."""
    x = rng.standard_normal((7, 300)).astype(np.float32)
    x[0] += 500  # exp(500) overflows float32
    x[0, 37:74] = -np.inf  # a chunk of -inf only
    x[1] -= 500  # exp(-500) underflows: the -inf chunk's sum 0 must not meet exp(0 + 500)
    x[1, 37:74] = -np.inf
    x[2, 74:111] -= 500  # a chunk whose +inf sits beside elements far below the row's largest
    x[2, 90] = np.inf
    x[3] = -np.inf
    x[4] += 300
    x[4, 74:111] = np.inf  # a chunk of +inf only
    x[5, 185:222] += 80  # one chunk far above the others
    x[6, 5] = np.nan
    split_against_numpy("ReduceLogSumExp", x, [1])


def test_split_rule(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from wgnn.backends.wgpu.reduce import SPLIT_MIN_CHUNK, SPLIT_WORKGROUPS, reduce_plan

    def execution(adapter_type, loop_budget):
        info = SimpleNamespace(name=f"{adapter_type} adapter", backend="Vulkan", driver="1", adapter_type=adapter_type)
        context = SimpleNamespace(info=info, name=info.name)
        return SimpleNamespace(backend=SimpleNamespace(loop_budget=loop_budget, context=context))

    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))  # nothing tuned
    monkeypatch.delenv("WGNN_ROW_KERNEL", raising=False)
    monkeypatch.delenv("WGNN_REDUCE_SPLIT", raising=False)
    gpu, cpu = execution("DiscreteGPU", None), execution("CPU", 60000)
    # (outputs, outer rows, walked length, passes)
    assert reduce_plan(gpu, 1, 1, 2 ** 24, 1) == (True, 2 ** 24 // SPLIT_WORKGROUPS)  # one long row: split
    assert reduce_plan(gpu, 1, 1, 2 ** 24, 2) == (True, 2 ** 24 // SPLIT_WORKGROUPS)  # log_sum_exp too
    assert reduce_plan(gpu, 8, 3, 100_000, 1) == (True, -(-300_000 // (300_000 // SPLIT_MIN_CHUNK)))
    assert reduce_plan(gpu, 4096, 1, 512, 1) == (True, 0)  # many short rows: a workgroup each
    assert reduce_plan(gpu, 300, 1, 2 ** 20, 1) == (True, 0)  # enough outputs to fill the GPU
    assert reduce_plan(gpu, 8, 1, 2 * SPLIT_MIN_CHUNK - 1, 1) == (True, 0)  # not two chunks
    assert reduce_plan(cpu, 1, 1, 1000, 1) == (False, 0)  # an invocation per output
    assert reduce_plan(cpu, 1, 1, 2 ** 24, 1) == (True, 0)  # past llvmpipe's loop limit: no split there
    monkeypatch.setenv("WGNN_REDUCE_SPLIT", "0")
    assert reduce_plan(gpu, 1, 1, 2 ** 24, 1) == (True, 0)
    monkeypatch.setenv("WGNN_REDUCE_SPLIT", "100")
    assert reduce_plan(gpu, 4096, 1, 512, 1) == (True, 100)
    assert reduce_plan(gpu, 4096, 1, 100, 1) == (True, 0)  # one chunk: nothing to split
    assert reduce_plan(cpu, 1, 1, 2 ** 24, 1) == (True, 100)
    monkeypatch.setenv("WGNN_REDUCE_SPLIT", "1")
    assert reduce_plan(gpu, 1, 1, 2 ** 24, 1) == (True, 1)
    assert reduce_plan(cpu, 1, 1, 2 ** 24, 1) == (True, 0)  # pass 2 would loop past the limit
    monkeypatch.setenv("WGNN_REDUCE_SPLIT", "lots")
    with pytest.raises(wgnn.WgnnError, match="WGNN_REDUCE_SPLIT='lots': expected elements per chunk"):
        reduce_plan(gpu, 1, 1, 2 ** 24, 1)


def test_split_resize_compiles_nothing(split):
    """Rows of one chunk take reduce_workgroup.wgsl, longer ones the split: a resize between them
    compiles nothing (prepare compiled the other kernels)."""
    import onnx
    from helpers import gpu_adapters
    from onnx import TensorProto, helper
    from wgnn.backends.wgpu.loader import pipeline_cache

    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "L"])
    node = helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0)
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")
    graph = helper.make_graph([node], "reduce", [x_info], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    for adapter in range(len(gpu_adapters())):
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter))
        cache = pipeline_cache(session.session.backends[0].context)
        compiled, kernels = None, []
        for length in (30, 300, 20, 100):
            x = rng.standard_normal((2, length)).astype(np.float32)
            np.testing.assert_allclose(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], **TOL)
            compiled = cache.compiled if compiled is None else compiled
            kernels.append([d.kernel.path for seg in session.session.segments for _, ex in seg.steps
                            for d in getattr(ex, "dispatches", [])])
        assert cache.compiled == compiled
        assert kernels[0] == kernels[2] == ["reduce/reduce_workgroup.wgsl"]
        assert kernels[1] == kernels[3] == SPLIT_KERNELS
