"""`wgnn demo` on the shipped digits model, end to end in a subprocess as users run it: the recorded
accuracy on numpy (exactly) and on every GPU adapter (within one image), --json, the text output,
batching; the shipped data; and the training script (gradients, reproducible split)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import gpu_adapters
from wgnn.tools import demo, train_digits

ROOT = Path(__file__).resolve().parents[2]
RECORDED = demo.DIGITS_RECORDED_CORRECT
TOTAL = demo.DIGITS_TEST_IMAGES


def wgnn_demo(*args) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "demo", *map(str, args)], capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    return result


def demo_json(*args) -> dict:
    return json.loads(wgnn_demo(*args, "--json").stdout)


def check_counts(result: dict) -> None:
    assert result["model"] == "digits" and result["images"] == TOTAL
    assert result["recorded"] == {"correct": RECORDED, "images": TOTAL}
    per_class = result["per_class"]
    assert [c["digit"] for c in per_class] == list(range(10)) and all(c["total"] == 36 for c in per_class)
    assert sum(c["correct"] for c in per_class) == result["correct"]
    assert len(result["confused"]) == TOTAL - result["correct"]
    assert result["accuracy"] == pytest.approx(result["correct"] / TOTAL)


def check_per_image(latency: dict, batch: int):
    # The JSON rounds the median to 1 us and per_image to 1 ns (both in ms): allow both roundings.
    assert latency["per_image"] == pytest.approx(latency["median"] / batch, rel=1e-3, abs=5e-4 / batch + 5e-7)


def test_numpy_reaches_the_recorded_accuracy_exactly():
    result = demo_json("--provider", "numpy", "--runs", "2")
    check_counts(result)
    assert result["correct"] == RECORDED
    assert result["providers"] == ["numpy"] and list(result["ops_per_backend"]) == ["numpy"]
    assert result["preprocess"]["provider"] == "numpy" and result["preprocess"]["max_abs_diff_vs_numpy"] == 0
    assert result["numpy_agreement"] == {"identical_predictions": 1.0, "max_abs_logit_diff": 0.0,
                                         "numpy_correct": RECORDED}
    assert result["latency_ms"]["runs"] == 2 and result["latency_ms"]["median"] > 0
    check_per_image(result["latency_ms"], TOTAL)


@pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_gpu_reaches_the_recorded_accuracy(adapter):
    result = demo_json("--adapter", adapter, "--runs", "2")
    check_counts(result)
    assert abs(result["correct"] - RECORDED) <= 1
    assert result["providers"] == ["wgpu", "numpy"] and list(result["ops_per_backend"]) == ["wgpu"]
    assert result["fallbacks"] == 0 and result["adapter"] == gpu_adapters()[adapter]["name"] + \
        f" ({gpu_adapters()[adapter]['backend']})"
    assert result["preprocess"]["provider"] == "wgpu" and result["preprocess"]["max_abs_diff_vs_numpy"] <= 1e-5
    agreement = result["numpy_agreement"]
    assert agreement["numpy_correct"] == RECORDED
    assert agreement["identical_predictions"] >= (TOTAL - 1) / TOTAL and agreement["max_abs_logit_diff"] < 1e-3


def test_default_text_output():
    out = wgnn_demo("--runs", "2").stdout
    assert out.startswith("wgnn demo: handwritten digits")
    assert f"(recorded at training: {RECORDED}/{TOTAL})" in out and "accuracy:" in out
    assert "digit        0   1   2   3   4   5   6   7   8   9" in out
    assert "(true " in out and any(ch in out for ch in "#%@")  # digits drawn with their labels
    assert "agreement:" in out and "of predictions as on the numpy backend" in out
    assert "latency:   median" in out and "us per image" in out


def test_batches_give_the_same_answer():
    result = demo_json("--provider", "numpy", "--batch", "100", "--runs", "1")
    assert result["batch"] == 100 and result["correct"] == RECORDED
    check_per_image(result["latency_ms"], 100)


def test_bad_runs_is_a_one_line_error():
    result = subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "demo", "--runs", "0"], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 2 and result.stderr.strip() == "wgnn: error: --runs must be at least 1, got 0"


def test_demo_needs_no_scikit_learn():
    code = ("import sys; sys.modules['sklearn'] = None\n"  # importing it now fails
            "from wgnn.tools.demo import run_demo\n"
            "r = run_demo(providers=['numpy'], runs=1)\n"
            "print(r['correct'])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == RECORDED


def test_recorded_accuracy_is_in_the_docs():
    text = (ROOT / "docs" / "getting-started.md").read_text()
    assert "python -m wgnn.tools.train_digits" in text
    assert f"{RECORDED}/{TOTAL}" in text and f"{RECORDED / TOTAL:.2%}" in text


def test_shipped_data():
    model, images, labels = demo.load_digits_data()
    assert images.shape == (TOTAL, 8, 8) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [36] * 10
    options = json.loads(model.metadata["wgnn.image"])
    assert options["source"] == options["target"] == "gray" and options["size"] == [8, 8]
    assert [t.name for t in model.graph.inputs] == ["image"] and [t.name for t in model.graph.outputs] == ["logits"]
    assert model.graph.inputs[0].shape[1:] == (1, 8, 8) and isinstance(model.graph.inputs[0].shape[0], str)


def test_draw_digits():
    images = np.array([[[0, 255], [128, 30]], [[255, 255], [0, 0]]], np.uint8)
    lines = demo.draw_digits(images, ["a", "bb"])
    assert lines == ["  @@  @@@@", "++..", " a     bb"]


# ------------------------------------------------------------------------------ training script
def test_backward_matches_numerical_gradients():
    rng = np.random.default_rng(1)
    params = train_digits.init_params(rng)
    x = rng.standard_normal((3, 1, 8, 8))
    y = np.array([1, 7, 3])

    def loss(p):
        logits = train_digits.forward(p, x)[0]
        return -np.mean(logits[np.arange(3), y] - np.log(np.exp(logits).sum(1)))

    logits, cache = train_digits.forward(params, x)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    probs[np.arange(3), y] -= 1
    grads = train_digits.backward(params, cache, probs / 3)
    for name, value in params.items():
        for index in [tuple(rng.integers(0, s) for s in value.shape) for _ in range(4)]:
            saved = value[index]
            value[index] = saved + 1e-6
            up = loss(params)
            value[index] = saved - 1e-6
            down = loss(params)
            value[index] = saved
            assert grads[name][index] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-7), (name, index)


def test_training_split_is_the_shipped_one():
    pytest.importorskip("sklearn", reason="the training script needs scikit-learn (pip install scikit-learn)")
    _, train_labels, test_images, test_labels = train_digits.load_split(0)
    _, images, labels = demo.load_digits_data()
    np.testing.assert_array_equal(test_images, images)
    np.testing.assert_array_equal(test_labels, labels)
    assert len(train_labels) + len(labels) == 1797


def test_training_reaches_the_recorded_accuracy(tmp_path, capsys):
    pytest.importorskip("sklearn", reason="the training script needs scikit-learn (pip install scikit-learn)")
    assert train_digits.main(["--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("held-out accuracy:"))
    correct = int(line.split("wgnn numpy backend")[0].rsplit(", ", 1)[1].split("/")[0])
    # Bit-identical on the machine that built the shipped file; another BLAS may round differently.
    assert abs(correct - RECORDED) <= 2, line
    assert (tmp_path / "digits.wgnn").stat().st_size < 32_000 and (tmp_path / "digits_test.npz").is_file()


def test_demo_exit_status_follows_agreement(monkeypatch, capsys):
    """`wgnn demo` exits 1 when it does not reproduce its reference (a script can rely on it)."""
    from wgnn.tools import cli, demo

    result = demo.run_demo(providers=["numpy"], runs=1)
    assert cli.main(["demo", "--provider", "numpy", "--runs", "1"]) == 0
    worse = dict(result, correct=result["recorded"]["correct"] - 2)
    monkeypatch.setattr(demo, "run_demo", lambda *args, **kwargs: worse)
    assert cli.main(["demo", "--provider", "numpy", "--json"]) == 1
    zoo = {"onnxruntime": {"available": True, "ok": False, "max_rel_error": 0.5}}
    assert not demo.demo_agrees(zoo) and demo.demo_agrees({"onnxruntime": {"available": False}})
    capsys.readouterr()
