"""tools/gpu_check.py and tools/gpu_check.sh: the real-GPU checks in one run. The quick check runs
for real on this machine's adapter (lavapipe here) through the shell script, as the device tool
would run it; the time budget is checked with steps that sleep."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from wgnn.tools import gpu_check

from tests.helpers import gpu_adapters

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (the check benchmarks one)")
def test_quick_check_through_the_script(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "WGNN_CHECK_SITE": str(tmp_path / "site")}
    done = subprocess.run(["bash", str(ROOT / "tools" / "gpu_check.sh"), "--quick", "--budget", "240"],
                          capture_output=True, text=True, timeout=400, env=env)
    assert done.returncode == 0, done.stderr
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["bench.json", "conform/conform.json", "kernels.json", "knobs.json", "peers.md", "report.md",
                     "setup.log", "tune.json"]
    assert len(files) <= 8  # what the device tool brings back
    report = (out / "report.md").read_text()
    assert report == done.stdout
    for name in ("adapters", "kernels", "bench mobilenetv2 32", "peers 32", "tune", "conform",
                 "knob WGNN_DWPW_BLOCK=2x4 mobilenetv2 32",
                 "knob WGNN_MATMUL_VARIANT=tiled WGNN_MATMUL_TILE=32 MatMul-128^3"):
        assert f"### {name}: exit 0, " in report, name
    kernels = json.loads((out / "kernels.json").read_text())
    matmuls = [k for k in kernels["adapters"][0]["kernels"] if k["op"] == "MatMul"]
    assert matmuls and f"best {max(matmuls, key=lambda k: k['gflops'])['case']} " in report
    assert f"; about {kernels['adapters'][0]['concurrency']['invocations']} invocations at once" in report
    [bench] = json.loads((out / "bench.json").read_text())
    assert bench["step"] == "bench mobilenetv2 32" and bench["env"] == {}
    # The first knob of each variable (the conv paths' resnet is not built in the quick check)
    splits, *knobs = json.loads((out / "knobs.json").read_text())
    [adapter] = splits["alternate"]
    assert splits["step"] == "attention splits" and adapter["variable"] == "WGNN_ATTENTION_SPLIT"
    [case] = adapter["cases"]
    assert [entry["value"] for entry in case["settings"]] == ["", "0", "32", "64", "128", "256"]
    assert f"- attention splits, Attention 2x48x16 (WGNN_ATTENTION_SPLIT, median of 1 rounds, ratio to unset): " \
           f"unset: {case['settings'][0]['median_ms']:.3f} ms (x1.00), 0: " in report
    # Each knob's run is followed by the same run unforced, side by side
    assert [entry.get("baseline_for") for entry in knobs[1::2]] == [entry["setting"] for entry in knobs[::2]]
    assert all(entry["env"] == {} and entry.get("precision", "fp32") == "fp32" for entry in knobs[1::2])
    knob, groups, tile, weights, split, precision, polling = knobs[::2]
    unforced = knobs[1]["per_op"]["total_ms"]
    assert groups["env"] == {"WGNN_DWPW_GROUPS": "1"} and groups["step"].endswith("mobilenetv2 32")
    assert weights["env"] == {"WGNN_CONV_WEIGHTS": "storage"} and weights["step"].endswith("mobilenetv2 32")
    assert knob["env"] == {"WGNN_DWPW_BLOCK": "2x4"} and knob["dispatches"] == bench["dispatches"]
    forced = knob["per_op"]["total_ms"]
    assert (f"| WGNN_DWPW_BLOCK=2x4 | mobilenetv2 32 | {knob['latency_ms']['median']:.3f} "
            f"({knobs[1]['latency_ms']['median']:.3f}) | {forced:.3f} | {unforced:.3f} | "
            f"x{forced / unforced:.2f} |") in report
    assert polling["env"] == {"WGNN_READBACK_SPIN_US": "1000"} and polling["step"].endswith("mobilenetv2 32")
    assert polling["readback_poll_us"] == 1000
    assert f"| WGNN_READBACK_SPIN_US=1000 | mobilenetv2 32 | {polling['latency_ms']['median']:.3f} (" in report
    assert tile["env"] == {"WGNN_MATMUL_VARIANT": "tiled", "WGNN_MATMUL_TILE": "32"}
    [case] = tile["adapters"][0]["kernels"]
    assert case["case"] == "MatMul 128^3" and case["kernels"] == ["matmul/matmul_tiled.wgsl"]
    assert f"| WGNN_MATMUL_VARIANT=tiled WGNN_MATMUL_TILE=32 | MatMul-128^3 ({case['gflops']:.1f}" in report
    assert split["env"] == {"WGNN_ATTENTION_SPLIT": "0"}
    [case] = split["adapters"][0]["kernels"]
    assert case["case"] == "Attention 2x32x16" and case["kernels"] == ["matmul/attention.wgsl"]  # lavapipe's
    assert precision["setting"] == "--precision=fp16" and precision["env"] == {}
    assert precision["precision"] == "fp16" and precision["step"] == "knob --precision=fp16 mobilenetv2 32"
    assert (f"| --precision=fp16 | mobilenetv2 32 | {precision['latency_ms']['median']:.3f} (") in report
    assert f") | {precision['per_op']['total_ms']:.3f} | " in report
    assert bench["input_shapes"] == {"input": [1, 3, 32, 32]} and bench["per_op"]["rows"]
    assert f"| mobilenetv2 | 32 | {bench['adapter']} | {bench['latency_ms']['median']:.3f} |" in report
    peers = (out / "peers.md").read_text()
    assert "| mobilenetv2 | " in peers and peers.strip() in report
    conform = json.loads((out / "conform" / "conform.json").read_text())
    assert conform["summary"]["numpy"]["pass"] == conform["summary"]["numpy"]["total"] > 0
    gpus = [target for target in conform["summary"] if target != "numpy"]
    assert gpus and all(target.endswith("(Vulkan)") for target in gpus)  # OpenGL would double its time
    assert f"Conformance: {gpu_check.conform_counts(conform)}" in report
    assert "wgnn 0.1.0" in (out / "setup.log").read_text()
    tune = json.loads((out / "tune.json").read_text())
    assert tune["adapters"] and gpu_check.tune_lines(tune)[0] in report
    assert tune["adapters"][0]["cache"].startswith(str(out / "tune-cache"))  # not the user's cache


def test_budget_times_out_and_skips_steps(monkeypatch):
    """A step gets its share of the budget plus what earlier steps left; past the budget the rest
    are skipped, and a step that fails or prints no JSON is reported, not raised."""
    def sleeper(name, seconds, share, **kw):
        return gpu_check.Step(name, [sys.executable, "-c", f"import time; time.sleep({seconds}); print('{{}}')"],
                              share, **kw)

    monkeypatch.setattr(gpu_check, "MIN_STEP_S", 1.0)
    failing = gpu_check.Step("failing", [sys.executable, "-c", "import sys; sys.exit('broken')"], 0.1,
                             json_file="x.json")
    steps = [sleeper("quick", 0, 0.5, json_file="x.json"), failing, sleeper("slow", 30, 0.3), sleeper("late", 0, 0.1)]
    gpu_check.run_steps(steps, budget_s=4)
    quick, failing, slow, late = steps
    assert quick.status == 0 and quick.result == {}
    assert failing.status == 1 and failing.result is None and "broken" in failing.output
    assert slow.status is None and "timed out after" in slow.output
    assert slow.seconds < 5  # its share (1.2 s) plus what the first two left, not its 30 s
    assert late.status is None and late.output == "skipped: the time budget ran out"


def test_summary_marks_failed_models(tmp_path):
    steps = [gpu_check.Step("kernels", [], 0.1, json_file="x.json"), gpu_check.Step("bench resnet 224", [], 0.1,
                                                                             json_file="x.json")]
    lines = gpu_check.summary(steps, tmp_path)
    assert "- kernels: no result (see below)" in lines
    assert "| resnet | 224 | - | failed | | | |" in lines


def test_knob_lines_without_a_side_by_side_run():
    """A knob whose unforced run failed (or never ran) shows its own times and no ratio."""
    knob = gpu_check.Step("knob WGNN_X=1 resnet 224", [], 0.1, setting="WGNN_X=1")
    knob.result = {"latency_ms": {"median": 0.5}, "per_op": {"total_ms": 0.25}}
    after = gpu_check.Step("baseline resnet 224 (for WGNN_X=1)", [], 0.1, baseline_for="WGNN_X=1")
    assert gpu_check.knob_lines([knob])[-1] == "| WGNN_X=1 | resnet 224 | 0.500 | 0.250 | - | - |"
    assert gpu_check.knob_lines([knob, after])[-1] == "| WGNN_X=1 | resnet 224 | 0.500 | 0.250 | - | - |"
    after.result = {"latency_ms": {"median": 0.6}, "per_op": {"total_ms": 0.5}}
    assert gpu_check.knob_lines([knob, after])[-1] == \
        "| WGNN_X=1 | resnet 224 | 0.500 (0.600) | 0.250 | 0.500 | x0.50 |"


def test_gemm_line_against_the_datasheet():
    kernels = {"adapters": [{"adapter": "NVIDIA H200 (Vulkan)", "fma": {"gflops": 50000.0}, "kernels": [
        {"op": "MatMul", "case": "MatMul 4096^3", "gflops": 26800.0, "peak_fraction": 0.536,
         "kernels": ["matmul/matmul_tiled.wgsl"]},
        {"op": "MatMul", "case": "MatMul 1024^3", "gflops": 9000.0, "peak_fraction": 0.18, "kernels": []}]}]}
    [line] = gpu_check.gemm_line(kernels)
    assert line == ("- NVIDIA H200 (Vulkan): FMA peak 50000.0 GFLOP/s; best MatMul 4096^3 26800.0 GFLOP/s = 54% of "
                    "it, 40% of the datasheet's 67 TFLOP/s (matmul/matmul_tiled.wgsl)")
    assert gpu_check.datasheet_peak("NVIDIA H100 PCIe") == 51000 and gpu_check.datasheet_peak("llvmpipe") is None
