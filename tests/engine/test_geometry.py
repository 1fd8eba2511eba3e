"""engine/geometry.py: region simplification and merging, execution by the numpy Raster kernel,
and the session lowering data-movement ops to Raster steps."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from wgnn.backends.base import Step
from wgnn.backends.numpy.kernel import KERNELS, NumpyBackend, NumpyExecution
from wgnn.engine.geometry import RasterPlan, Region, contiguous_strides, copy_region, finalize, merge_regions, simplify
from wgnn.engine.ops import load_ops
from wgnn.engine.ops.base import OPS, TensorSpec

import wgnn


def run_plan(plan: RasterPlan, inputs: list[np.ndarray], out_shape, dtype=np.float32) -> np.ndarray:
    """Execute a plan with the numpy Raster kernel, as a session step would."""
    load_ops()
    from wgnn.backends import load_backends

    load_backends()
    node = wgnn.Node("Raster", [f"in{i}" for i in range(len(inputs))], ["out"], {}, name="test")
    in_specs = [TensorSpec(x.shape, x.dtype.name) for x in inputs]
    out_specs = [TensorSpec(tuple(out_shape), np.dtype(dtype).name)]
    step = Step(node, OPS["Raster"], {}, node.inputs, node.outputs, in_specs, out_specs, plan=finalize(plan))
    out = np.empty(out_shape, dtype)
    NumpyExecution(NumpyBackend(), step, KERNELS["Raster"]).run(inputs, [out])
    return out


# ------------------------------------------------------------------------------- simplify
def test_simplify_coalesces_contiguous_dims():
    region = simplify(copy_region((2, 3, 4, 5)))
    assert region.size == (120,) and region.src_strides == (1,) and region.dst_strides == (1,)


def test_simplify_drops_size_one_dims():
    region = simplify(Region(0, (1, 3, 1, 4), 5, (99, 9, 77, 2), 1, (50, 4, 60, 1)))
    assert region.size == (3, 4)  # src rows are 9 apart, not 4 * 2: the two dims stay apart
    assert region.src_strides == (9, 2) and region.dst_strides == (4, 1)
    assert (region.src_offset, region.dst_offset) == (5, 1)


def test_simplify_keeps_transposed_dims_and_drops_empty():
    transposed = Region(0, (4, 3), 0, (1, 4), 0, (3, 1))
    assert simplify(transposed).size == (4, 3)
    # Only the inner pair is contiguous in both: (2, 4, 3) -> (2, 12) on the dst side fails for src.
    partial = Region(0, (2, 4, 3), 0, (12, 1, 4), 0, (12, 3, 1))
    assert simplify(partial).size == (2, 4, 3)
    assert simplify(Region(0, (3, 0, 2), 0, (1, 1, 1), 0, (1, 1, 1))) is None
    scalar = simplify(Region(0, (1, 1), 2, (5, 7), 3, (9, 9)))
    assert scalar.size == (1,) and (scalar.src_offset, scalar.dst_offset) == (2, 3)


# --------------------------------------------------------------------------- merge_regions
def _gather_regions(indices, outer=1, dim=10, inner=6):
    """One region per index, as Gather lowers: rows of a (outer, dim, inner) tensor."""
    n = len(indices)
    return [simplify(Region(0, (outer, inner), i * inner, (dim * inner, 1), k * inner, (n * inner, 1)))
            for k, i in enumerate(indices)]


def test_merge_consecutive_gather_rows_into_one_region():
    merged = merge_regions(_gather_regions([0, 1, 2, 3]))
    assert len(merged) == 1
    assert merged[0].size == (24,)  # rows 0..3 of an inner-6 tensor: one contiguous run
    strided = merge_regions(_gather_regions([1, 3, 5, 7]))  # constant step 2: still one region
    assert len(strided) == 1 and strided[0].size == (4, 6) and strided[0].src_strides == (12, 1)
    with_outer = merge_regions(_gather_regions([2, 3, 4], outer=3))
    assert len(with_outer) == 1 and with_outer[0].count == 3 * 3 * 6


def test_merge_stops_at_irregular_steps():
    merged = merge_regions(_gather_regions([0, 1, 2, 7, 3]))
    assert [r.count for r in merged] == [18, 12]  # [0,1,2] then the pair [7,3]
    assert len(merge_regions(_gather_regions([4]))) == 1


def test_merge_concat_of_equal_parts_and_keeps_sources_apart():
    # Concat along axis 0 of two (2, 3) inputs is two regions from different sources: not merged.
    parts = [copy_region((2, 3), src=0), copy_region((2, 3), src=1, dst_offset=6)]
    assert len(merge_regions([simplify(r) for r in parts])) == 2
    # The same input twice merges into one region with a stride-0 outer dim.
    twice = merge_regions([simplify(copy_region((2, 3), src=0)), simplify(copy_region((2, 3), src=0, dst_offset=6))])
    assert len(twice) == 1 and twice[0].size == (2, 6) and twice[0].src_strides == (0, 1)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_plan(RasterPlan(twice), [x], (4, 3)), np.concatenate([x, x]))


# ------------------------------------------------------------------------- raster execution
def test_transpose_plan_runs_on_the_raster_kernel():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    perm = (0, 2, 3, 1)
    out_shape = tuple(x.shape[p] for p in perm)
    src = contiguous_strides(x.shape)
    plan = RasterPlan([Region(0, out_shape, 0, tuple(src[p] for p in perm), 0, contiguous_strides(out_shape))])
    np.testing.assert_array_equal(run_plan(plan, [x], out_shape), x.transpose(perm))


def test_negative_strides_fill_and_int_dtypes():
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    # Reverse both axes into the middle of a (5, 6) output filled with -1.
    plan = RasterPlan([Region(0, (3, 4), 11, (-4, -1), 7, (6, 1))], fill=-1)
    expected = np.full((5, 6), -1, np.int64)
    expected[1:4, 1:5] = x[::-1, ::-1]
    np.testing.assert_array_equal(run_plan(plan, [x], (5, 6), np.int64), expected)
    flags = np.array([True, False, True])
    plan = RasterPlan([Region(0, (2, 3), 0, (0, 1), 0, (3, 1))])  # broadcast rows (stride 0)
    np.testing.assert_array_equal(run_plan(plan, [flags], (2, 3), np.bool_), np.stack([flags, flags]))


# ----------------------------------------------------------------------- session lowering
def _session(nodes, inputs, inits=(), opset=18):
    outputs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None) for n in nodes]
    graph = helper.make_graph(nodes, "geometry", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return wgnn.InferenceSession(model.SerializeToString()), model


def _int64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def test_session_lowers_movement_ops_to_raster_steps():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 3, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 3, 5])
    nodes = [
        helper.make_node("Transpose", ["x"], ["transpose"], perm=[0, 2, 3, 1]),
        helper.make_node("Concat", ["x", "y"], ["concat"], axis=1),
        helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["slice"]),
        helper.make_node("Pad", ["x", "pads"], ["pad"], mode="reflect"),
        helper.make_node("Tile", ["x", "repeats"], ["tile"]),
        helper.make_node("Expand", ["x", "shape"], ["expand"]),
        helper.make_node("DepthToSpace", ["x"], ["d2s"], blocksize=2, mode="CRD"),
        helper.make_node("Gather", ["x", "indices"], ["gather"], axis=1),
        helper.make_node("Gather", ["x", "scattered"], ["gather2"], axis=1),
    ]
    inits = [_int64("starts", [-1, 0]), _int64("ends", [-100, 5]), _int64("axes", [3, 1]), _int64("steps", [-2, 2]),
             _int64("pads", [0, 0, 1, 2, 0, 0, 1, 2]), _int64("repeats", [1, 2, 1, 3]),
             _int64("shape", [3, 1, 1, 1, 1]), _int64("indices", [0, 1, 2, 3]), _int64("scattered", [5, 0, 2])]
    session, model = _session(nodes, [x, y], inits)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 8, 3, 5)).astype(np.float32),
             "y": np.random.default_rng(1).standard_normal((2, 8, 3, 5)).astype(np.float32)}
    got = session.run(None, feeds)
    import onnxruntime as ort

    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, b, node in zip(got, want, nodes, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=node.op_type)

    steps = session.session.steps
    assert all(s.op.op_type == "Raster" for s in steps)
    plans = {s.outputs[0]: s.plan for s in steps}
    assert len(plans["transpose"].regions) == 1
    assert len(plans["concat"].regions) == 2 and {r.src for r in plans["concat"].regions} == {0, 1}
    assert len(plans["slice"].regions) == 1 and any(s < 0 for s in plans["slice"].regions[0].src_strides)
    assert len(plans["tile"].regions) == 1
    assert len(plans["expand"].regions) == 1 and 0 in plans["expand"].regions[0].src_strides
    assert len(plans["d2s"].regions) == 1
    assert len(plans["gather"].regions) == 1  # indices 0..3: one merged region
    assert len(plans["gather2"].regions) == 2  # [5, 0] merges as a pair, 2 stands alone
    # Reflect on two axes: (left, middle, right) x (left, middle, right) pieces, nothing filled.
    assert len(plans["pad"].regions) == 9 and plans["pad"].fill is None
    assert session.session.report()["raster_steps"] == len(nodes)


def test_constant_pad_is_one_region_and_a_fill():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["pad"])]
    inits = [_int64("pads", [1, 2, 0, 1]), helper.make_tensor("value", TensorProto.FLOAT, [], [4.5])]
    session, _ = _session(nodes, [x], inits)
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(session.run(None, {"x": data})[0],
                                  np.pad(data, ((1, 0), (2, 1)), constant_values=4.5))
    (step,) = session.session.steps
    assert step.op.op_type == "Raster" and len(step.plan.regions) == 1 and step.plan.fill == 4.5


@pytest.mark.parametrize("indices_known", [True, False])
def test_gather_falls_back_to_its_kernel_for_runtime_indices(indices_known):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 4])
    inputs, inits = [x], []
    if indices_known:
        inits = [helper.make_tensor("i", TensorProto.INT64, [100], [k % 6 for k in range(100)])]  # > 64
    else:
        inputs.append(helper.make_tensor_value_info("i", TensorProto.INT64, [3]))
    session, _ = _session([helper.make_node("Gather", ["x", "i"], ["g"])], inputs, inits)
    data = np.arange(24, dtype=np.float32).reshape(6, 4)
    feeds = {"x": data} if indices_known else {"x": data, "i": np.array([-1, 0, 3], np.int64)}
    expected = data[[k % 6 for k in range(100)]] if indices_known else data[[5, 0, 3]]
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected)
    assert [s.op.op_type for s in session.session.steps] == ["Gather"]
