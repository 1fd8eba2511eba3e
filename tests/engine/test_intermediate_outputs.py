"""Intermediate tensors requested by name as outputs (MNN's debug API): kept out of memory reuse,
downloaded from the GPU, on every backend; unknown names are InputErrors."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper, numpy_helper

import wgnn

TARGETS = [("numpy",)] + [("wgpu", str(a["index"])) for a in gpu_adapters()]


def chain_model(extra_outputs=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 5, 4])
    nodes = [helper.make_node("Add", ["x", "c"], ["t1"]), helper.make_node("Mul", ["t1", "t1"], ["t2"]),
             helper.make_node("Tanh", ["t2"], ["t3"]), helper.make_node("Sigmoid", ["t3"], ["t4"]),
             helper.make_node("Transpose", ["t4"], ["y"], perm=[0, 2, 3, 1])]
    outputs = [onnx.ValueInfoProto(name=n) for n in ("y", *extra_outputs)]
    constant = numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 6, 1, 1), "c")
    graph = helper.make_graph(nodes, "chain", [x], outputs, [constant])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("target", TARGETS, ids=["-".join(t) for t in TARGETS])
def test_intermediate_tensors_as_outputs(target):
    providers, adapter = (target[0], "numpy"), (int(target[1]) if len(target) > 1 else None)
    config = wgnn.Config(providers=providers if target[0] == "wgpu" else ("numpy",), adapter=adapter)
    # Unoptimised, so fusion keeps every intermediate tensor (fused chains have none).
    session = wgnn.InferenceSession(wgnn.convert(chain_model(), optimize=False), config=config)
    wanted = ["y", "t1", "t2", "t3"]
    reference = ort.InferenceSession(chain_model(wanted[1:]).SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (2, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 6, 5, 4)).astype(np.float32)
        got = session.run(wanted, {"x": x})
        for name, have, want in zip(wanted, got, reference.run(wanted, {"x": x}), strict=True):
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6, err_msg=name)
    assert session.session.extra_outputs == {"t1", "t2", "t3"}
    # Asking for the graph outputs only afterwards still works.
    np.testing.assert_allclose(session.run(None, {"x": x})[0], got[0], rtol=1e-6)


def test_unknown_intermediate_name_is_an_input_error():
    session = wgnn.InferenceSession(chain_model(), providers=["numpy"])
    with pytest.raises(wgnn.InputError, match="no_such_tensor"):
        session.run(["y", "no_such_tensor"], {"x": np.zeros((1, 6, 5, 4), np.float32)})
    with pytest.raises(wgnn.InputError, match=r"'t2'.*optimize=False"):  # fused into one kernel
        session.run(["y", "t2"], {"x": np.zeros((1, 6, 5, 4), np.float32)})
