"""If, Loop and Scan: branches inlined at resize or after a sync point, bodies run by the engine,
subgraphs that read outer tensors, and the .wgnn round trip of subgraphs."""
import numpy as np
import pytest
from helpers import check_model
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import wgnn

F = T.FLOAT


def vi(name, shape, dtype=F):
    return h.make_tensor_value_info(name, dtype, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def sign_switch(then_nodes=None):
    """y = relu(x + 1) if sum(x) > 0 else relu(x * x): the condition is computed from the data."""
    then = h.make_graph(then_nodes or [h.make_node("Add", ["x", "one"], ["t"])], "then", [], [vi("t", [2, 5])],
                        initializer=[const("one", np.float32(1))])
    other = h.make_graph([h.make_node("Mul", ["x", "x"], ["e"])], "else", [], [vi("e", [2, 5])])
    return model([h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                  h.make_node("Greater", ["s", "zero"], ["c"]),
                  h.make_node("If", ["c"], ["y"], name="switch", then_branch=then, else_branch=other),
                  h.make_node("Relu", ["y"], ["z"])],
                 [vi("x", [2, 5])], [vi("z", [2, 5])], [const("zero", np.float32(0))])


@pytest.mark.parametrize("sign", [1, -1])
def test_if_on_a_computed_condition_is_a_sync_point(sign):
    x = sign * np.linspace(0.5, 2, 10, dtype=np.float32).reshape(2, 5)
    check_model(sign_switch(), {"x": x})


def test_if_branches_are_planned_once_per_condition_value():
    session = wgnn.InferenceSession(sign_switch().SerializeToString(), providers=["numpy"])
    x = np.ones((2, 5), np.float32)
    for sign in (1, -1, 1, -1):
        session.run(None, {"x": sign * x})
    (sync,) = session.session.report()["sync_points"]
    assert (sync["node"], sync["op"], sync["plans_made"]) == ("switch", "If", 2)


def test_if_with_a_constant_condition_is_inlined_without_sync():
    then = h.make_graph([h.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", [3])])
    other = h.make_graph([h.make_node("Abs", ["x"], ["e"])], "else", [], [vi("e", [3])])
    m = model([h.make_node("Shape", ["x"], ["shape"]),
               h.make_node("ReduceSum", ["shape"], ["n"], keepdims=0),
               h.make_node("Greater", ["n", "two"], ["c"]),  # computed from the shape: known at resize
               h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [vi("x", [3])], [vi("y", [3])], [const("two", np.int64(2))])
    x = np.array([-1, 2, -3], np.float32)
    check_model(m, {"x": x})
    session = wgnn.InferenceSession(m.SerializeToString(), providers=["numpy"])
    session.run(None, {"x": x})
    report = session.session.report()
    assert report["sync_points"] == [] and report["ops_per_backend"] == {"numpy": 1}


def test_if_branch_passing_through_outer_tensors_and_nested_if():
    inner_then = h.make_graph([h.make_node("Sub", ["x", "x"], ["it"])], "inner_then", [], [vi("it", [4])])
    inner_else = h.make_graph([h.make_node("Identity", ["x"], ["ie"])], "inner_else", [], [vi("ie", [4])])
    then = h.make_graph([h.make_node("If", ["c2"], ["nested"], then_branch=inner_then, else_branch=inner_else),
                         h.make_node("Identity", ["x"], ["passed"])],
                        "then", [], [vi("nested", [4]), vi("passed", [4])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["neg"]), h.make_node("Abs", ["neg"], ["abs"])], "else", [],
                         [vi("neg", [4]), vi("abs", [4])])
    m = model([h.make_node("If", ["c1"], ["a", "b"], then_branch=then, else_branch=other)],
              [vi("x", [4]), vi("c1", [], T.BOOL), vi("c2", [], T.BOOL)], [vi("a", [4]), vi("b", [4])])
    x = np.array([1, -2, 3, -4], np.float32)
    for c1 in (True, False):
        for c2 in (True, False):
            check_model(m, {"x": x, "c1": np.array(c1), "c2": np.array(c2)})


def counting_loop(with_condition: bool):
    """acc += x each iteration; scan output 2 * acc; stops at M, or when acc[0] > limit."""
    nodes = [h.make_node("Add", ["acc_in", "x"], ["acc_out"]),
             h.make_node("Mul", ["acc_out", "two"], ["scan"])]
    if with_condition:
        nodes += [h.make_node("Gather", ["acc_out", "zero"], ["first"]),
                  h.make_node("Less", ["first", "limit"], ["cond_out"])]
    else:
        nodes.append(h.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = h.make_graph(nodes, "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("acc_in", [3])],
                        [vi("cond_out", [], T.BOOL), vi("acc_out", [3]), vi("scan", [3])],
                        initializer=[const("two", np.float32(2)), const("zero", np.int64(0))])
    return model([h.make_node("Loop", ["M", "cond", "acc0"], ["acc", "scans"], name="loop", body=body)],
                 [vi("x", [3]), vi("M", [], T.INT64), vi("cond", [], T.BOOL), vi("acc0", [3]),
                  vi("limit", [])], [vi("acc", [3]), vi("scans", ["n", 3])])


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_loop_with_trip_count_and_scan_outputs(trips):
    x = np.array([1, 2, 3], np.float32)
    feeds = {"x": x, "M": np.array(trips, np.int64), "cond": np.array(True), "acc0": np.zeros(3, np.float32),
             "limit": np.float32(0)}
    m = counting_loop(with_condition=False)
    m.graph.input.pop()  # limit: unused without the condition
    del feeds["limit"]
    expected_scans = np.stack([2 * k * x for k in range(1, trips + 1)]) if trips else np.zeros((0, 3), np.float32)
    check_model(m, feeds, expected=[trips * x, expected_scans])


def test_loop_stopped_by_its_body_condition_with_captured_tensors():
    x = np.array([1, 2, 3], np.float32)
    feeds = {"x": x, "M": np.array(100, np.int64), "cond": np.array(True), "acc0": np.zeros(3, np.float32),
             "limit": np.float32(4.5)}
    acc, scans = check_model(counting_loop(with_condition=True), feeds)
    np.testing.assert_array_equal(acc, 5 * x)  # stops once acc[0] = 5 > 4.5
    assert scans.shape == (5, 3)


@pytest.mark.parametrize("directions", [(0, 0), (1, 0), (0, 1)])
def test_scan_cumulative_sum(directions):
    body = h.make_graph([h.make_node("Add", ["sum_in", "row"], ["sum_out"]),
                         h.make_node("Identity", ["sum_out"], ["out"])], "body",
                        [vi("sum_in", [3]), vi("row", [3])], [vi("sum_out", [3]), vi("out", [3])])
    m = model([h.make_node("Scan", ["init", "xs"], ["total", "partial"], body=body, num_scan_inputs=1,
                           scan_input_directions=[directions[0]], scan_output_directions=[directions[1]],
                           scan_input_axes=[1], scan_output_axes=[-1])],
              [vi("init", [3]), vi("xs", [3, 4])], [vi("total", [3]), vi("partial", [3, 4])])
    feeds = {"init": np.zeros(3, np.float32), "xs": np.arange(12, dtype=np.float32).reshape(3, 4)}
    check_model(m, feeds, reference="ort")  # onnx.reference scans axis 0 only


def test_subgraph_survives_identity_removal_and_wgnn_round_trip(tmp_path):
    # y_alias = Identity(x) disappears at conversion; the branch reading y_alias must follow.
    then = h.make_graph([h.make_node("Add", ["y_alias", "y_alias"], ["t"])], "then", [], [vi("t", [2])])
    other = h.make_graph([h.make_node("Neg", ["y_alias"], ["e"])], "else", [], [vi("e", [2])])
    m = model([h.make_node("Identity", ["x"], ["y_alias"]),
               h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [vi("x", [2]), vi("c", [], T.BOOL)], [vi("y", [2])])
    path = tmp_path / "branchy.wgnn"
    wgnn.convert(m, str(path))
    session = wgnn.InferenceSession(str(path), providers=["numpy"])
    x = np.array([1.5, -2], np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x, "c": np.array(True)})[0], 2 * x)
    np.testing.assert_array_equal(session.run(None, {"x": x, "c": np.array(False)})[0], -x)


def test_unknown_op_inside_a_subgraph_is_named():
    from wgnn.engine.graph import Graph, Model, Node, TensorInfo

    branch = Graph(nodes=[Node("NoSuchOp", ["x"], ["t"], name="weird")], outputs=[TensorInfo("t", "float32")])
    graph = Graph(nodes=[Node("If", ["c", "x"], ["y"], {"then_branch": branch, "else_branch": branch}, "if")],
                  inputs=[TensorInfo("c", "bool", ()), TensorInfo("x", "float32", (2,))],
                  outputs=[TensorInfo("y", "float32")])
    with pytest.raises(wgnn.UnsupportedOpError, match="NoSuchOp"):
        wgnn.Interpreter(Model(graph))


def test_endless_loop_is_refused(monkeypatch):
    from wgnn.engine import control_flow

    monkeypatch.setattr(control_flow, "MAX_LOOP_ITERATIONS", 50)
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("Identity", ["v_in"], ["v_out"])], "body",
                        [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("v_in", [1])],
                        [vi("cond_out", [], T.BOOL), vi("v_out", [1])])
    m = model([h.make_node("Loop", ["", "cond", "x"], ["y"], name="forever", body=body)],
              [vi("cond", [], T.BOOL), vi("x", [1])], [vi("y", [1])])
    session = wgnn.InferenceSession(m.SerializeToString(), providers=["numpy"])
    with pytest.raises(wgnn.WgnnError, match=r"forever.*50 iterations"):
        session.run(None, {"cond": np.array(True), "x": np.ones(1, np.float32)})
    out = session.run(None, {"cond": np.array(False), "x": np.ones(1, np.float32)})
    np.testing.assert_array_equal(out[0], np.ones(1, np.float32))
