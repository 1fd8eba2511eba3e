"""`wgnn bench --kernels`: the structure of its JSON and table output in --quick mode (benchmarks are
never timed tests: only that every figure is there and sane), and its argument checks."""
import json
import os
import statistics
import subprocess
import sys

import pytest
from helpers import gpu_adapters

needs_gpu = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "bench", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


@needs_gpu
def test_quick_json_every_adapter():
    done = bench("--kernels", "--quick", "--adapter", "all", "--runs", "2", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["quick"] is True and result["runs"] == 2
    assert [a["index"] for a in result["adapters"]] == [a["index"] for a in gpu_adapters()]
    for entry in result["adapters"]:
        assert entry["method"] in ("timestamp-query", "wall") and entry["sizes"] == "quick"
        fma = entry["fma"]
        assert fma["gflops"] >= fma["median_gflops"] > 0
        assert (entry["lavapipe_threads"] is None) == ("llvmpipe" not in entry["adapter"].lower())
        assert fma["flops"] == fma["invocations"] * fma["iterations"] * 8 * 4 * 2
        assert entry["copy"]["shader_vec4"]["gbps"] > 0 and entry["copy"]["copy_buffer_to_buffer"]["gbps"] > 0
        assert entry["dispatch"]["us_per_dispatch"] >= 0 and entry["dispatch"]["dispatches"] > 1
        chains = entry["concurrency"]
        assert [p["invocations"] for p in chains["curve"]] == [64 << k for k in range(6)]  # up to the FMA peak's
        times = [p["chain_us"] for p in chains["curve"]]
        assert times == sorted(times) and times[0] > 0 and chains["iterations"] == fma["iterations"]
        assert chains["invocations"] == round(max(p["invocations"] / p["chain_us"] for p in chains["curve"]) * times[0])
        cases = [k["case"] for k in entry["kernels"]]
        assert cases == ["MatMul 32^3", "MatMul 64^3", "MatMul 128^3", "Conv 3x3 16->16 @14", "Conv 1x1 16->64 @14",
                         "depthwise 3x3 64 @14", "Attention 2x32x16", "LayerNorm 32x32", "Softmax 64x32",
                         "ReduceSum 4096->1"]
        for row in entry["kernels"]:
            assert "error" not in row, row
            assert 0 < row["min_ms"] <= row["ms"] and row["flops"] > 0 and row["bytes"] > 0
            assert row["gflops"] == pytest.approx(row["flops"] / row["ms"] / 1e6)
            assert row["peak_fraction"] == pytest.approx(row["gflops"] / entry["fma"]["gflops"])
            assert row["bandwidth_fraction"] == pytest.approx(row["gbps"] / entry["copy"]["shader_vec4"]["gbps"])
            assert isinstance(row["memory_bound"], bool)
            assert row["kernels"] and row["dispatches"] >= len(row["kernels"])
        assert entry["kernels"][0]["flops"] == 2 * 32 ** 3
        attention = entry["kernels"][6]  # the converter fused the three ops: one Attention kernel
        assert attention["dispatches"] == 1 and attention["kernels"][0].startswith("matmul/attention")


@needs_gpu
def test_quick_table_one_case():
    done = bench("--kernels", "--quick", "--adapter", "0", "--runs", "1", "--case", "matmul 64",
                 "--lavapipe-threads", "1")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "adapter 0:" in out and "FMA peak:" in out and "GFLOP/s" in out
    assert ("1 lavapipe worker threads]" in out) == ("llvmpipe" in gpu_adapters()[0]["name"].lower())
    assert "copy bandwidth" in out and "copy_buffer_to_buffer" in out and "per empty dispatch" in out
    assert "concurrency: about " in out and "invocations at once (chains of 128 dependent FMAs: 64 in " in out
    assert "min ms" in out and "dispatches" in out
    assert "MatMul 64^3" in out and "MatMul 32^3" not in out and "% peak" in out and "matmul/" in out


@needs_gpu
def test_alternate_a_variable_in_rounds():
    """--alternate times each case at each value of the variable in turn, in rounds: the forced
    split really runs (its merge kernel shows), unset and 0 run whole keys, and each value's ratio
    is the median of its per-round ratios to the first value. A name outside the tier is parsed."""
    done = bench("--kernels", "--quick", "--adapter", "0", "--runs", "2", "--rounds", "2",
                 "--case", "Attention 2x48x16", "--alternate", "WGNN_ATTENTION_SPLIT=,0,16", "--json",
                 env={"WGNN_ATTENTION_VARIANT": "tiled"})
    assert done.returncode == 0, done.stderr
    [result] = json.loads(done.stdout)
    assert result["variable"] == "WGNN_ATTENTION_SPLIT" and result["values"] == ["", "0", "16"]
    [case] = result["cases"]
    assert case["case"] == "Attention 2x48x16" and [s["value"] for s in case["settings"]] == ["", "0", "16"]
    unset, whole, split = case["settings"]
    assert all(len(s["ms"]) == 2 and s["median_ms"] > 0 for s in case["settings"])
    assert unset["ratio"] == 1.0
    assert split["ratio"] == pytest.approx(statistics.median(t / f for t, f in zip(split["ms"], unset["ms"])))
    assert "matmul/attention_merge.wgsl" in split["kernels"] and len(whole["kernels"]) == 1
    assert unset["kernels"] == whole["kernels"]


@needs_gpu
def test_alternate_table():
    done = bench("--kernels", "--adapter", "0", "--runs", "1", "--rounds", "1", "--case", "MatMul 24^3",
                 "--alternate", "WGNN_MATMUL_VARIANT=blocked,,nonesuch")
    assert done.returncode == 0, done.stderr
    assert "vs WGNN_MATMUL_VARIANT=blocked" in done.stdout and "WGNN_MATMUL_VARIANT unset" in done.stdout
    assert "MatMul 24^3" in done.stdout and "x1.00" in done.stdout and "matmul/matmul_blocked.wgsl" in done.stdout
    assert "error: " in done.stdout and "nonesuch" in done.stdout  # a bad value fails its own row
    done = bench("--kernels", "--case", "Gemm 8", "--alternate", "X=1,2")
    assert done.returncode != 0 and "--case 'Gemm 8': no kernel case is named so" in done.stderr


def test_case_by_name():
    """Every case's name describes it again, at any size; other names describe none."""
    from wgnn.tools.bench_kernels import case_by_name, kernel_cases

    for tier in ("quick", "cpu", "gpu"):
        for case in kernel_cases(tier):
            assert case_by_name(case["case"]) == case
    assert case_by_name("attention 1x4096x64") == {"case": "attention 1x4096x64", "op": "Attention", "heads": 1,
                                                   "tokens": 4096, "head": 64}
    assert case_by_name("Conv 5x5 3->8 @9")["attrs"] == {"pads": [2, 2, 2, 2]}
    assert case_by_name("Conv 3x5 3->8 @9") is None and case_by_name("Gemm 64^3") is None


@pytest.mark.parametrize("args, message", [
    (["zoo:resnet", "--kernels"], "takes no MODEL"),
    (["--quick"], "go with --kernels"),
    (["--alternate", "X=1,2"], "go with --kernels"),
    (["--kernels", "--alternate", "X=1,2"], "--alternate needs --case"),
    (["--kernels", "--case", "MatMul 8^3", "--alternate", "X=1"], "with two values or more"),
    (["--kernels", "--case", "MatMul 8^3", "--alternate", "1X=1,2"], "expected VARIABLE=V1,V2"),
    (["--kernels", "--case", "MatMul 8^3", "--alternate", "X=1,2", "--rounds", "0"], "--rounds 0"),
    ([], "give a MODEL"),
    (["--kernels", "--vs", "onnxruntime"], "--vs does not go with --kernels"),
])
def test_argument_errors(args, message):
    done = bench(*args)
    assert done.returncode != 0
    assert message in done.stderr


def test_size_tiers():
    """Real GPUs get work enough to fill one (GEMMs to 4096^3, a million FMA invocations); CPU
    adapters the sizes lavapipe runs in seconds; --quick the smallest anywhere."""
    from wgnn.tools.bench_kernels import SIZES, kernel_cases, size_tier

    assert size_tier(False, "DiscreteGPU") == size_tier(False, "IntegratedGPU") == "gpu"
    assert size_tier(False, "CPU") == "cpu" and size_tier(True, "DiscreteGPU") == "quick"
    gpu = [case["case"] for case in kernel_cases("gpu")]
    assert gpu[:3] == ["MatMul 1024^3", "MatMul 2048^3", "MatMul 4096^3"]
    assert "Attention 12x512x64" in gpu and "ReduceSum 16777216->1" in gpu
    assert [case["case"] for case in kernel_cases("cpu")][:3] == ["MatMul 256^3", "MatMul 512^3", "MatMul 1024^3"]
    assert SIZES["gpu"]["fma_groups"] * 64 >= 1 << 20
    assert SIZES["gpu"]["copy_bytes"] <= 128 << 20  # WebGPU's default max storage binding
