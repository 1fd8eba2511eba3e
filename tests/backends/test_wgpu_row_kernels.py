"""Row-wise kernels with a workgroup per row or output (softmax_workgroup, layer_norm_workgroup,
group_norm_workgroup, reduce_workgroup, arg_reduce_workgroup: real GPUs' choice, and llvmpipe's for
rows too long for one invocation) and with an invocation per row (CPU adapters), forced by
WGNN_ROW_KERNEL on every adapter here, against the reference: rows shorter and longer than a
workgroup, strided rows, reductions over several separate axes, every reduce kind on floats and
integers, ties and NaN for the first maximum, statistics outputs; the rule that picks them."""
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import Const, check_op, far_from_zero_norm_cases, gpu_adapters, make_model, run_wgnn, session_for

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
TOL = {"rtol": 1e-4, "atol": 1e-5}
rng = np.random.default_rng(11)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(params=["invocation", "workgroup"])
def row_kernel(request, monkeypatch):
    monkeypatch.setenv("WGNN_ROW_KERNEL", request.param)
    return request.param


def kernel_paths(op_type, inputs, attrs, *, outputs=1, opset=18) -> list[str]:
    session = session_for(make_model(op_type, inputs, attrs, outputs=outputs, opset=opset), GPUS[0])
    session.run(None, {f"in{i}": x for i, x in enumerate(inputs) if not isinstance(x, Const)})
    return [d.kernel.path for seg in session.session.segments for _, ex in seg.steps
            for d in getattr(ex, "dispatches", [])]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("shape, axis", [
    ((3, 5, 7), -1),  # rows shorter than a workgroup: most invocations hold nothing
    ((2, 200), 1),  # rows of 200: 4 elements for some invocations, 3 for others; 50 vec4s
    ((3, 2, 12), -1),  # 3 vec4s per row
    ((2, 70, 3), 1),  # rows 3 apart (inner 3)
])
def test_softmax_family(row_kernel, op, shape, axis):
    x = r(*shape)
    check_op(op, [x], {"axis": axis}, opset=13, backends=GPUS, **TOL)
    vec4 = axis % len(shape) == len(shape) - 1 and shape[-1] % 4 == 0  # contiguous rows of whole vec4s
    kernel = {"invocation": "softmax/softmax_vec4.wgsl" if vec4 else "softmax/softmax.wgsl",
              "workgroup": "softmax/softmax_workgroup.wgsl"}[row_kernel]
    assert kernel_paths(op, [x], {"axis": axis}, opset=13) == [kernel]


@pytest.mark.parametrize("length", [150, 152])  # 152: rows of whole vec4s (softmax_vec4.wgsl per invocation)
def test_first_maximum_ties_and_nan(row_kernel, length):
    """Equal maxima held by different invocations (and by one): the first wins; a NaN beats them,
    the first NaN the later one; a row of -inf."""
    x = r(4, length)
    x[0, [3, 67, 131]] = 9.0  # invocations 3, 3 and 3 of 64
    x[1, [70, 5, 140]] = 9.0  # the first maximum at 5, held by invocation 5
    x[2, [100, 20]] = np.nan
    x[2, 7] = 50.0
    x[3] = -np.inf
    check_op("Hardmax", [x], {"axis": -1}, opset=13, backends=GPUS)
    check_op("Softmax", [x[:3]], {"axis": -1}, opset=13, backends=GPUS, **TOL)


@pytest.mark.parametrize("shape, axis", [
    ((3, 5, 8), -1),  # 2 vec4s per row
    ((2, 300), -1),  # 75 vec4s per row: more than a workgroup
    ((2, 3, 4, 16), 2),  # two normalized axes, one contiguous row
])
def test_layer_norm(row_kernel, shape, axis):
    normalized = shape[axis % len(shape):]
    x = (r(*shape) * 0.1 + 20.0).astype(np.float32)  # far from zero: the shifted sums matter
    inputs = [x, Const(r(*normalized)), Const(r(*normalized))]
    check_op("LayerNormalization", inputs, {"axis": axis}, outputs=3, opset=17, backends=GPUS,
             rtol=1e-4, atol=1e-4)
    check_op("RMSNormalization", [x, Const(r(*normalized))], {"axis": axis}, opset=23, backends=GPUS, **TOL)
    kernel = {"invocation": "norm/layer_norm_vec4.wgsl", "workgroup": "norm/layer_norm_workgroup.wgsl"}[row_kernel]
    assert kernel_paths("LayerNormalization", inputs, {"axis": axis}, outputs=3, opset=17) == [kernel]


@pytest.mark.parametrize("shape, groups", [((2, 6, 5, 7), 3), ((1, 4, 3, 50), 2), ((2, 3, 1, 1), 3),
                                           ((2, 8, 4, 6), 4), ((1, 6, 2, 2), 2)])
def test_group_and_instance_norm(row_kernel, shape, groups):
    """Rows of 2 x 35 elements, 2 x 150 (channels longer than a workgroup), a single element; and
    spatial sizes of whole vec4s (24, 4), which an invocation per row reads as vec4s."""
    c = shape[1]
    x = r(*shape)
    check_op("GroupNormalization", [x, Const(r(c)), Const(r(c))], {"num_groups": groups}, opset=21,
             backends=GPUS, rtol=1e-4, atol=1e-4)
    check_op("InstanceNormalization", [x, Const(r(c)), Const(r(c))], opset=6, backends=GPUS, rtol=1e-4, atol=1e-4)
    vec4 = (shape[2] * shape[3]) % 4 == 0
    kernel = {"invocation": "norm/group_norm_vec4.wgsl" if vec4 else "norm/group_norm.wgsl",
              "workgroup": "norm/group_norm_workgroup.wgsl"}[row_kernel]
    assert kernel_paths("GroupNormalization", [x, Const(r(c)), Const(r(c))], {"num_groups": groups},
                        opset=21) == [kernel]
    instance = {"invocation": "norm/group_norm_vec4.wgsl" if vec4 else "norm/instance_norm.wgsl",
                "workgroup": "norm/group_norm_workgroup.wgsl"}[row_kernel]
    assert kernel_paths("InstanceNormalization", [x, Const(r(c)), Const(r(c))], {}, opset=6) == [instance]


def test_instance_norm_bias_per_element(row_kernel):
    """A (C, *spatial) bias (the reference takes only (C,)): against the formula."""
    x, scale, bias = r(2, 3, 4, 5), r(3), r(3, 4, 5)
    model = make_model("InstanceNormalization", [x, Const(scale), Const(bias)], opset=6)
    mean = x.mean(axis=(2, 3), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(2, 3), keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * scale[:, None, None] + bias
    for backend in GPUS:
        np.testing.assert_allclose(session_for(model, backend).run(None, {"in0": x})[0], want, **TOL)


@pytest.mark.parametrize("name, model, x, want", far_from_zero_norm_cases())
def test_norms_far_from_zero(row_kernel, name, model, x, want):
    """Every norm kernel, both row variants, against float64 on rows near 50 (tests/ops/test_norm.py):
    the mean kept as shift plus offset (norm/shifted_mean.wgsl) holds 1e-5, a float32 mean 6e-5."""
    for backend in GPUS:
        for got, exact in zip(run_wgnn(model, {"in0": x}, backend), want, strict=True):
            np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5, err_msg=f"{name} on {backend}")


FLOAT_REDUCES = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                 "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


@pytest.mark.parametrize("shape, axes", [
    ((3, 300), [1]),  # one output per row, 300 walked elements cut into pieces
    ((2, 5, 3, 7), [1, 3]),  # two separate reduced axes: outer rows of the walked one
    ((70, 4, 2), [0]),  # a walked dim 8 apart
    ((2, 3), [0, 1]),  # fewer elements than invocations
])
def test_reduce(row_kernel, shape, axes):
    x = (1.0 + 0.05 * r(*shape)).astype(np.float32)  # near 1: ReduceLogSum finite, ReduceProd far from overflow
    for op in FLOAT_REDUCES:
        check_op(op, [x, Const(np.array(axes, np.int64))], opset=18, backends=GPUS, **TOL)
    ints = rng.integers(-50, 50, shape).astype(np.int32)
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"):
        check_op(op, [ints, Const(np.array(axes, np.int64))], opset=18, backends=GPUS)
    kernel = {"invocation": "reduce/reduce.wgsl", "workgroup": "reduce/reduce_workgroup.wgsl"}[row_kernel]
    assert kernel_paths("ReduceSum", [x, Const(np.array(axes, np.int64))], {}) == [kernel]


def test_reduce_nan_and_empty(row_kernel):
    x = r(3, 130)
    x[1, 77] = np.nan
    x[2, :] = -np.inf
    for op in ("ReduceMax", "ReduceMin", "ReduceSum"):
        check_op(op, [x, Const(np.array([1], np.int64))], opset=18, backends=GPUS, **TOL)
    # (the reference's LogSumExp of a row of -inf is NaN, from -inf - -inf; wgnn's is log(0) = -inf)
    check_op("ReduceLogSumExp", [x[:2], Const(np.array([1], np.int64))], opset=18, backends=GPUS, **TOL)
    check_op("ReduceSum", [np.zeros((3, 0), np.float32), Const(np.array([1], np.int64))], opset=18, backends=GPUS)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_reduce(row_kernel, op, last):
    """Ties held by different invocations and by one, NaN (first or last wins), rows shorter and
    longer than a workgroup, an inner axis, integers."""
    x = r(4, 150)
    x[0, [3, 67, 131]] = x[0].max() + 1 if op == "ArgMax" else x[0].min() - 1  # all three in invocation 3
    x[1, [70, 5, 140]] = 9.0 if op == "ArgMax" else -9.0
    x[2, [100, 20]] = np.nan
    check_op(op, [x], {"axis": 1, "select_last_index": last}, opset=13, backends=GPUS)
    check_op(op, [r(2, 70, 3)], {"axis": 1, "select_last_index": last}, opset=13, backends=GPUS)
    check_op(op, [r(3, 5)], {"axis": 1, "select_last_index": last}, opset=13, backends=GPUS)
    ints = rng.integers(-3, 3, (3, 130)).astype(np.int32)  # many ties
    check_op(op, [ints], {"axis": 1, "select_last_index": last}, opset=13, backends=GPUS)
    kernel = {"invocation": "reduce/arg_reduce.wgsl", "workgroup": "reduce/arg_reduce_workgroup.wgsl"}[row_kernel]
    assert kernel_paths(op, [x], {"axis": 1, "select_last_index": last}, opset=13) == [kernel]


def test_rows_too_long_for_one_invocation_take_a_workgroup(monkeypatch):
    """Past llvmpipe's loop limit for one invocation, whatever the setting: no CPU fallback."""
    monkeypatch.setenv("WGNN_ROW_KERNEL", "invocation")
    x = r(2, 40000)  # three passes of 10000 vec4s, or 30000 elements: past 60000 iterations
    check_op("LayerNormalization", [x, Const(r(40000)), Const(r(40000))], {"axis": -1}, opset=17,
             backends=GPUS, rtol=1e-4, atol=1e-4)
    x = r(1, 4, 150, 150)  # InstanceNorm rows of 22500: three passes past the limit
    check_op("InstanceNormalization", [x, Const(r(4)), Const(r(4))], opset=6, backends=GPUS, rtol=1e-4, atol=1e-4)
    x = r(1, 600000)
    check_op("Softmax", [x], {"axis": -1}, opset=13, backends=GPUS, rtol=1e-4, atol=1e-9)
    axis = Const(np.array([1], np.int64))
    check_op("ReduceSum", [x, axis], opset=18, backends=GPUS, rtol=1e-4, atol=1e-2)
    check_op("ArgMax", [x], {"axis": 1}, opset=13, backends=GPUS)
    for adapter in gpu_adapters():
        if "llvmpipe" in adapter["name"].lower():
            for model in (make_model("Softmax", [x], {"axis": -1}, opset=13), make_model("ReduceSum", [x, axis]),
                          make_model("ArgMax", [x], {"axis": 1}, opset=13)):
                session = session_for(model, f"wgpu:{adapter['index']}")
                session.run(None, {"in0": x})
                assert session.report()["fallbacks"] == []


def test_the_rule(monkeypatch, tmp_path):
    from wgnn.backends.wgpu.reduce import workgroup_per_row
    from wgnn.backends.wgpu.tuning import save_entry
    from wgnn.engine.errors import WgnnError

    def execution(adapter_type, loop_budget):
        info = SimpleNamespace(name=f"{adapter_type} adapter", backend="Vulkan", driver="1", adapter_type=adapter_type)
        context = SimpleNamespace(info=info, name=info.name)
        return SimpleNamespace(backend=SimpleNamespace(loop_budget=loop_budget, context=context))

    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WGNN_ROW_KERNEL", raising=False)
    cpu, gpu = execution("CPU", 60000), execution("DiscreteGPU", None)
    assert not workgroup_per_row(cpu, 100, 1000)
    assert workgroup_per_row(cpu, 70000, 1000)  # past the loop limit
    assert workgroup_per_row(gpu, 100, 64)
    assert not workgroup_per_row(gpu, 100, 63)  # most of a workgroup idle
    save_entry(cpu.backend.context.info, {"variants": {"rows": "workgroup"}})  # as wgnn tune stores it
    assert workgroup_per_row(cpu, 100, 1000) and not workgroup_per_row(cpu, 100, 63)
    monkeypatch.setenv("WGNN_ROW_KERNEL", "invocation")
    assert not workgroup_per_row(gpu, 10 ** 6, 10 ** 6)
    assert workgroup_per_row(cpu, 70000, 8)  # the limit wins over the setting
    monkeypatch.setenv("WGNN_ROW_KERNEL", "warp")
    with pytest.raises(WgnnError, match="WGNN_ROW_KERNEL='warp': expected one of invocation, workgroup"):
        workgroup_per_row(cpu, 100, 1000)
