"""No silent wrong answers from the GPU's 32-bit arithmetic (backends/wgpu/backend.py): int64
arithmetic that could pass 2^31, float -> int64 casts, tensors past 2^31 elements and kernel
parameters past int32 are refused (the step runs on numpy, with the reason reported) or raise a
typed error. The checks are tested on specs: nothing huge is allocated."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper
from wgnn.backends.base import Step
from wgnn.backends.wgpu.backend import MAX_GPU_ELEMENTS, overflow_reason, pack_params, to_gpu_array
from wgnn.engine.errors import InputError, WgnnError
from wgnn.engine.graph import Node
from wgnn.engine.ops import load_ops
from wgnn.engine.ops.base import OPS, TensorSpec

import wgnn

load_ops()


def step(op_type: str, in_specs, out_specs, **attrs) -> Step:
    inputs = [f"in{i}" for i in range(len(in_specs))]
    outputs = [f"out{i}" for i in range(len(out_specs))]
    node = Node(op_type, inputs, outputs, attrs, name="n")
    return Step(node, OPS[op_type], attrs, inputs, outputs, list(in_specs), list(out_specs))


def spec(shape, dtype="int64") -> TensorSpec:
    return TensorSpec(tuple(shape), dtype)


@pytest.mark.parametrize("kind", ["add", "sub", "mul", "div"])
def test_int64_arithmetic_is_refused(kind):
    reason = overflow_reason(step("Binary", [spec((4,)), spec((4,))], [spec((4,))], kind=kind))
    assert reason and f"int64 Binary.{kind}" in reason and "does not fit the GPU's int32" in reason


@pytest.mark.parametrize(("op_type", "kind", "dtype"), [
    ("Binary", "max", "int64"), ("Binary", "mod", "int64"), ("Binary", "add", "int32"), ("Binary", "add", "float32"),
    ("Unary", "relu", "int64"), ("Reduce", "max", "int64")])
def test_value_preserving_or_non_int64_kinds_stay_on_the_gpu(op_type, kind, dtype):
    inputs = [spec((4,), dtype)] * (2 if op_type == "Binary" else 1)
    assert overflow_reason(step(op_type, inputs, [spec((4,), dtype)], kind=kind)) is None


def test_comparisons_of_int64_give_bool_and_stay():
    assert overflow_reason(step("Binary", [spec((4,)), spec((4,))], [spec((4,), "bool")], kind="less")) is None


@pytest.mark.parametrize(("op_type", "kind"), [("Unary", "neg"), ("Unary", "abs"), ("Reduce", "sum"),
                                               ("Reduce", "mean"), ("Reduce", "prod")])
def test_int64_unary_and_reductions_that_can_overflow(op_type, kind):
    assert "wrap silently" in overflow_reason(step(op_type, [spec((4,))], [spec((4,))], kind=kind))


def test_int64_matmul_and_float_to_int64_cast():
    assert "MatMul" in overflow_reason(step("MatMul", [spec((2, 3)), spec((3, 2))], [spec((2, 2))]))
    assert "saturate" in overflow_reason(step("Cast", [spec((4,), "float32")], [spec((4,))], to="int64"))
    assert overflow_reason(step("Cast", [spec((4,), "int32")], [spec((4,))], to="int64")) is None
    assert overflow_reason(step("Cast", [spec((4,), "float32")], [spec((4,), "int32")], to="int32")) is None


def test_tensors_past_32_bit_indexing():
    big = spec((2, 2 ** 30), "float32")  # a spec only: 2^31 elements, never allocated
    reason = overflow_reason(step("Unary", [big], [big], kind="relu"))
    assert reason and "2147483648 elements" in reason and "32-bit" in reason
    fits = spec((MAX_GPU_ELEMENTS,), "float32")
    assert overflow_reason(step("Unary", [fits], [fits], kind="relu")) is None
    reason = overflow_reason(step("Binary", [big, spec((1,), "float32")], [spec((1,), "float32")], kind="add"))
    assert "in0" in reason  # inputs count too


def test_params_past_int32_raise_typed_errors():
    packed = pack_params([1, -(2 ** 31), 2 ** 31 - 1, 0.5, np.float32(0.25), np.int64(7)])
    assert packed[:3].tolist() == [1, -(2 ** 31), 2 ** 31 - 1]
    assert packed[3:5].view(np.float32).tolist() == [0.5, 0.25]  # np.float32 is a float, not truncated to 0
    assert packed[5] == 7
    for bad in (2 ** 31, -(2 ** 31) - 1, np.int64(2 ** 40)):
        with pytest.raises(WgnnError, match="does not fit the shader's 32-bit integers"):
            pack_params([0, bad])


def test_int64_uploads_are_checked():
    np.testing.assert_array_equal(to_gpu_array("ok", np.array([2 ** 31 - 1, -(2 ** 31)], np.int64)),
                                  np.array([2 ** 31 - 1, -(2 ** 31)], np.int32))
    with pytest.raises(InputError, match=r'"ids": int64 value 2147483648 does not fit'):
        to_gpu_array("ids", np.array([1, 2 ** 31], np.int64))


@pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
def test_int64_sum_that_passes_int32_is_right_on_a_gpu_session():
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"], name="add"),
                               helper.make_node("Relu", ["a"], ["r"], name="relu")], "overflow",
                              [vi("a", TensorProto.INT64, [3]), vi("b", TensorProto.INT64, [3])],
                              [vi("s", TensorProto.INT64, [3]), vi("r", TensorProto.INT64, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=0))
    a = np.array([2 ** 30, -(2 ** 31), 5], np.int64)
    b = np.array([2 ** 30, -1, 7], np.int64)
    s, r = session.run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(s, a + b)  # 2^31 and -2^31 - 1: wrapped in i32 they would be wrong
    np.testing.assert_array_equal(r, np.maximum(a, 0))
    fallbacks = session.report()["fallbacks"]
    assert [f["op"] for f in fallbacks] == ['Binary "add"']
    assert "wrap silently" in fallbacks[0]["reasons"][0]
