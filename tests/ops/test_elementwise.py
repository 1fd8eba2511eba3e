import numpy as np
import pytest
from helpers import Const, check_op

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 5, 3, 7)).astype(np.float32)  # C = 5: not a multiple of 4


UNARY_OPS = ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "HardSwish", "Softplus"]


@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary(op):
    check_op(op, [X])


@pytest.mark.parametrize("op", ["Log", "Sqrt", "Reciprocal"])
def test_unary_positive(op):
    check_op(op, [np.abs(X) + 0.1])


def test_softplus_extremes():
    check_op("Softplus", [np.array([-100, -20, -1, 0, 1e-3, 1, 20, 100], np.float32)])


def test_erf_edges():
    x = np.array([0, 1e-6, -1e-3, 0.4999, 0.5, 1, -2.5, 4, 10, -10], np.float32)
    check_op("Erf", [x], rtol=1e-6, atol=1e-7)


def test_leaky_relu_and_hard_sigmoid():
    check_op("LeakyRelu", [X], {"alpha": 0.3})
    check_op("HardSigmoid", [X], {"alpha": 0.25, "beta": 0.4})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check_op("Gelu", [X], {"approximate": approximate}, opset=20)


def test_clip_opsets():
    check_op("Clip", [X], {"min": -0.5, "max": 0.7}, opset=6)
    check_op("Clip", [X, Const(np.float32(-0.5)), Const(np.float32(0.5))], opset=13)
    check_op("Clip", [X, None, Const(np.float32(0.2))], opset=13)
    check_op("Clip", [X, np.float32(-0.1), np.float32(0.3)], opset=13)  # bounds fed at run time
    check_op("Clip", [np.arange(-5, 5, dtype=np.int64), Const(np.int64(-2))], opset=13)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary_broadcast(op):
    check_op(op, [X, rng.standard_normal((5, 1, 7)).astype(np.float32) + 3])
    check_op(op, [rng.standard_normal((1,)).astype(np.float32), X])


def test_integer_div_truncates():
    a = np.array([7, -7, 7, -7, 0], np.int64)
    b = np.array([2, 2, -2, -2, 3], np.int64)
    check_op("Div", [a, b])


def test_pow_and_prelu():
    check_op("Pow", [np.abs(X) + 0.5, np.float32(1.7)])
    check_op("PRelu", [X, Const(rng.standard_normal((5, 1, 1)).astype(np.float32))])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual"])
def test_compare(op):
    a = rng.integers(0, 3, (3, 1, 4)).astype(np.int64)
    b = rng.integers(0, 3, (2, 4)).astype(np.int64)
    check_op(op, [a, b])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    check_op(op, [rng.random((3, 4)) > 0.5, rng.random((4,)) > 0.5])


def test_not_and_where():
    cond = rng.random((5, 1, 7)) > 0.5
    check_op("Not", [cond])
    check_op("Where", [cond, X, np.float32(-1)])


def test_variadic():
    check_op("Max", [X, X[:1] * 2, np.float32(0.1)])
    check_op("Sum", [X, X[:, :1]], opset=13)
    check_op("Min", [X])


def test_empty_tensor():
    check_op("Relu", [np.zeros((0, 3), np.float32)])
    check_op("Add", [np.zeros((2, 0, 3), np.float32), np.ones((3,), np.float32)])


def test_mod():
    a = np.array([7, -7, 7, -7, 5], np.int64)
    b = np.array([3, 3, -3, -3, 5], np.int64)
    check_op("Mod", [a, b])
    check_op("Mod", [X, np.float32(0.7)], {"fmod": 1})


def test_mod_float_edges_and_softplus_tail():
    a = np.array([3, -3, 3, -3, 0, 5.5], np.float32)
    b = np.array([np.inf, np.inf, -np.inf, -np.inf, np.inf, 2], np.float32)
    check_op("Mod", [a, b])
    check_op("Softplus", [np.linspace(-30, -8, 23, dtype=np.float32)], rtol=1e-3)


def test_constant_scalars_stay_0d():
    (out,) = check_op("Add", [np.float32(2), Const(np.float32(3))])
    assert out.shape == ()
    for attrs in ({"value_float": 2.5}, {"value_int": 7}):
        (value,) = check_op("Constant", [], attrs)
        assert value.shape == ()


def test_tanh_keeps_relative_precision_near_zero():
    x = np.array([1e-7, -3e-5, 1e-3, -0.02, 0.049, 0.051, 0.3], np.float32)
    check_op("Tanh", [x], rtol=2e-5, atol=0)
