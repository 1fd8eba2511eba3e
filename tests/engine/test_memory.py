"""The memory planner: reuse across disjoint lifetimes, no aliasing of live tensors, alignment,
and the saving it brings to a real session."""
from __future__ import annotations

import numpy as np
import pytest
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.engine.memory import Lifetime, align, plan_memory

import wgnn


def live_together(a: Lifetime, b: Lifetime) -> bool:
    return a.first <= b.last and b.first <= a.last


def check_plan(lifetimes: list[Lifetime], alignment: int):
    plan = plan_memory(lifetimes, alignment)
    sizes = {t.name: align(max(t.nbytes, 1), alignment) for t in lifetimes}
    assert set(plan.offsets) == {t.name for t in lifetimes}
    for t in lifetimes:
        assert plan.offsets[t.name] % alignment == 0, f"{t.name} at {plan.offsets[t.name]} breaks alignment"
        assert plan.offsets[t.name] + sizes[t.name] <= plan.peak_bytes
    # Brute force: any two tensors alive at the same step occupy disjoint byte ranges.
    for i, a in enumerate(lifetimes):
        for b in lifetimes[i + 1:]:
            if live_together(a, b):
                a0, b0 = plan.offsets[a.name], plan.offsets[b.name]
                assert a0 + sizes[a.name] <= b0 or b0 + sizes[b.name] <= a0, \
                    f"{a} and {b} alias at offsets {a0}, {b0}"
    assert plan.naive_bytes == sum(sizes.values())
    assert plan.peak_bytes <= plan.naive_bytes
    # No plan can beat the most bytes alive at one step.
    steps = range(min((t.first for t in lifetimes), default=0), max((t.last for t in lifetimes), default=-1) + 1)
    busiest = max((sum(sizes[t.name] for t in lifetimes if t.first <= s <= t.last) for s in steps), default=0)
    assert plan.peak_bytes >= busiest
    return plan


def test_disjoint_lifetimes_share_memory():
    plan = check_plan([Lifetime("a", 1000, 0, 1), Lifetime("b", 1000, 2, 3), Lifetime("c", 1000, 4, 5)], 64)
    assert plan.offsets == {"a": 0, "b": 0, "c": 0}
    assert plan.peak_bytes == 1024 and plan.naive_bytes == 3 * 1024


def test_tensors_live_at_the_same_step_never_alias():
    # b is written by the step that reads a last: both are alive during that step.
    plan = check_plan([Lifetime("a", 100, 0, 1), Lifetime("b", 100, 1, 2)], 16)
    assert plan.offsets["a"] != plan.offsets["b"]


def test_smaller_tensor_reuses_a_hole():
    plan = check_plan([Lifetime("big", 4096, 0, 1), Lifetime("keep", 64, 0, 5), Lifetime("small", 512, 2, 3)], 64)
    assert plan.offsets["small"] == plan.offsets["big"]
    assert plan.peak_bytes == 4096 + 64


def test_empty_and_zero_byte_tensors():
    assert plan_memory([], 64).peak_bytes == 0
    plan = check_plan([Lifetime("zero", 0, 0, 1), Lifetime("other", 10, 0, 1)], 32)
    assert plan.peak_bytes == 64  # a zero-byte tensor still gets a distinct aligned slot


@pytest.mark.parametrize("alignment", [1, 16, 64, 256])
def test_random_lifetimes_brute_force(alignment):
    rng = np.random.default_rng(alignment)
    for trial in range(25):
        count = int(rng.integers(1, 40))
        lifetimes = []
        for i in range(count):
            first = int(rng.integers(0, 30))
            lifetimes.append(Lifetime(f"t{trial}_{i}", int(rng.integers(0, 5000)), first,
                                      first + int(rng.integers(0, 8))))
        check_plan(lifetimes, alignment)


def chain_model(length: int = 10) -> Model:
    """A chain of Unary/Binary ops on a [64, 256] float32 tensor: each intermediate dies one step
    after it is made, so two buffers suffice for all of them."""
    kinds = [("Unary", "relu"), ("Binary", "add"), ("Unary", "tanh"), ("Binary", "mul"), ("Unary", "sigmoid"),
             ("Binary", "sub"), ("Unary", "abs"), ("Binary", "max"), ("Unary", "neg"), ("Binary", "add")]
    nodes, current = [], "x"
    rng = np.random.default_rng(0)
    initializers = {}
    for i in range(length):
        op, kind = kinds[i % len(kinds)]
        out = "y" if i == length - 1 else f"t{i}"
        inputs = [current]
        if op == "Binary":
            initializers[f"c{i}"] = rng.standard_normal(256).astype(np.float32)
            inputs.append(f"c{i}")
        nodes.append(Node(op, inputs, [out], {"kind": kind}, name=f"{kind}{i}"))
        current = out
    graph = Graph(nodes=nodes, inputs=[TensorInfo("x", "float32", (64, 256))],
                  outputs=[TensorInfo("y", "float32", (64, 256))], initializers=initializers)
    return Model(graph)


def chain_reference(model: Model, x: np.ndarray) -> np.ndarray:
    unary = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
             "abs": np.abs, "neg": np.negative}
    binary = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "max": np.maximum}
    for node in model.graph.nodes:
        kind = node.attrs["kind"]
        x = unary[kind](x) if node.op_type == "Unary" else binary[kind](x, model.graph.initializers[node.inputs[1]])
    return x


def test_session_reuses_memory_along_a_chain():
    model = chain_model()
    session = wgnn.Interpreter(model).create_session(providers=["numpy"])
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    y = session.run({"x": x})["y"]
    np.testing.assert_allclose(y, chain_reference(model, x), rtol=1e-5, atol=1e-6)
    memory = session.report()["memory"]["numpy"]
    tensor_bytes = align(64 * 256 * 4, 64)
    assert memory["naive_bytes"] == 9 * tensor_bytes  # nine intermediates; input and output are not pooled
    assert memory["planned_peak_bytes"] < memory["naive_bytes"]
    assert memory["planned_peak_bytes"] == 2 * tensor_bytes
    # Running again reuses the same arena and still gives the right answer.
    x2 = -x
    np.testing.assert_allclose(session.run({"x": x2})["y"], chain_reference(model, x2), rtol=1e-5, atol=1e-6)
