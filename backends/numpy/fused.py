"""FusedElementwise on numpy: the program's steps run one after another with the Unary / Binary
kernels' own functions, so a fused chain computes exactly what the unfused nodes compute.

Steps whose function is a single ufunc call (add, mul, exp, relu = maximum with 0, ...) write into
memory chosen at resize instead of a new array: the output itself, or one of a few scratch arrays
reused once their value is dead (a linear scan over the program). Calling the same ufunc with
out= computes the same values. Other steps (erf, sigmoid, gelu, ...) call their function as the
Unary kernel does and keep the array it returns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...engine.ops.fused import STEP_KINDS, decode_program
from .elementwise import BINARY_FUNCS, UNARY_UFUNCS, apply_binary, apply_unary
from .kernel import numpy_kernel

# div wraps np.divide for float operands of one dtype (elementwise._div). pow is not here: a
# constant square or cube is a product there (elementwise._pow), and fused chains must agree.
BINARY_UFUNCS: dict[str, np.ufunc] = {
    **{k: f for k, f in BINARY_FUNCS.items() if type(f) is np.ufunc and k in STEP_KINDS["Binary"]},
    "div": np.divide,
}
_OUT = -1  # the target "the step's output array", resolved on each run (it may change between runs)


@dataclass
class _Op:
    fn: object  # a ufunc (with target) or a plain function returning a new array
    operands: tuple[int, ...]
    const: tuple = ()  # extra trailing operands (relu's zero)
    target: object = None  # None (fn returns a new array), _OUT or a scratch np.ndarray


def _probe(steps, inputs: int, dtype: np.dtype) -> list[np.dtype]:
    """The dtype of every step's result, from running the program on one-element arrays."""
    values = [np.ones(1, dtype) for _ in range(inputs)]
    with np.errstate(all="ignore"):
        for step in steps:
            operands = [values[i] for i in step.operands]
            if step.family == "Unary":
                values.append(np.asarray(apply_unary(step.kind, operands[0], step.alpha, step.beta)))
            else:
                values.append(np.asarray(apply_binary(step.kind, *operands)))
    return [v.dtype for v in values[inputs:]]


def _plan(ex) -> list[_Op]:
    """The program with a target per ufunc step: the output, or scratch memory whose value died."""
    step_ = ex.step
    inputs = len(step_.inputs)
    steps = decode_program(ex.attrs, inputs)
    out_spec = step_.output_specs[0]
    out_shape, out_dtype = tuple(out_spec.shape), np.dtype(out_spec.dtype)
    dtype = out_dtype  # the inputs' float type (cast inputs are converted to it first)
    shapes = [tuple(s.shape) for s in step_.input_specs]
    dtypes = [dtype] * inputs + _probe(steps, inputs, dtype)
    last_use = {}
    for number, step in enumerate(steps):
        for i in step.operands:
            last_use[i] = number
    holder: dict[int, object] = {}  # value -> the memory holding it (_OUT or a scratch array)
    free: list[object] = []
    out_free = True
    ops = []
    for number, step in enumerate(steps):
        value = inputs + number
        shapes.append(np.broadcast_shapes(*(shapes[i] for i in step.operands)))
        for i in set(step.operands):  # memory of values read here for the last time is free again
            if last_use[i] == number and i in holder:
                memory = holder.pop(i)
                if memory is _OUT:
                    out_free = True
                else:
                    free.append(memory)
        if step.family == "Unary":
            fn, const = UNARY_UFUNCS.get(step.kind, (None, None))
            generic = (lambda kind, a, b: lambda x: apply_unary(kind, x, a, b))(step.kind, step.alpha, step.beta)
            const = () if const is None else (np.zeros((), dtype),)
        else:
            fn, const = BINARY_UFUNCS.get(step.kind), ()
            generic = (lambda kind: lambda x, y: apply_binary(kind, x, y))(step.kind)
        # In place only where the ufunc gives what the function gives: float operands of one dtype.
        exact = fn is not None and all(dtypes[i] == dtype for i in step.operands) and dtypes[value] == dtype
        if not exact:
            ops.append(_Op(generic, step.operands))
            continue
        shape = shapes[value]
        if shape == out_shape and dtype == out_dtype and out_free:
            target, out_free = _OUT, False
        else:
            spot = next((n for n, m in enumerate(free) if m.shape == shape and m.dtype == dtype), None)
            target = np.empty(shape, dtype) if spot is None else free.pop(spot)
        if last_use.get(value) is not None:
            holder[value] = target
        elif target is _OUT:
            out_free = True
        else:
            free.append(target)
        ops.append(_Op(fn, step.operands, const, target))
    return ops


def _prepare(ex) -> None:
    ex.state["ops"] = _plan(ex)
    ex.state["cast"] = frozenset(ex.attrs.get("cast_inputs") or ())


@numpy_kernel("FusedElementwise", writes_outputs=True, prepare=_prepare)
def fused_elementwise(ex, inputs, outputs):
    ops = ex.state.get("ops")
    if ops is None:  # a direct call without prepare
        _prepare(ex)
        ops = ex.state["ops"]
    out = outputs[0]
    cast = ex.state["cast"]
    values = [v.astype(out.dtype) if i in cast else v for i, v in enumerate(inputs)]
    for op in ops:
        args = [values[i] for i in op.operands]
        target = op.target
        if target is None:
            values.append(op.fn(*args))
        else:
            if target is _OUT:
                target = out
            op.fn(*args, *op.const, out=target)
            values.append(target)
    result = values[-1]
    # Steps broadcast among their own operands only; inputs the last step does not reach directly
    # still set the output's shape.
    if result is not out:
        np.copyto(out, result, casting="unsafe")
