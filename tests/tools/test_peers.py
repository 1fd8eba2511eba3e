"""tools/peers.py (`python -m wgnn.tools.peers`): the structure of its table and JSON with one round on
one small model and only wgnn and onnxruntime; peers that are missing are "not installed", peers that
break are "failed", never an error of the tool."""
import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from wgnn.tools import peers


def test_cli_json_and_markdown(tmp_path):
    out = tmp_path / "table.md"
    done = subprocess.run([sys.executable, "-m", "wgnn.tools.peers", "--models", "resnet", "--peers",
                           "wgnn numpy,onnxruntime", "--runs", "1", "--warmup", "0", "--out", str(out), "--json",
                           "--lavapipe-threads", "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["runs"] == 1 and result["peer_names"] == ["wgnn numpy", "onnxruntime"]
    [row] = result["models"]
    assert row["model"] == "resnet" and row["inputs"] == {"input": [1, 3, 32, 32]}
    for name, cell in row["peers"].items():
        assert cell["status"] == "ok", (name, cell)
        assert cell["min_ms"] <= cell["median_ms"] <= cell["max_ms"]
        assert cell["max_rel_error"] < 1e-4
    assert row["peers"]["onnxruntime"]["ratio_to_onnxruntime"] == pytest.approx(1.0)
    assert result["environment"]["versions"]["onnxruntime"]
    assert result["environment"]["blas"]  # e.g. "OpenBLAS SkylakeX": convs cut products by it
    gpu = result["environment"]["adapter"]
    assert gpu is None or ("; 0 worker threads)" in gpu) == ("llvmpipe" in gpu.lower()), gpu
    table = out.read_text().splitlines()
    assert "| model | wgnn numpy | onnxruntime |" in table
    assert any(line.startswith("| resnet | ") and "(x" in line for line in table)


def test_missing_and_failing_peers_are_cells(monkeypatch):
    """A peer whose module is missing is "not installed"; one that raises is "failed: ..."."""
    real = peers.find_spec
    monkeypatch.setattr(peers, "find_spec", lambda name: None if name in ("ncnn", "wonnx") else real(name))

    def broken(model, data, feeds, workdir):
        raise RuntimeError("cannot run this")

    loaders = peers.peer_loaders
    monkeypatch.setattr(peers, "peer_loaders", lambda adapter: {**loaders(adapter), "wgnn wgpu": broken})
    result = peers.run_peers(["resnet"], ["wgnn wgpu", "onnxruntime", "ncnn", "wonnx"], runs=1, warmup=0,
                             show_progress=False)
    cells = result["models"][0]["peers"]
    assert cells["ncnn"]["status"].startswith("not installed") and cells["wonnx"]["status"].startswith("not installed")
    assert cells["wgnn wgpu"]["status"] == "failed: cannot run this"
    assert cells["onnxruntime"]["status"] == "ok"
    table = peers.markdown(result)
    assert "| resnet | failed [1] | " in table and "| not installed | not installed |" in table
    assert "[1] wgnn wgpu on resnet: failed: cannot run this" in table


def test_a_peer_with_a_wrong_answer_is_not_timed(monkeypatch):
    """A runner whose outputs are off by more than WRONG_RESULT is a "wrong result" cell with a note,
    not a time."""
    def off_by_one(model, data, feeds, workdir):
        run = peers._onnxruntime(model, data, feeds, workdir)
        return lambda: [np.asarray(out) + 1.0 for out in run()]

    loaders = peers.peer_loaders
    monkeypatch.setattr(peers, "peer_loaders", lambda adapter: {**loaders(adapter), "wgnn numpy": off_by_one})
    result = peers.run_peers(["resnet"], ["wgnn numpy", "onnxruntime"], runs=2, warmup=0, show_progress=False)
    cell = result["models"][0]["peers"]["wgnn numpy"]
    assert cell["status"].startswith("wrong result (max relative error") and "median_ms" not in cell
    table = peers.markdown(result)
    assert "| resnet | wrong result [1] | " in table and "[1] wgnn numpy on resnet: wrong result" in table


@pytest.mark.skipif(peers.find_spec("wonnx") is None, reason="wonnx is not installed")
def test_wonnx_runs_a_gemm_classifier():
    """wonnx's Gemm takes B as (K, N) only and its run() flat sequences: the loader adapts both."""
    result = peers.run_peers(["mobilenetv2"], ["onnxruntime", "wonnx"], runs=1, warmup=0, show_progress=False)
    cell = result["models"][0]["peers"]["wonnx"]
    assert cell["status"] == "ok" and cell["max_rel_error"] < 1e-4


def test_the_table_names_the_lavapipe_device_wgnn_chose(tmp_path, monkeypatch):
    """On lavapipe, without a count set for the process, zoo resnet at 32x32 (0.29 MFLOP per step) runs
    on the device without worker threads; the cell and a line under the table say so."""
    from helpers import gpu_adapters

    adapters = gpu_adapters()
    if not adapters or not ("llvmpipe" in adapters[0]["name"].lower() and adapters[0]["backend"] == "Vulkan"):
        pytest.skip("the first adapter is not lavapipe")
    monkeypatch.delenv("LP_NUM_THREADS", raising=False)
    out = tmp_path / "table.md"
    done = subprocess.run([sys.executable, "-m", "wgnn.tools.peers", "--models", "resnet", "--peers",
                           "wgnn wgpu,onnxruntime", "--runs", "1", "--warmup", "0", "--out", str(out), "--json",
                           "--adapter", str(adapters[0]["index"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)["models"]
    assert row["peers"]["wgnn wgpu"]["device"] == "0 lavapipe workers"
    assert "wgnn wgpu's device per model: resnet 0 lavapipe workers." in out.read_text().splitlines()


def test_ratio_lines_of_the_targets():
    """Under the table, wgnn wgpu's median over each GPU peer's and wgnn numpy's over onnxruntime's,
    for the models both ran right; with 5 rounds or more, a 95% interval."""
    def cell(ms, status="ok", samples=()):
        return {"status": status, "median_ms": ms, "samples_ms": list(samples)} if status == "ok" else \
            {"status": status}

    result = {"models": [{"model": "resnet", "peers": {"wgnn wgpu": cell(1.0), "ncnn": cell(4.0),
                                                       "wonnx": cell(0, "wrong result (max relative error 1.2)")}},
                         {"model": "unet", "peers": {"wgnn wgpu": cell(3.0), "ncnn": cell(2.0), "wonnx": cell(30.0),
                                                     "wgnn numpy": cell(2.0, samples=[2.0] * 6),
                                                     "onnxruntime": cell(1.0, samples=[1.0] * 6)}}]}
    assert peers.target_ratios(result) == [
        "wgnn wgpu / ncnn (medians, same rounds; 95% interval): resnet x0.25, unet x1.50.",
        "wgnn wgpu / wonnx (medians, same rounds; 95% interval): unet x0.10.",
        "wgnn numpy / onnxruntime (medians, same rounds; 95% interval): unet x2.00 (x2.00-2.00)."]


def test_ratio_interval_is_a_paired_bootstrap():
    """Rounds are drawn whole: a slow round slows both runners, so a constant ratio has a zero-width
    interval however noisy the rounds; independent noise gives an interval around the ratio."""
    rng = np.random.default_rng(1)
    phase = rng.uniform(1.0, 3.0, size=51)  # the machine's speed, round by round
    assert peers.ratio_interval(list(0.5 * phase), list(phase)) == pytest.approx((0.5, 0.5))
    ours, theirs = 0.5 * rng.uniform(0.8, 1.2, size=51), rng.uniform(0.8, 1.2, size=51)
    low, high = peers.ratio_interval(list(ours), list(theirs))
    assert low < np.median(ours) / np.median(theirs) < high and 0.3 < low < high < 0.7
    assert peers.ratio_interval([1.0] * 4, [2.0] * 4) is None  # too few rounds
    assert peers.ratio_interval([1.0] * 6, [2.0] * 5) is None  # not paired


def test_unknown_peer_is_an_error(capsys):
    assert peers.main(["--peers", "tensorflow"]) == 2
    assert "unknown model or peer ['tensorflow']" in capsys.readouterr().err


def test_size_and_seq_options():
    result = peers.run_peers(["unet", "bert"], ["wgnn numpy", "onnxruntime"], runs=1, warmup=0, show_progress=False,
                             size=20, seq=5)
    unet, bert = result["models"]
    assert unet["inputs"] == {"input": [1, 3, 20, 20]}
    assert all(shape == [1, 5] for shape in bert["inputs"].values())
    assert all(cell["status"] == "ok" for row in (unet, bert) for cell in row["peers"].values())
    assert peers.main(["--size", "2"]) == 2


def test_turns_of_several_runs_keep_each_turns_first_run_apart(monkeypatch):
    """--turn N: each round a runner runs N times in a row; its round's sample is the median of the
    runs after the first, and the first runs (right after another runner) are a view of their own,
    with its own ratio lines. The runners here take a fixed time on peers' clock: more right after
    the other runner."""
    clock = {"ms": 0.0, "last": None}
    monkeypatch.setattr(peers, "time", SimpleNamespace(perf_counter=lambda: clock["ms"] / 1e3))

    def timed_runner(first_ms, later_ms):
        def load(model, data, feeds, workdir):
            run = peers._onnxruntime(model, data, feeds, workdir)

            def timed():
                clock["ms"] += first_ms if clock["last"] is not timed else later_ms
                clock["last"] = timed
                return run()
            return timed
        return load

    loaders = peers.peer_loaders
    monkeypatch.setattr(peers, "peer_loaders", lambda adapter: {
        **loaders(adapter), "wgnn numpy": timed_runner(9, 2), "onnxruntime": timed_runner(12, 4)})
    result = peers.run_peers(["resnet"], ["wgnn numpy", "onnxruntime"], runs=5, warmup=0, show_progress=False,
                             turn=3)
    assert result["turn"] == 3
    cells = result["models"][0]["peers"]
    assert cells["wgnn numpy"]["samples_ms"] == pytest.approx([2.0] * 5)
    assert cells["onnxruntime"]["samples_ms"] == pytest.approx([4.0] * 5)
    first = cells["wgnn numpy"]["first_of_turn"]
    assert first == {"median_ms": pytest.approx(9.0), "samples_ms": pytest.approx([9.0] * 5)}
    assert cells["onnxruntime"]["first_of_turn"]["median_ms"] == pytest.approx(12.0)
    table = peers.markdown(result)
    assert "over 5 rounds in which each runner ran 3 times in a row" in table
    assert "wgnn numpy / onnxruntime (medians, same rounds; 95% interval): resnet x0.50 (x0.50-0.50)." in table
    assert "Each turn's first run (right after another runner), median ms: resnet wgnn numpy 9.00, " \
           "resnet onnxruntime 12.00." in table
    assert "wgnn numpy / onnxruntime (each turn's first runs, same rounds; 95% interval): resnet x0.75 " \
           "(x0.75-0.75)." in table
    one = peers.run_peers(["resnet"], ["wgnn numpy", "onnxruntime"], runs=5, warmup=0, show_progress=False)
    # turns of one: every run is a first
    assert one["models"][0]["peers"]["wgnn numpy"]["samples_ms"] == pytest.approx([9.0] * 5)
    assert "first_of_turn" not in one["models"][0]["peers"]["wgnn numpy"]
    assert "Each turn's first run" not in peers.markdown(one)
    assert peers.main(["--turn", "0"]) == 2
