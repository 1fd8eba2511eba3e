"""Unary and Binary families on numpy. Adding a kind is one line in a table here."""
from __future__ import annotations

import math

import numpy as np

from .kernel import numpy_kernel

# erf by table and a second-order Taylor step: erf is tabulated with its first two derivatives
# (erf' = 2/sqrt(pi) exp(-x^2), erf'' = -2x erf') on a grid of step 1/128 over [0, 6]; |x| is
# rounded to the nearest grid point x0 and erf(x0 + d) = erf(x0) + d (erf'(x0) + d erf''(x0) / 2)
# with |d| <= 1/256. The truncation error is below max|erf'''| d^3 / 6 < 2.3e-8 and float64
# arithmetic adds nothing visible, so float32 results are within an ulp of erf.
# About fifteen numpy calls per chunk; the former series + erfc fit took about fifty.
# Past 6, erf is 1 in float64: the last row is (1, 0, 0).
_ERF_STEP = 128
_ERF_LAST = 6 * _ERF_STEP
# Large inputs go through in chunks of this many elements: each float64 temporary is then 64 KiB,
# under glibc's 128 KiB mmap threshold and in cache. A whole 131072-element array made 1-4 MiB
# temporaries, each a fresh mapping faulted in page by page on every call: 4.9-5.9 ms against
# 0.9-1.3 ms in chunks, in a fresh process (docs/performance.md, the numpy backend's section).
ERF_CHUNK = 8192


def _erf_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    grid = np.arange(_ERF_LAST + 1) / _ERF_STEP
    value = np.array([math.erf(g) for g in grid])
    slope = 2 / math.sqrt(math.pi) * np.exp(-grid * grid)
    value[-1] = 1.0
    slope[-1] = 0.0
    return value, slope, -grid * slope  # erf, erf', erf'' / 2


_ERF_VALUE, _ERF_SLOPE, _ERF_CURVE = _erf_tables()


def _erf_chunk(v: np.ndarray) -> np.ndarray:
    """erf of a 1-D float64 array, as a new float64 array."""
    a = np.abs(v)
    t = np.multiply(a, _ERF_STEP)
    t += 0.5
    np.fmin(t, _ERF_LAST, out=t)  # NaN and inf go to the last row too
    row = t.astype(np.intp)
    d = np.multiply(row, 1 / _ERF_STEP, out=t)  # the grid point, exactly
    np.subtract(a, d, out=d)
    np.minimum(d, 0.5, out=d)  # inf: the last row has zero slopes, and inf * 0 would be NaN
    y = _ERF_CURVE.take(row)
    y *= d
    y += _ERF_SLOPE.take(row)
    y *= d
    y += _ERF_VALUE.take(row)
    return np.copysign(y, v, out=y)


def _chunked(x: np.ndarray, fn) -> np.ndarray:
    """fn (1-D float64 -> float64) applied to x chunk by chunk, the result in x's shape and dtype."""
    v = np.asarray(x)
    flat = v.reshape(-1)  # 1-D: 0-d arithmetic would give scalars
    if flat.size <= ERF_CHUNK:
        return fn(flat.astype(np.float64, copy=False)).reshape(v.shape).astype(v.dtype, copy=False)
    out = np.empty(flat.shape, v.dtype)
    for start in range(0, flat.size, ERF_CHUNK):
        out[start:start + ERF_CHUNK] = fn(flat[start:start + ERF_CHUNK].astype(np.float64, copy=False))
    return out.reshape(v.shape)


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised erf (float64 inside, the result in x's dtype); keeps the sign of zeros,
    erf(+-inf) = +-1, NaN stays NaN."""
    return _chunked(x, _erf_chunk)


def _gelu_chunk(v: np.ndarray) -> np.ndarray:
    y = _erf_chunk(v * (1 / math.sqrt(2)))
    y += 1
    y *= v
    y *= 0.5
    return y


def _gelu(x: np.ndarray) -> np.ndarray:
    """x * (1 + erf(x / sqrt(2))) / 2, in float64 chunk by chunk (as erf) and rounded once."""
    return _chunked(x, _gelu_chunk)


def _arrays(fn):
    """fn computing in place on arrays, given 0-d inputs as 1-element arrays (a ufunc returns a
    scalar for 0-d operands, and out= needs an array)."""
    def call(x, *args):
        x = np.asarray(x)
        return fn(x.reshape(1), *args).reshape(()) if x.ndim == 0 else fn(x, *args)

    call.__doc__ = fn.__doc__
    return call


@_arrays
def _sigmoid(x: np.ndarray) -> np.ndarray:
    """exp(min(x, 0)) / (1 + exp(-|x|)): e / (1 + e) below 0, 1 / (1 + e) above, with e = exp(-|x|)
    never overflowing; two arrays of x's size and in-place passes (np.where over the two branches
    made six temporaries: 12.6 against 1.8 ms on 64 x 112 x 112, in a fresh process)."""
    zero = x.dtype.type(0)
    y = np.minimum(x, zero)
    np.exp(y, out=y)
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    e += 1
    return np.divide(y, e, out=y)


@_arrays
def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    """max(x, alpha expm1(min(x, 0))) for 0 < alpha <= 1 (then alpha (e^x - 1) >= x for x <= 0, and
    0 < x above: the same values as the two-branch form, 1.0 against 4.4-5.3 ms on 64 x 112 x 112);
    np.where otherwise."""
    a = x.dtype.type(alpha)
    if not 0 < alpha <= 1:
        return np.where(x > 0, x, np.expm1(_neg(x)) * a)
    y = _neg(x)
    np.expm1(y, out=y)
    y *= a
    return np.maximum(x, y, out=y)


@_arrays
def _celu(x: np.ndarray, alpha: float) -> np.ndarray:
    """max(0, x) + min(0, alpha expm1(min(x, 0) / alpha)), in place: the same operations in the
    same order as the whole-array expression, which took 13.0 ms on 64 x 112 x 112 (3104 page
    faults per run)."""
    a = x.dtype.type(alpha)
    y = _neg(x)
    y /= a
    np.expm1(y, out=y)
    y *= a
    np.minimum(y, x.dtype.type(0), out=y)
    y += np.maximum(x, x.dtype.type(0))
    return y


@_arrays
def _mish(x: np.ndarray) -> np.ndarray:
    y = _softplus(x)
    np.tanh(y, out=y)
    y *= x
    return y


@_arrays
def _softplus(x: np.ndarray) -> np.ndarray:
    """max(x, 0) + log1p(exp(-|x|)), in place (np.logaddexp(x, 0) took 8-11x as long)."""
    y = np.abs(x)
    np.negative(y, out=y)
    np.exp(y, out=y)
    np.log1p(y, out=y)
    y += np.maximum(x, x.dtype.type(0))
    return y


@_arrays
def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 with the cube as x * x * x, in place
    (x ** 3 is np.power: 51 against 0.8 ms on 64 x 112 x 112). 16-bit floats go through float32."""
    if x.dtype.itemsize < 4:
        return _gelu_tanh(x.astype(np.float32)).astype(x.dtype)
    t = x.dtype.type
    y = np.multiply(x, x)
    y *= t(math.sqrt(2 / math.pi) * 0.044715)
    y += t(math.sqrt(2 / math.pi))
    y *= x
    np.tanh(y, out=y)
    y += 1
    y *= x
    y *= t(0.5)
    return y


@_arrays
def _leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    """max(x, alpha x) for 0 < alpha <= 1 (the usual slopes; 0.16 against 3.8 ms for np.where on 64 x
    112 x 112); np.where otherwise (alpha 0 would turn inf * 0 into NaN)."""
    slope = x.dtype.type(alpha)
    if 0 < alpha <= 1:
        y = np.multiply(x, slope)
        return np.maximum(x, y, out=y)
    return np.where(x >= 0, x, x * slope)


@_arrays
def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    y = np.multiply(x, x.dtype.type(alpha))
    y += x.dtype.type(beta)
    return np.clip(y, 0, 1, out=y)


@_arrays
def _hard_swish(x: np.ndarray) -> np.ndarray:
    y = np.divide(x, x.dtype.type(6))
    y += x.dtype.type(0.5)
    np.clip(y, 0, 1, out=y)
    y *= x
    return y


@_arrays
def _softsign(x: np.ndarray) -> np.ndarray:
    y = np.abs(x)
    y += 1
    return np.divide(x, y, out=y)


@_arrays
def _clip(x: np.ndarray, low: float, high: float) -> np.ndarray:
    y = np.maximum(x, _limit(x, low))
    return np.minimum(y, _limit(x, high), out=y)


UNARY_FUNCS = {
    "identity": lambda x, a, b: x.copy(),
    "relu": lambda x, a, b: np.maximum(x, np.zeros((), x.dtype)),
    "leaky_relu": lambda x, a, b: _leaky_relu(x, a),
    "sigmoid": lambda x, a, b: _sigmoid(x),
    "hard_sigmoid": lambda x, a, b: _hard_sigmoid(x, a, b),
    "hard_swish": lambda x, a, b: _hard_swish(x),
    "tanh": lambda x, a, b: np.tanh(x),
    "erf": lambda x, a, b: erf(x),
    "gelu": lambda x, a, b: _gelu(x),
    "gelu_tanh": lambda x, a, b: _gelu_tanh(x),
    "exp": lambda x, a, b: np.exp(x),
    "log": lambda x, a, b: np.log(x),
    "sqrt": lambda x, a, b: np.sqrt(x),
    "neg": lambda x, a, b: np.negative(x),
    "reciprocal": lambda x, a, b: np.reciprocal(x),
    "abs": lambda x, a, b: np.abs(x),
    "floor": lambda x, a, b: np.floor(x),
    "ceil": lambda x, a, b: np.ceil(x),
    "not": lambda x, a, b: np.logical_not(x),
    "clip": lambda x, a, b: _clip(x, a, b),
    "softplus": lambda x, a, b: _softplus(x),
    "sign": lambda x, a, b: np.sign(x),
    "round": lambda x, a, b: np.round(x),  # half to even, as ONNX
    "isnan": lambda x, a, b: np.isnan(x),
    "isinf": lambda x, a, b: (np.isneginf(x) & bool(a)) | (np.isposinf(x) & bool(b)),
    "softsign": lambda x, a, b: _softsign(x),
    "elu": lambda x, a, b: _elu(x, a),
    "selu": lambda x, a, b: np.where(x > 0, x, np.expm1(_neg(x)) * x.dtype.type(a)) * x.dtype.type(b),
    "celu": lambda x, a, b: _celu(x, a),
    "mish": lambda x, a, b: _mish(x),
    "thresholded_relu": lambda x, a, b: np.where(x > x.dtype.type(a), x, 0).astype(x.dtype),
    "shrink": lambda x, a, b: _shrink(x, a, b),
    "sin": lambda x, a, b: np.sin(x), "cos": lambda x, a, b: np.cos(x), "tan": lambda x, a, b: np.tan(x),
    "asin": lambda x, a, b: np.arcsin(x), "acos": lambda x, a, b: np.arccos(x),
    "atan": lambda x, a, b: np.arctan(x), "sinh": lambda x, a, b: np.sinh(x), "cosh": lambda x, a, b: np.cosh(x),
    "asinh": lambda x, a, b: np.arcsinh(x), "acosh": lambda x, a, b: np.arccosh(x),
    "atanh": lambda x, a, b: np.arctanh(x),
    "bitwise_not": lambda x, a, b: np.invert(x),
}


def _neg(x: np.ndarray) -> np.ndarray:
    """min(x, 0): the exponential branch of Elu/Selu/Celu only matters for x < 0; clamping keeps
    the positive inputs from overflowing (fused activations run without an errstate guard)."""
    return np.minimum(x, x.dtype.type(0))


def _shrink(x: np.ndarray, lambd: float, bias: float) -> np.ndarray:
    # Integer tensors: computed in float64 and truncated back, as onnx.reference does.
    wide = x.astype(np.float64) if np.issubdtype(x.dtype, np.integer) else x
    bias_value = wide.dtype.type(bias)
    return np.where(wide < -lambd, wide + bias_value, np.where(wide > lambd, wide - bias_value, 0)).astype(x.dtype)


def _limit(x: np.ndarray, value: float):
    """Clip bounds in the input's type; infinite bounds on integer tensors mean 'no bound'."""
    if np.issubdtype(x.dtype, np.integer) and not math.isfinite(value):
        info = np.iinfo(x.dtype)
        return x.dtype.type(info.max if value > 0 else info.min)
    return x.dtype.type(value)


def apply_unary(kind: str, x: np.ndarray, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    return UNARY_FUNCS[kind](x, alpha, beta)


# No errstate in the kernels here: the numpy backend runs every step under one (kernel.py).
@numpy_kernel("Unary")
def unary(ex, x):
    return apply_unary(ex.attrs["kind"], x, ex.attrs["alpha"], ex.attrs["beta"])


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        # ONNX integer Div truncates toward zero (C semantics), numpy floors.
        return (np.trunc(a / np.where(b == 0, 1, b))).astype(a.dtype)
    return np.divide(a, b)


def _pow(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return np.power(a.astype(np.float64), b).astype(a.dtype)
    if b.size == 1 and b.ndim <= a.ndim:  # the output has a's shape
        # Squares and cubes as products, as onnxruntime computes them: np.power's general loop
        # took 49 ms for a cube of 64 x 112 x 112 against 0.2 ms (x * x is np.power's square
        # exactly; a cube differs by at most 2 ulp).
        exponent = float(b.reshape(-1)[0])
        if exponent in (2.0, 3.0):
            y = np.multiply(a, a)
            if exponent == 3.0:
                y *= a
            return y
    return np.power(a, b.astype(a.dtype))


def _prelu(x, slope):
    """min(x, 0) * slope + max(x, 0): x where x >= 0, else x * slope, on two arrays (np.where took
    3.6-4.9 against 0.7 ms on 64 x 112 x 112). A zero result may come out as +0 where the
    two-branch form gives -0 (x = -0, or x * slope underflowing)."""
    y = np.minimum(x, x.dtype.type(0))
    y *= slope
    y += np.maximum(x, x.dtype.type(0))
    return y


BINARY_FUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _div, "pow": _pow,
    "max": np.maximum, "min": np.minimum,
    "prelu": lambda x, slope: _prelu(x, slope),
    "mod": np.mod, "fmod": np.fmod,
    "equal": np.equal, "less": np.less, "greater": np.greater,
    "greater_equal": np.greater_equal, "less_equal": np.less_equal,
    "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "shift_left": lambda a, b: _shift(a, b, left=True), "shift_right": lambda a, b: _shift(a, b, left=False),
}


def _shift(a: np.ndarray, b: np.ndarray, *, left: bool) -> np.ndarray:
    """Shifts with amounts outside [0, bits) defined (numpy/C leave them undefined): 0, or the sign
    fill for right shifts of signed values."""
    bits = a.dtype.itemsize * 8
    valid = (b >= 0) & (b < bits)
    amount = np.where(valid, b, 0).astype(a.dtype)
    if left:
        # Left shifts of signed values as bit patterns (no overflow semantics).
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        shifted = np.left_shift(a.view(unsigned), amount.view(unsigned)).view(a.dtype)
        return np.where(valid, shifted, a.dtype.type(0))
    fill = np.where(a < 0, a.dtype.type(-1), a.dtype.type(0)) if np.issubdtype(a.dtype, np.signedinteger) else 0
    return np.where(valid, np.right_shift(a, amount), fill).astype(a.dtype)


def apply_binary(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return BINARY_FUNCS[kind](a, b)


@numpy_kernel("Binary", writes_outputs=True)
def binary(ex, inputs, outputs):
    fn = BINARY_FUNCS[ex.attrs["kind"]]
    out = outputs[0]
    if type(fn) is np.ufunc:  # straight into the output: no temporary, no copy
        fn(inputs[0], inputs[1], out=out, casting="unsafe")
    else:
        np.copyto(out, fn(inputs[0], inputs[1]), casting="unsafe")


@numpy_kernel("Where")
def where(ex, cond, a, b):
    return np.where(cond, a, b)


@numpy_kernel("Convert")
def convert(ex, x):
    # numpy tensors are always linear: a layout change is a copy of the values.
    return x
