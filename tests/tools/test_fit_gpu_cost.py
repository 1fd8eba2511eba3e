"""tools/fit_gpu_cost.py: the real-GPU cost weights fitted to knob runs' per-op times."""
import json

import numpy as np
import pytest
from helpers import gpu_adapters
from wgnn.backends.wgpu.conv_paths import KernelCost, estimate_us
from wgnn.tools import fit_gpu_cost

needs_gpu = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
PRICES = {"dispatch_us": 4.0, "load_ns": 30.0, "store_ns": 150.0, "fma_ns": 2.0, "shared_load_ns": 12.0,
          "barrier_ns": 5.0}


def test_the_fit_recovers_the_prices_of_its_form():
    """Times made by the real-GPU estimate (one invocation's chain, one wave) under known prices:
    the fit finds those prices again."""
    rng = np.random.default_rng(5)
    weights = fit_gpu_cost.weights_with(PRICES)
    rows = []
    for i in range(40):
        kernels = [KernelCost(int(rng.integers(64, 4096)), *rng.uniform(1, 600, 3),
                              shared_loads=float(rng.uniform(0, 900) * (i % 2)),
                              barriers=float(rng.uniform(0, 40) * (i % 3 == 0)))
                   for _ in range(1 + i % 3)]
        rows.append(fit_gpu_cost.Timing("run", f"op{i}", "k", estimate_us(kernels, weights), kernels))
    fitted = fit_gpu_cost.fit(rows)
    for name, value in PRICES.items():
        assert fitted[name] == pytest.approx(value, rel=1e-6), name
    assert "median relative error 0%" in fit_gpu_cost.report(rows, fitted)


@needs_gpu
def test_timings_pair_each_op_with_the_forced_choice(tmp_path):
    """A knob run's per-op rows become timings with the costs of the choice it forced: the tiled
    path's (barriers, workgroup-memory reads) for resnet's convs; dwpw blocks with the groups they
    ran; runs without a forced choice, other ops and runs of unknown groups are left out."""
    rows = [{"op": f'Conv "{name}"', "kernel": "conv/conv_tiled_nc4hw4.wgsl", "median_ms": 0.02}
            for name in ("conv_2", "conv_11", "conv_53")] + [
        {"op": 'Pool "maxpool_9"', "kernel": "pool/pool_nc4hw4.wgsl", "median_ms": 0.03}]
    dwpw = [{"op": 'ConvDwPwExpand "conv_105"', "kernel": "conv/dwpw_expand_nc4hw4.wgsl", "median_ms": 0.1}]
    runs = [{"step": "knob WGNN_CONV_PATH=tiled resnet 32", "env": {"WGNN_CONV_PATH": "tiled"},
             "per_op": {"rows": rows}},
            {"step": "knob WGNN_DWPW_BLOCK=2x2 mobilenetv2 32", "env": {"WGNN_DWPW_BLOCK": "2x2"},
             "per_op": {"rows": dwpw}},
            {"step": "bench resnet 32", "env": {}, "per_op": {"rows": rows}}]
    path = tmp_path / "knobs.json"
    path.write_text(json.dumps(runs))
    found = fit_gpu_cost.knob_runs([path])
    assert [run["step"] for run in found] == [runs[0]["step"], runs[1]["step"]]
    timings = fit_gpu_cost.timings(found)  # the dwpw run names no groups: left out
    assert [t.op for t in timings] == ["conv_2", "conv_11", "conv_53"]
    assert all(t.costs[0].barriers > 0 and t.costs[0].shared_loads > 0 for t in timings)
    assert timings[0].measured_us == pytest.approx(20.0)
    [dw] = fit_gpu_cost.timings(found[1:], groups="2")
    two = dw.costs[0]
    [one] = fit_gpu_cost.timings(found[1:], groups="1")
    assert dw.op == "conv_105" and two.fmas < one.costs[0].fmas  # each of 2 groups: half the expand slices
