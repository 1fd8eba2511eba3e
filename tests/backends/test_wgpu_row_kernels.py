"""Row-wise kernels with a workgroup per row (softmax_workgroup.wgsl, layer_norm_workgroup.wgsl:
real GPUs' choice, and llvmpipe's for rows too long for one invocation) and with an invocation per
row (CPU adapters), forced by WGNN_ROW_KERNEL on every adapter here, against the reference: rows
shorter and longer than a workgroup, strided rows, ties and NaN for the first maximum, statistics
outputs; the rule that picks them."""
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import Const, check_op, gpu_adapters, make_model, session_for

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
    ((2, 200), 1),  # rows of 200: 4 elements for some invocations, 3 for others
    ((2, 70, 3), 1),  # rows 3 apart (inner 3)
])
def test_softmax_family(row_kernel, op, shape, axis):
    x = r(*shape)
    check_op(op, [x], {"axis": axis}, opset=13, backends=GPUS, **TOL)
    kernel = {"invocation": "softmax/softmax.wgsl", "workgroup": "softmax/softmax_workgroup.wgsl"}[row_kernel]
    assert kernel_paths(op, [x], {"axis": axis}, opset=13) == [kernel]


def test_first_maximum_ties_and_nan(row_kernel):
    """Equal maxima held by different invocations (and by one): the first wins; a NaN beats them,
    the first NaN the later one; a row of -inf."""
    x = r(4, 150)
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


def test_rows_too_long_for_one_invocation_take_a_workgroup(monkeypatch):
    """Past llvmpipe's loop limit for one invocation, whatever the setting: no CPU fallback."""
    monkeypatch.setenv("WGNN_ROW_KERNEL", "invocation")
    x = r(2, 40000)  # three passes of 10000 vec4s, or 30000 elements: past 60000 iterations
    check_op("LayerNormalization", [x, Const(r(40000)), Const(r(40000))], {"axis": -1}, opset=17,
             backends=GPUS, rtol=1e-4, atol=1e-4)
    x = r(1, 600000)
    check_op("Softmax", [x], {"axis": -1}, opset=13, backends=GPUS, rtol=1e-4, atol=1e-9)
    for adapter in gpu_adapters():
        if "llvmpipe" in adapter["name"].lower():
            session = session_for(make_model("Softmax", [x], {"axis": -1}, opset=13), f"wgpu:{adapter['index']}")
            session.run(None, {"in0": x})
            assert session.report()["fallbacks"] == []


def test_the_rule(monkeypatch):
    from wgnn.backends.wgpu.reduce import workgroup_per_row
    from wgnn.engine.errors import WgnnError

    def execution(adapter_type, loop_budget):
        info = SimpleNamespace(adapter_type=adapter_type)
        return SimpleNamespace(backend=SimpleNamespace(loop_budget=loop_budget, context=SimpleNamespace(info=info)))

    monkeypatch.delenv("WGNN_ROW_KERNEL", raising=False)
    assert not workgroup_per_row(execution("CPU", 60000), 100)
    assert workgroup_per_row(execution("CPU", 60000), 70000)  # past the loop limit
    assert workgroup_per_row(execution("DiscreteGPU", None), 100)
    monkeypatch.setenv("WGNN_ROW_KERNEL", "invocation")
    assert not workgroup_per_row(execution("DiscreteGPU", None), 10 ** 6)
    assert workgroup_per_row(execution("CPU", 60000), 70000)  # the limit wins over the setting
    monkeypatch.setenv("WGNN_ROW_KERNEL", "warp")
    with pytest.raises(WgnnError, match="WGNN_ROW_KERNEL='warp': expected one of invocation, workgroup"):
        workgroup_per_row(execution("CPU", 60000), 100)
