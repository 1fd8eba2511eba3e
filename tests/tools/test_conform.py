"""`wgnn conform` end to end in a subprocess on a small subset (own cases, ONNX node tests and
folders in the ONNX test layout made here), on numpy and every GPU adapter; plus the comparison
rule, both ways of getting the node tests, and the case library's coverage, in process."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from wgnn.tools.conform.compare import compare_output
from wgnn.tools.conform.runner import OUTCOMES

import wgnn

OPS = "^(Relu|Add|Conv|StringNormalizer)$"
X = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
WRONG_AT = (1, 2, 3)
WORDS = np.array(["Monday", "tuesday", "WEDNESDAY"], dtype=object)  # strings: outside wgnn's tensor types


def conform(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "conform", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def write_case(folder, op_type: str, inputs: dict[str, np.ndarray], y: np.ndarray, opset: int = 13) -> None:
    """A folder in the layout older onnx releases ship: model.onnx + test_data_set_0/*.pb."""
    def info(name, value):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)

    graph = helper.make_graph([helper.make_node(op_type, list(inputs), ["y"])], folder.name,
                              [info(k, v) for k, v in inputs.items()], [info("y", y)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    data = folder / "test_data_set_0"
    data.mkdir(parents=True)
    onnx.save(model, folder / "model.onnx")
    for i, (name, value) in enumerate(inputs.items()):
        (data / f"input_{i}.pb").write_bytes(numpy_helper.from_array(value, name).SerializeToString())
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Relu right, Relu with a wrong expected element (a failing case), Relu in float64 (the GPU
    stores 32-bit tensors: it falls back) and StringNormalizer (an op wgnn does not convert)."""
    root = tmp_path_factory.mktemp("conform_cases")
    write_case(root / "test_relu_ok", "Relu", {"x": X}, np.maximum(X, 0))
    wrong = np.maximum(X, 0)
    wrong[WRONG_AT] += 1.0
    write_case(root / "test_relu_wrong", "Relu", {"x": X}, wrong)
    write_case(root / "test_relu_float64", "Relu", {"x": X.astype(np.float64)}, np.maximum(X, 0).astype(np.float64))
    write_case(root / "test_string_normalizer", "StringNormalizer", {"x": WORDS}, WORDS)
    return root


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, folders):
    out = tmp_path_factory.mktemp("conform_out")
    result = conform("--sources", f"own,node,{folders}", "--ops", OPS, "--limit", 20, "--out", out, "--json")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads(result.stdout), out


def expected_targets() -> list[str]:
    return ["numpy"] + [f"wgpu:{a['index']} {a['name']} ({a['backend']})" for a in wgnn.adapters()]


def results(report: dict, case_id: str) -> dict:
    return next(c for c in report["cases"] if c["id"] == case_id)["results"]


def test_report_structure(first_run):
    report, _ = first_run
    targets = expected_targets()
    assert report["targets"] == targets
    env = report["environment"]
    assert env["wgnn"] == wgnn.__version__ and env["onnx"] == onnx.__version__
    assert {"wgpu", "onnxruntime", "numpy", "python", "adapters"} <= set(env)
    assert [a["name"] for a in env["adapters"]] == [a["name"] for a in wgnn.adapters()]
    assert {c["source"] for c in report["cases"]} == {"own", "node", "path"}
    assert len([c for c in report["cases"] if c["source"] == "own"]) == 20  # --limit counts per source
    for case in report["cases"]:
        assert case["op"] in ("Relu", "Add", "Conv", "StringNormalizer"), case["id"]
        assert set(case["results"]) == set(targets), case["id"]
        assert all(r["outcome"] in OUTCOMES for r in case["results"].values())
    for target in targets:
        row = report["summary"][target]
        assert row["total"] == len(report["cases"]) == sum(row[o] for o in OUTCOMES)
    assert {"Relu", "Add", "Conv"} <= set(report["matrix"])
    for target in targets:  # a plain float32 Relu runs on every adapter's GPU kernel, not the CPU
        assert results(report, "own/Relu_nchw")[target]["outcome"] == "pass", target
        assert results(report, "path/test_relu_ok")[target]["outcome"] == "pass", target


def test_failing_case_reported_with_first_mismatch(first_run):
    report, _ = first_run
    for target, result in results(report, "path/test_relu_wrong").items():
        assert result["outcome"] == "fail", target
        [output] = result["outputs"]
        assert output["first_mismatch"]["index"] == list(WRONG_AT)
        assert output["mismatches"] == 1 and output["max_abs"] == pytest.approx(1.0)
        assert output["shape"] == output["expected_shape"] == list(X.shape)
    assert any(f["case"] == "path/test_relu_wrong" for f in report["claimed_failures"]["numpy"])


def test_gpu_fallback_is_counted_apart(first_run):
    report, _ = first_run
    found = results(report, "path/test_relu_float64")
    assert found["numpy"]["outcome"] == "pass"
    for target in expected_targets()[1:]:
        assert found[target]["outcome"] == "fallback", found[target]
        assert "float64" in " ".join(found[target]["fallbacks"][0]["reasons"])
        assert report["summary"][target]["fallback"] >= 1


def test_unsupported_op_is_listed_not_failed(first_run):
    report, _ = first_run
    # With the node suite's StringNormalizer cases.
    assert list(report["unsupported_ops"]) == ["StringNormalizer"]
    assert report["unsupported_ops"]["StringNormalizer"] == len([c for c in report["cases"]
                                                                 if c["op"] == "StringNormalizer"])
    assert all(r["outcome"] == "unsupported" for r in results(report, "path/test_string_normalizer").values())
    for failures in report["claimed_failures"].values():
        assert not any(f["case"] == "path/test_string_normalizer" for f in failures)


def test_html_is_self_contained_and_has_the_matrix(first_run):
    report, out = first_run
    html = (out / "conform.html").read_text()
    assert json.loads((out / "conform.json").read_text())["cases"] == report["cases"]
    assert "<table class=matrix>" in html
    for target in report["targets"]:
        assert target in html
    assert "id='op-Relu'" in html and "path/test_relu_wrong" in html
    assert "first mismatch at [1, 2, 3]" in html
    assert "<script" not in html and "http://" not in html and "https://" not in html


def test_baseline_regression_sets_exit_code(first_run, folders, tmp_path):
    _, out = first_run
    same = conform("--sources", folders, "--ops", OPS, "--baseline", out / "conform.json")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "no regression" in same.stdout
    # A baseline in which the failing and the unsupported case passed: both regress now.
    crafted = json.loads((out / "conform.json").read_text())
    for case in crafted["cases"]:
        if case["id"] in ("path/test_relu_wrong", "path/test_string_normalizer"):
            case["results"]["numpy"]["outcome"] = "pass"
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(crafted))
    worse = conform("--sources", folders, "--ops", OPS, "--adapters", "numpy", "--baseline", baseline)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "2 regression(s)" in worse.stdout
    assert "path/test_relu_wrong on numpy: pass -> fail" in worse.stdout
    assert "path/test_string_normalizer on numpy: pass -> unsupported" in worse.stdout


def test_bad_options_are_one_line_errors(tmp_path):
    for args, fragment in ((["--ops", "(Relu"], "not a valid regular expression"),
                           (["--sources", tmp_path / "missing"], "neither own, node, zoo"),
                           (["--baseline", tmp_path / "none.json"], "file not found")):
        result = conform(*args, "--adapters", "numpy")
        assert result.returncode == 2 and fragment in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


# ------------------------------------------------------------------------------------ in process
def test_compare_rule():
    want = np.array([1.0, np.nan, np.inf, 0.0], np.float32)
    assert compare_output("y", want.copy(), want, 1e-3, 1e-7)["ok"]
    close = want + np.array([1e-4, 0, 0, 0], np.float32)
    assert compare_output("y", close, want, 1e-3, 1e-7)["ok"]
    nan_moved = np.array([1.0, 2.0, np.inf, np.nan], np.float32)
    row = compare_output("y", nan_moved, want, 1e-3, 1e-7)
    assert not row["ok"] and row["mismatches"] == 2 and row["first_mismatch"]["index"] == [1]
    assert row["max_abs"] == "inf"
    assert "dtype float64" in compare_output("y", want.astype(np.float64), want, 1e-3, 1e-7)["message"]
    assert "shape" in compare_output("y", want[:3], want, 1e-3, 1e-7)["message"]
    ints = np.array([[1, 2], [3, 4]], np.int64)
    row = compare_output("y", ints + np.array([[0, 0], [0, 1]]), ints, 1e-3, 1e-7)
    assert not row["ok"] and row["first_mismatch"] == {"index": [1, 1], "got": 5, "expected": 4}
    half = np.array([1000.0], np.float16)  # one float16 step at 1000 is 0.5: within the fp16 tolerance
    assert compare_output("y", half + np.float16(0.5), half, 1e-3, 1e-7)["ok"]
    assert not compare_output("y", half + np.float16(4), half, 1e-3, 1e-7)["ok"]


def test_node_cases_from_data_files(folders, monkeypatch):
    """onnx releases that ship the node tests as files: the loader gives model_dir, not a model."""
    from onnx.backend.test import loader
    from onnx.backend.test.case.test_case import TestCase
    from wgnn.tools.conform.sources import node_cases

    def files_only(data_dir=None, kind=None):
        assert kind == "node"
        return [TestCase(name=d.name, model_name=d.name, url=None, model_dir=str(d), model=None, data_sets=None,
                         kind="node", rtol=1e-3, atol=1e-7) for d in sorted(folders.iterdir())]

    monkeypatch.setattr(loader, "load_model_tests", files_only)
    cases = {c.name: c for c in node_cases()}
    assert cases["test_string_normalizer"].op == "StringNormalizer" and cases["test_relu_ok"].op == "Relu"
    feeds, expected = cases["test_relu_wrong"].load().data_sets[0]
    np.testing.assert_array_equal(feeds["x"], X)
    assert expected[0][WRONG_AT] == max(X[WRONG_AT], 0) + 1


def test_case_library_covers_every_converted_op():
    from wgnn.tools.conform.cases import CASES
    from wgnn.tools.convert.onnx import _load_table
    from wgnn.tools.convert.onnx.table import CONVERTERS

    _load_table()
    assert set(CONVERTERS) <= {c.op_type for c in CASES}
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(c.reference in ("onnx", "ort", "given") for c in CASES)
    assert all((c.expected is not None) == (c.reference == "given") for c in CASES)


def test_constant_shape_inputs(tmp_path):
    """--constant-shape-inputs: a shape operand fed as a graph input becomes an initializer."""
    from wgnn.tools.conform.runner import Target, claimed_ops, run_case
    from wgnn.tools.conform.sources import path_cases

    folder = tmp_path / "test_reshape_fed_shape"
    write_case(folder, "Reshape", {"data": X, "shape": np.array([4, -1, 2], np.int64)}, X.reshape(4, 3, 2))
    [case] = path_cases(str(folder))
    run = run_case(case, [Target("numpy", "numpy")], claimed_ops(), constant_shapes=True)
    assert run.frozen == ["shape"]
    assert [i["name"] for i in run.inputs] == ["data"]
    assert run.results["numpy"].outcome == "pass", run.results["numpy"].error
