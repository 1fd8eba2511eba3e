"""engine/feeds.check_feeds: names, the lossless-cast policy, ranks and dims, layouts, and the same
checks through sessions."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from wgnn.engine.errors import InputError
from wgnn.engine.feeds import FeedChecker, check_feeds, lossless_cast
from wgnn.engine.graph import TensorInfo
from wgnn.engine.session import Session

import wgnn

INPUTS = [TensorInfo("image", "float32", ("N", 3, 4)), TensorInfo("ids", "int64", ("N", "seq")),
          TensorInfo("mask", "bool", ("N", "seq"))]


def good(n=2, seq=5):
    return {"image": np.zeros((n, 3, 4), np.float32), "ids": np.arange(n * seq, dtype=np.int64).reshape(n, seq),
            "mask": np.ones((n, seq), bool)}


def message(feeds, inputs=INPUTS) -> str:
    with pytest.raises(InputError) as info:
        check_feeds(inputs, feeds)
    return str(info.value)


# -------------------------------------------------------------------------------------- names
def test_valid_feeds_pass_through_without_copies():
    feeds = good()
    checked = check_feeds(INPUTS, feeds)
    assert list(checked) == ["image", "ids", "mask"]
    for name, value in feeds.items():
        assert checked[name] is value


def test_unknown_name_suggests_the_close_one():
    text = message({**good(), "imgae": np.zeros(1)})
    assert "'imgae'" in text and "did you mean 'image'" in text and "['image', 'ids', 'mask']" in text


def test_unknown_name_without_a_close_match_lists_the_inputs():
    text = message({**good(), "zzz": np.zeros(1)})
    assert "'zzz'" in text and "did you mean" not in text and "'ids'" in text


def test_missing_names_are_listed():
    feeds = good()
    del feeds["ids"], feeds["mask"]
    assert "missing feed(s) for input(s) ['ids', 'mask']" in message(feeds)


@pytest.mark.parametrize("feeds", [[np.zeros(3)], "image", None])
def test_feeds_must_be_a_mapping(feeds):
    assert "feeds must be a dict" in message(feeds)


def test_feed_names_must_be_strings():
    assert "must be strings" in message({0: np.zeros(3)})


# -------------------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize(("given", "declared"), [
    ("int32", "int64"), ("int8", "int32"), ("uint8", "int16"), ("uint16", "uint64"), ("float16", "float32"),
    ("float32", "float64"), ("bool", "bool"), ("int64", "int64")])
def test_lossless_widening_is_allowed(given, declared):
    assert lossless_cast(np.dtype(given), np.dtype(declared))
    value = np.array([[0, 1], [1, 0]], dtype=given)
    checked = check_feeds([TensorInfo("x", declared, (2, 2))], {"x": value})["x"]
    assert checked.dtype == np.dtype(declared) and checked.flags.c_contiguous
    np.testing.assert_array_equal(checked, value)


@pytest.mark.parametrize(("given", "declared", "why"), [
    ("float64", "float32", "narrowing"), ("int64", "int32", "narrowing"), ("uint64", "int64", "narrowing"),
    ("int32", "float32", "int -> float"), ("float32", "int64", "float -> int"), ("bool", "float32", "bool -> float"),
    ("int64", "bool", "int -> bool"), ("uint8", "float32", "int -> float")])
def test_lossy_or_meaning_changing_casts_are_refused(given, declared, why):
    assert not lossless_cast(np.dtype(given), np.dtype(declared))
    text = message({"x": np.zeros((2,), given)}, [TensorInfo("x", declared, (2,))])
    assert '"x"' in text and f"expected dtype {declared}, got {given}" in text and why in text
    assert f".astype(np.{declared})" in text


@pytest.mark.parametrize("value", [np.array(["a", "b"]), np.array([1, None], dtype=object),
                                   np.zeros(2, np.complex64), np.zeros(2, [("a", "f4")])])
def test_arrays_of_unsupported_kinds_are_refused(value):
    text = message({"x": value}, [TensorInfo("x", "float32", (2,))])
    assert "cannot be fed" in text and str(value.dtype) in text


def test_masked_arrays_are_refused():
    value = np.ma.masked_array(np.zeros(2, np.float32), mask=[True, False])
    assert "masked" in message({"x": value}, [TensorInfo("x", "float32", (2,))])


def test_python_values_take_the_declared_dtype():
    inputs = [TensorInfo("f", "float32", (2, 2)), TensorInfo("i", "int32", (3,)), TensorInfo("b", "bool", ()),
              TensorInfo("s", "float16", ()), TensorInfo("j", "float32", (2,))]
    checked = check_feeds(inputs, {"f": [[0.1, 2.0], [3.0, 4.5]], "i": (1, -2, 3), "b": True, "s": 1.5,
                                   "j": [1, 2]})
    assert checked["f"].dtype == np.float32 and checked["f"][0, 0] == np.float32(0.1)
    assert checked["i"].dtype == np.int32 and checked["i"].tolist() == [1, -2, 3]
    assert checked["b"].dtype == bool and checked["b"].shape == () and bool(checked["b"])
    assert checked["s"].dtype == np.float16 and checked["j"].dtype == np.float32


@pytest.mark.parametrize(("value", "declared", "expected"), [
    ([1.5, 2.0], "int64", "got Python floats"), ([True], "int64", "got Python booleans"),
    ([2 ** 40], "int32", "value 1099511627776 does not fit"), ([-1], "uint8", "value -1 does not fit"),
    ([2 ** 70], "int64", "cannot store as numbers"), ([1, None], "float32", "cannot store"),
    ([[1, 2], [3]], "float32", "cannot make an array"),
    (["a"], "float32", "got Python values of dtype <U1")])
def test_python_values_that_do_not_fit_are_refused(value, declared, expected):
    assert expected in message({"x": value}, [TensorInfo("x", declared, None)])


def test_undeclared_dtype_follows_float32():
    inputs = [TensorInfo("x", None, (2,))]
    assert check_feeds(inputs, {"x": np.zeros(2, np.float16)})["x"].dtype == np.float32
    assert "expected dtype float32, got int64" in message({"x": np.zeros(2, np.int64)}, inputs)


# ---------------------------------------------------------------------------- ranks and dims
def test_wrong_rank_shows_expected_and_given():
    feeds = good()
    feeds["image"] = np.zeros((2, 3, 4, 1), np.float32)
    assert 'input "image": expected rank 3 (shape [N, 3, 4]), got rank 4 (shape [2, 3, 4, 1])' in message(feeds)


def test_fixed_dim_must_match():
    feeds = good()
    feeds["image"] = np.zeros((2, 5, 4), np.float32)
    assert 'input "image": dim 1 must be 3 (shape [N, 3, 4]), got shape [2, 5, 4]' in message(feeds)


def test_symbolic_dims_bind_across_inputs():
    feeds = good()
    feeds["mask"] = np.ones((2, 6), bool)
    text = message(feeds)
    assert 'input "mask": dim 1 is "seq" = 5 in input "ids", got 6' in text and "declared [N, seq]" in text
    feeds = good()
    feeds["ids"] = np.zeros((3, 5), np.int64)
    assert '"N" = 2 in input "image", got 3' in message(feeds)


def test_unknown_dims_and_unknown_shapes_accept_any_size():
    inputs = [TensorInfo("a", "float32", (-1, "", 2)), TensorInfo("b", "float32", None)]
    checked = check_feeds(inputs, {"a": np.zeros((7, 9, 2), np.float32), "b": np.zeros((1, 2, 3, 4), np.float32)})
    assert checked["a"].shape == (7, 9, 2) and checked["b"].shape == (1, 2, 3, 4)


def test_empty_and_zero_d_arrays():
    inputs = [TensorInfo("e", "float32", ("N", 3)), TensorInfo("s", "int64", ())]
    checked = check_feeds(inputs, {"e": np.zeros((0, 3), np.float32), "s": np.int64(4)})
    assert checked["e"].shape == (0, 3) and checked["s"].shape == () and checked["s"] == 4


# ----------------------------------------------------------------------------------- layouts
def test_non_contiguous_and_swapped_arrays_are_normalised():
    base = np.arange(48, dtype=np.float32).reshape(4, 3, 4)
    strided = base[::2]
    fortran = np.asfortranarray(base[:2])
    swapped = base[:2].astype(">f4")
    inputs = [TensorInfo("x", "float32", (2, 3, 4))]
    for value in (strided, fortran, swapped, base[:2].T.T[:, :, ::-1]):
        checked = check_feeds(inputs, {"x": value})["x"]
        assert checked.flags.c_contiguous and checked.dtype.isnative and checked.dtype == np.float32
        np.testing.assert_array_equal(checked, value)


def test_nan_and_inf_pass_unchanged():
    value = np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)
    checked = check_feeds([TensorInfo("x", "float32", (4,))], {"x": value})["x"]
    assert checked is value


# ------------------------------------------------------------------------------ through sessions
def _model():
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["x", "y"], ["s"], name="add"),
             helper.make_node("Cast", ["ids"], ["idf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Add", ["s", "idf"], ["z"], name="add2")]
    inputs = [vi("x", TensorProto.FLOAT, ["N", 3]), vi("y", TensorProto.FLOAT, ["N", 3]),
              vi("ids", TensorProto.INT64, ["N", 3])]
    graph = helper.make_graph(nodes, "feeds", inputs, [vi("z", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture
def session(monkeypatch):
    # check_feeds is the drop-in replacement of Session._check_feeds; patched in until the session calls it.
    monkeypatch.setattr(Session, "_check_feeds", lambda self, feeds: check_feeds(self.graph.inputs, feeds))
    return wgnn.InferenceSession(_model(), providers=["numpy"])


def test_session_accepts_widened_lists_and_strided_feeds(session):
    x = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]
    y = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    ids = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    (z,) = session.run(None, {"x": x, "y": y, "ids": ids})
    np.testing.assert_array_equal(z, x + np.asarray(y, np.float32) + ids.astype(np.float32))


def test_session_errors_come_from_check_feeds(session):
    ok = {"x": np.zeros((2, 3), np.float32), "y": np.zeros((2, 3), np.float32), "ids": np.zeros((2, 3), np.int64)}
    with pytest.raises(InputError, match="did you mean 'ids'"):
        session.run(None, {**ok, "idz": ok["ids"]})
    with pytest.raises(InputError, match=r'"x": expected dtype float32, got float64'):
        session.run(None, {**ok, "x": np.zeros((2, 3))})
    with pytest.raises(InputError, match=r'"ids": dim 0 is "N" = 2 in input "x", got 4'):
        session.run(None, {**ok, "ids": np.zeros((4, 3), np.int64)})
    with pytest.raises(InputError, match="float -> int"):
        session.run(None, {**ok, "ids": np.zeros((2, 3), np.float32)})


# ------------------------------------------------------------------------- repeat-call fast path
def test_feed_checker_repeats_pass_through_and_anything_different_is_checked_in_full():
    checker = FeedChecker(INPUTS)
    first = good()
    assert all(checker.check(first)[name] is value for name, value in first.items())
    again = good()
    assert all(checker.check(again)[name] is value for name, value in again.items())  # the fast path
    # Each of these differs from the accepted call in one way the fast path must not wave through.
    bad = [({**good(), "ids": good()["ids"].astype(np.int32)}, None),  # widened: converted, not refused
           ({**good(), "ids": good()["ids"].astype(np.float32)}, "int"),
           ({**good(), "mask": np.ones((2, 4), bool)}, "seq"),  # symbol bound to 5 by "ids"
           ({**good(), "image": np.ma.zeros((2, 3, 4), np.float32)}, "masked"),
           ({"image": good()["image"], "ids": good()["ids"], "maks": good()["mask"]}, "did you mean"),
           ({**good(), "image": good()["image"].tolist()}, None),  # Python lists take the dtype
           ({**good(), "image": np.zeros((2, 4, 3), np.float32).transpose(0, 2, 1)}, None)]
    for feeds, error in bad:
        if error is None:
            checked = checker.check(feeds)
            assert all(a.dtype == np.dtype(t.dtype) and a.flags.c_contiguous
                       for a, t in zip(checked.values(), INPUTS))
        else:
            with pytest.raises(InputError, match=error):
                checker.check(feeds)
    bigger = good(n=3, seq=2)
    assert checker.check(bigger)["ids"] is bigger["ids"]  # new shapes: checked in full, then accepted
    assert checker.accepted == [(3, 3, 4), (3, 2), (3, 2)]
    with pytest.raises(InputError, match="seq"):
        checker.check({**good(n=3, seq=2), "mask": np.ones((3, 5), bool)})
