"""Unary and Binary families on numpy. Adding a kind is one line in a table here."""
from __future__ import annotations

import functools
import math

import numpy as np

from . import compiled
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


def _chunked(x: np.ndarray, fn, out: np.ndarray | None = None) -> np.ndarray:
    """fn (1-D float64 -> float64) applied to x chunk by chunk, the result in x's shape and dtype,
    written to out when given (out may be x: each chunk is read before it is written)."""
    v = np.asarray(x)
    flat = v.reshape(-1)  # 1-D: 0-d arithmetic would give scalars
    if out is not None and not out.flags.c_contiguous:
        np.copyto(out, _chunked(v, fn))
        return out
    if out is None:
        if flat.size <= ERF_CHUNK:
            return fn(flat.astype(np.float64, copy=False)).reshape(v.shape).astype(v.dtype, copy=False)
        out = np.empty(v.shape, v.dtype)
    target = out.reshape(-1)
    for start in range(0, flat.size, ERF_CHUNK):
        target[start:start + ERF_CHUNK] = fn(flat[start:start + ERF_CHUNK].astype(np.float64, copy=False))
    return out


def erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Vectorised erf (float64 inside, the result in x's dtype); keeps the sign of zeros,
    erf(+-inf) = +-1, NaN stays NaN."""
    return _chunked(x, _erf_chunk, out)


def _gelu_chunk(v: np.ndarray) -> np.ndarray:
    y = _erf_chunk(v * (1 / math.sqrt(2)))
    y += 1
    y *= v
    y *= 0.5
    return y


# GELU of float32 inputs: x Phi(x), Phi (the normal CDF) interpolated linearly between the points
# of a grid of step 2^-11 over [-8, 8] (along its chords: under max|Phi''| h^2 / 8 = 7e-9 off), in
# float32 throughout: twelve passes over chunks of ERF_CHUNK elements, in cache. The float64 erf
# path takes about twenty passes over twice the bytes: 1.04 against 0.52 ms on 128 x 1024. Its
# results are within 0.5 ulp of x Phi(x) from 2 on, these within 1.5 ulp (4.8e-7); in [-2, 2] the
# float32 Phi's rounding shows, 6 ulp at most against 3; below -2, where both are many ulp off
# the tiny results, both are within 1.1e-8 (docs/performance.md). Outside [-8, 8] Phi
# is 0 or 1 (the first and last rows: an index is clipped there, and its offset from the grid
# point to [0, h]): -inf gives NaN as the formula does (-inf * 0), +inf gives +inf, NaN stays NaN.
_PHI_STEP = 1 / 2048
_PHI_LIMIT = 8


@functools.lru_cache(maxsize=1)
def phi_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(grid points, Phi there, chord slopes to the next point), float32; Phi(-8) taken as 0.
    Built at the first float32 GELU (32769 erfc calls, about 10 ms)."""
    grid = np.arange(int(2 * _PHI_LIMIT / _PHI_STEP) + 1) * _PHI_STEP - _PHI_LIMIT
    phi = np.array([0.5 * math.erfc(-g / math.sqrt(2)) for g in grid])
    phi[0], phi[-1] = 0.0, 1.0
    slope = np.append(np.diff(phi) / _PHI_STEP, 0.0)
    return grid.astype(np.float32), phi.astype(np.float32), slope.astype(np.float32)


def _gelu_float32(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x Phi(x) of a float32 x into out (contiguous, float32; out may be x: each chunk is read
    before it is written)."""
    flat, target = x.reshape(-1), out.reshape(-1)
    size = min(flat.size, ERF_CHUNK)
    t, row, d, y = (np.empty(size, np.float32), np.empty(size, np.intp), np.empty(size, np.float32),
                    np.empty(size, np.float32))
    grid, value, slope = phi_tables()
    scale, shift = np.float32(1 / _PHI_STEP), np.float32(_PHI_LIMIT / _PHI_STEP)
    last, step = grid.size - 1, np.float32(_PHI_STEP)
    for start in range(0, flat.size, ERF_CHUNK):
        v = flat[start:start + ERF_CHUNK]
        n = v.size
        tn, rn, dn, yn = t[:n], row[:n], d[:n], y[:n]
        np.multiply(v, scale, out=tn)
        tn += shift
        np.clip(tn, 0, last, out=tn)
        np.copyto(rn, tn, casting="unsafe")  # the grid row (NaN: some index, clipped below)
        grid.take(rn, out=dn, mode="clip")
        np.subtract(v, dn, out=dn)  # exact: the grid points are multiples of 2^-10
        np.clip(dn, 0, step, out=dn)
        slope.take(rn, out=yn, mode="clip")
        yn *= dn
        value.take(rn, out=dn, mode="clip")
        yn += dn
        np.multiply(yn, v, out=target[start:start + n])
    return out


def _gelu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x * (1 + erf(x / sqrt(2))) / 2: float32 by the Phi table (_gelu_float32), other types in
    float64 chunk by chunk (as erf), rounded once."""
    v = np.asarray(x)
    if v.dtype == np.float32 and v.ndim and (out is None or (out.dtype == np.float32 and out.flags.c_contiguous)):
        if compiled.enabled() and v.flags.c_contiguous:  # one compiled pass, the same floats: x0.1-0.5 of the time
            target = np.empty_like(v) if out is None else out
            compiled.loops().gelu_table(v.reshape(-1), target.reshape(-1), *phi_tables())
            return target
        with np.errstate(invalid="ignore"):  # NaN to an index; -inf * 0
            return _gelu_float32(v, np.empty_like(v) if out is None else out)
    return _chunked(x, _gelu_chunk, out)


def _arrays(fn):
    """fn computing in place on arrays, given 0-d inputs as 1-element arrays (a ufunc returns a
    scalar for 0-d operands, and out= needs an array). fn(x, *args, out=None) writes its result
    to out when given (then out must not overlap x: see unary_into)."""
    def call(x, *args, out=None):
        x = np.asarray(x)
        if x.ndim == 0:
            return fn(x.reshape(1), *args, out=None if out is None else out.reshape(1)).reshape(())
        return fn(x, *args, out=out)

    call.__doc__ = fn.__doc__
    return call


@_arrays
def _sigmoid(x: np.ndarray, out=None) -> np.ndarray:
    """1 / (1 + exp(-x)), the GPU kernels' form, in one array: four passes (0.96 against 1.87 ms
    for exp(min(x, 0)) / (1 + exp(-|x|)) on 64 x 112 x 112), a few ulp from the true value
    everywhere; below about -88 exp(-x) overflows float32 and the result is 0 instead of a
    number under 1e-38. 16-bit floats go through float32 (exp(-x) overflows float16 at -11)."""
    if x.dtype.itemsize < 4:
        return _into(_sigmoid(x.astype(np.float32)).astype(x.dtype), out)
    y = np.negative(x, out=out)
    np.exp(y, out=y)
    y += 1
    return np.reciprocal(y, out=y)


@_arrays
def _elu(x: np.ndarray, alpha: float, out=None) -> np.ndarray:
    """max(x, alpha expm1(min(x, 0))) for 0 < alpha <= 1 (then alpha (e^x - 1) >= x for x <= 0, and
    0 < x above: the same values as the two-branch form, 1.0 against 4.4-5.3 ms on 64 x 112 x 112);
    np.where otherwise."""
    a = x.dtype.type(alpha)
    if not 0 < alpha <= 1:
        return _into(np.where(x > 0, x, np.expm1(_neg(x)) * a), out)
    y = _neg(x, out)
    np.expm1(y, out=y)
    y *= a
    return np.maximum(x, y, out=y)


@_arrays
def _selu(x: np.ndarray, alpha: float, gamma: float, out=None) -> np.ndarray:
    """gamma (alpha expm1(min(x, 0)) + max(x, 0)) on two arrays: x gamma above 0 (0 + x is x) and
    gamma alpha expm1(x) below, the two-branch form's values; a zero may come out +0 where that
    form gives -0 (6.0 ms on 64 x 112 x 112 through np.where)."""
    y = _neg(x, out)
    np.expm1(y, out=y)
    y *= x.dtype.type(alpha)
    y += np.maximum(x, x.dtype.type(0))
    y *= x.dtype.type(gamma)
    return y


@_arrays
def _celu(x: np.ndarray, alpha: float, out=None) -> np.ndarray:
    """max(0, x) + min(0, alpha expm1(min(x, 0) / alpha)), in place: the same operations in the
    same order as the whole-array expression, which took 13.0 ms on 64 x 112 x 112 (3104 page
    faults per run)."""
    a = x.dtype.type(alpha)
    y = _neg(x, out)
    y /= a
    np.expm1(y, out=y)
    y *= a
    np.minimum(y, x.dtype.type(0), out=y)
    y += np.maximum(x, x.dtype.type(0))
    return y


@_arrays
def _mish(x: np.ndarray, out=None) -> np.ndarray:
    y = _softplus(x, out=out)
    np.tanh(y, out=y)
    y *= x
    return y


@_arrays
def _softplus(x: np.ndarray, out=None) -> np.ndarray:
    """max(x, 0) + log1p(exp(-|x|)), in place (np.logaddexp(x, 0) took 8-11x as long)."""
    y = np.abs(x, out=out)
    np.negative(y, out=y)
    np.exp(y, out=y)
    np.log1p(y, out=y)
    y += np.maximum(x, x.dtype.type(0))
    return y


@_arrays
def _gelu_tanh(x: np.ndarray, out=None) -> np.ndarray:
    """x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 with the cube as x * x * x, in place
    (x ** 3 is np.power: 51 against 0.8 ms on 64 x 112 x 112). 16-bit floats go through float32."""
    if x.dtype.itemsize < 4:
        return _into(_gelu_tanh(x.astype(np.float32)).astype(x.dtype), out)
    t = x.dtype.type
    y = np.multiply(x, x, out=out)
    y *= t(math.sqrt(2 / math.pi) * 0.044715)
    y += t(math.sqrt(2 / math.pi))
    y *= x
    np.tanh(y, out=y)
    y += 1
    y *= x
    y *= t(0.5)
    return y


@_arrays
def _leaky_relu(x: np.ndarray, alpha: float, out=None) -> np.ndarray:
    """max(x, alpha x) for 0 < alpha <= 1 (the usual slopes; 0.16 against 3.8 ms for np.where on 64 x
    112 x 112); np.where otherwise (alpha 0 would turn inf * 0 into NaN)."""
    slope = x.dtype.type(alpha)
    if 0 < alpha <= 1:
        y = np.multiply(x, slope, out=out)
        return np.maximum(x, y, out=y)
    return _into(np.where(x >= 0, x, x * slope), out)


@_arrays
def _thresholded_relu(x: np.ndarray, alpha: float, out=None) -> np.ndarray:
    """x where x > alpha, else 0: x times the mask, then the NaNs (x NaN or infinite times 0) set to
    0, as np.where gives them (0.9 against 2.6 ms on 64 x 112 x 112). A zero may come out -0
    (x negative times 0) where np.where gives +0."""
    y = np.multiply(x, np.greater(x, x.dtype.type(alpha)), out=out)
    np.copyto(y, x.dtype.type(0), where=np.isnan(y))
    return y


@_arrays
def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float, out=None) -> np.ndarray:
    y = np.multiply(x, x.dtype.type(alpha), out=out)
    y += x.dtype.type(beta)
    return np.clip(y, 0, 1, out=y)


@_arrays
def _hard_swish(x: np.ndarray, out=None) -> np.ndarray:
    y = np.divide(x, x.dtype.type(6), out=out)
    y += x.dtype.type(0.5)
    np.clip(y, 0, 1, out=y)
    y *= x
    return y


@_arrays
def _softsign(x: np.ndarray, out=None) -> np.ndarray:
    y = np.abs(x, out=out)
    y += 1
    return np.divide(x, y, out=y)


@_arrays
def _clip(x: np.ndarray, low: float, high: float, out=None) -> np.ndarray:
    y = np.maximum(x, _limit(x, low), out=out)
    return np.minimum(y, _limit(x, high), out=y)


@_arrays
def _shrink(x: np.ndarray, lambd: float, bias: float, out=None) -> np.ndarray:
    """x + bias below -lambd, x - bias above lambd, else 0 (NaN too). Numpy's masked passes are
    slow, so the two usual forms are plain passes (64 x 112 x 112: 0.8-0.9 against 9.5 ms):
    bias = lambd (soft shrink) is x - clip(x, -lambd, lambd), bias = 0 (hard shrink) x times the
    mask |x| > lambd, each with its NaNs set to 0 after; the same values, a zero may be -0. Other
    biases: x - bias, with x + bias put where x < -lambd and 0 in the middle. Integer tensors are
    computed in float64 and truncated back, as onnx.reference does."""
    if np.issubdtype(x.dtype, np.integer):
        wide = x.astype(np.float64)
        return _into(np.where(wide < -lambd, wide + bias, np.where(wide > lambd, wide - bias, 0)).astype(x.dtype),
                     out)
    t = x.dtype.type
    if lambd >= 0 and bias in (lambd, 0):
        if bias:
            y = np.subtract(x, np.clip(x, t(-lambd), t(lambd)), out=out)
        else:
            y = np.abs(x, out=out)
            np.multiply(x, np.greater(y, t(lambd)), out=y)
        np.copyto(y, t(0), where=np.isnan(y))
        return y
    y = np.subtract(x, t(bias), out=out)
    low = np.less(x, t(-lambd))
    np.putmask(y, low, x + t(bias))
    middle = np.greater(x, t(lambd))
    middle |= low
    np.logical_not(middle, out=middle)
    np.putmask(y, middle, t(0))
    return y


def _into(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """result, or out holding it (for the rare branches that compute a new array anyway)."""
    if out is None:
        return result
    np.copyto(out, result, casting="unsafe")
    return out


# The kinds that are one ufunc call for float operands, with a constant extra operand (_ZERO: a
# 0-d zero of the operand's dtype); the fused kernel calls them with out= (fused.py).
_ZERO = object()
UNARY_UFUNCS: dict[str, tuple[np.ufunc, object]] = {
    "relu": (np.maximum, _ZERO),
    "tanh": (np.tanh, None), "exp": (np.exp, None), "log": (np.log, None), "sqrt": (np.sqrt, None),
    "neg": (np.negative, None), "reciprocal": (np.reciprocal, None), "abs": (np.abs, None),
    "floor": (np.floor, None), "ceil": (np.ceil, None), "sign": (np.sign, None),
    "sin": (np.sin, None), "cos": (np.cos, None), "tan": (np.tan, None), "asin": (np.arcsin, None),
    "acos": (np.arccos, None), "atan": (np.arctan, None), "sinh": (np.sinh, None), "cosh": (np.cosh, None),
    "asinh": (np.arcsinh, None), "acosh": (np.arccosh, None), "atanh": (np.arctanh, None),
}


def _ufunc_kind(fn: np.ufunc, const):
    if const is _ZERO:
        return lambda x, a, b, out=None: fn(x, np.zeros((), np.asarray(x).dtype), out=out)
    return lambda x, a, b, out=None: fn(x, out=out)


# kind -> fn(x, alpha, beta, out=None): the result, written to out when given (out must not
# overlap x unless the kind is in IN_PLACE_SAFE; unary_into checks that).
UNARY_FUNCS = {
    **{kind: _ufunc_kind(fn, const) for kind, (fn, const) in UNARY_UFUNCS.items()},
    "identity": lambda x, a, b, out=None: x.copy() if out is None else _into(x, out),
    "leaky_relu": lambda x, a, b, out=None: _leaky_relu(x, a, out=out),
    "sigmoid": lambda x, a, b, out=None: _sigmoid(x, out=out),
    "hard_sigmoid": lambda x, a, b, out=None: _hard_sigmoid(x, a, b, out=out),
    "hard_swish": lambda x, a, b, out=None: _hard_swish(x, out=out),
    "erf": lambda x, a, b, out=None: erf(x, out),
    "gelu": lambda x, a, b, out=None: _gelu(x, out),
    "gelu_tanh": lambda x, a, b, out=None: _gelu_tanh(x, out=out),
    "not": lambda x, a, b, out=None: np.logical_not(x, out=out),
    "clip": lambda x, a, b, out=None: _clip(x, a, b, out=out),
    "softplus": lambda x, a, b, out=None: _softplus(x, out=out),
    "round": lambda x, a, b, out=None: np.round(x, out=out),  # half to even, as ONNX
    "isnan": lambda x, a, b, out=None: np.isnan(x, out=out),
    "isinf": lambda x, a, b, out=None: _into((np.isneginf(x) & bool(a)) | (np.isposinf(x) & bool(b)), out),
    "softsign": lambda x, a, b, out=None: _softsign(x, out=out),
    "elu": lambda x, a, b, out=None: _elu(x, a, out=out),
    "selu": lambda x, a, b, out=None: _selu(x, a, b, out=out),
    "celu": lambda x, a, b, out=None: _celu(x, a, out=out),
    "mish": lambda x, a, b, out=None: _mish(x, out=out),
    "thresholded_relu": lambda x, a, b, out=None: _thresholded_relu(x, a, out=out),
    "shrink": lambda x, a, b, out=None: _shrink(x, a, b, out=out),
    "bitwise_not": lambda x, a, b, out=None: np.invert(x, out=out),
}
# Kinds whose function may write over its own input: one ufunc, erf / GELU (chunk by chunk, each
# chunk read before it is written), and those that read x only in their first pass.
IN_PLACE_SAFE = frozenset(UNARY_UFUNCS) | {"identity", "erf", "gelu", "not", "round", "isnan", "bitwise_not",
                                           "sigmoid", "hard_sigmoid", "clip", "thresholded_relu"}


def _neg(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """min(x, 0): the exponential branch of Elu/Selu/Celu only matters for x < 0; clamping keeps
    the positive inputs from overflowing (fused activations run without an errstate guard)."""
    return np.minimum(x, x.dtype.type(0), out=out)


def _limit(x: np.ndarray, value: float):
    """Clip bounds in the input's type; infinite bounds on integer tensors mean 'no bound'."""
    if np.issubdtype(x.dtype, np.integer) and not math.isfinite(value):
        info = np.iinfo(x.dtype)
        return x.dtype.type(info.max if value > 0 else info.min)
    return x.dtype.type(value)


def apply_unary(kind: str, x: np.ndarray, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    return UNARY_FUNCS[kind](x, alpha, beta)


def unary_into(kind: str, x: np.ndarray, alpha: float, beta: float, out: np.ndarray) -> None:
    """kind applied to x, written to out (of x's shape; out may be x). The function writes there
    itself where out has x's dtype and it may (no overlap, or a kind in IN_PLACE_SAFE); otherwise
    its new array is copied: one array and one pass fewer per run than apply_unary and a copy."""
    direct = out.dtype == x.dtype and (kind in IN_PLACE_SAFE or not np.may_share_memory(x, out))
    result = UNARY_FUNCS[kind](x, alpha, beta, out=out if direct else None)
    if result is not out:
        np.copyto(out, result, casting="unsafe")


# No errstate in the kernels here: the numpy backend runs every step under one (kernel.py).
@numpy_kernel("Unary", writes_outputs=True)
def unary(ex, inputs, outputs):
    x, out = inputs[0], outputs[0]
    if x.shape != out.shape:
        raise RuntimeError(f"{ex.step.label}: Unary input shape {x.shape}, shape inference said {out.shape}")
    attrs = ex.attrs
    unary_into(attrs["kind"], x, attrs["alpha"], attrs["beta"], out)


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        # ONNX integer Div truncates toward zero (C semantics), numpy floors.
        return (np.trunc(a / np.where(b == 0, 1, b))).astype(a.dtype)
    return np.divide(a, b)


def _pow(a, b, out=None):
    if np.issubdtype(a.dtype, np.integer):
        return np.power(a.astype(np.float64), b).astype(a.dtype)
    if b.size == 1 and b.ndim <= a.ndim:  # the output has a's shape
        # Squares and cubes as products, as onnxruntime computes them: np.power's general loop
        # took 49 ms for a cube of 64 x 112 x 112 against 0.2 ms (x * x is np.power's square
        # exactly; a cube differs by at most 2 ulp).
        exponent = float(b.reshape(-1)[0])
        if exponent in (2.0, 3.0):
            y = np.multiply(a, a, out=out)
            if exponent == 3.0:
                y *= a
            return y
    return np.power(a, b.astype(a.dtype), out=out)


def _prelu(x, slope, out=None):
    """min(x, 0) * slope + max(x, 0): x where x >= 0, else x * slope, on two arrays (np.where took
    3.6-4.9 against 0.7 ms on 64 x 112 x 112). A zero result may come out as +0 where the
    two-branch form gives -0 (x = -0, or x * slope underflowing)."""
    y = np.minimum(x, x.dtype.type(0), out=out)
    y *= slope
    y += np.maximum(x, x.dtype.type(0))
    return y


BINARY_FUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _div, "pow": _pow,
    "max": np.maximum, "min": np.minimum,
    "prelu": _prelu,
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


_WRITES_OUT = (_prelu, _pow)


def apply_binary(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return BINARY_FUNCS[kind](a, b)


@numpy_kernel("Binary", writes_outputs=True)
def binary(ex, inputs, outputs):
    fn = BINARY_FUNCS[ex.attrs["kind"]]
    out = outputs[0]
    a, b = inputs
    if type(fn) is np.ufunc:  # straight into the output: no temporary, no copy
        fn(a, b, out=out, casting="unsafe")
        return
    # PRelu and Pow write there too where the output is the first operand's shape and type and
    # does not overlap the operands (they read them after their first write).
    direct = (fn in _WRITES_OUT and out.shape == a.shape and out.dtype == a.dtype and a.dtype.kind == "f"
              and not np.may_share_memory(a, out) and not np.may_share_memory(b, out))
    result = fn(a, b, out=out) if direct else fn(a, b)
    if result is not out:
        np.copyto(out, result, casting="unsafe")


@numpy_kernel("Where")
def where(ex, cond, a, b):
    return np.where(cond, a, b)


@numpy_kernel("Convert")
def convert(ex, x):
    # numpy tensors are always linear: a layout change is a copy of the values.
    return x
