"""Feed validation: what Session.run accepts as input values, and which implicit casts it makes.

Policy (docs/reliability.md has the table):

- numpy arrays keep their values exactly. Their dtype must be the declared one, or one that widens
  to it losslessly within the same family: bool -> bool only; signed -> wider signed (int32 ->
  int64); unsigned -> wider unsigned or wider signed (uint8 -> int32); float16 -> float32 ->
  float64. Everything else is an InputError that says how to convert: narrowing (float64 ->
  float32, int64 -> int32), int <-> float and bool <-> number casts change values or meaning, so
  the caller decides.
- Python values (scalars, nested lists/tuples) have no width of their own; they take the declared
  dtype when their kind fits: bools -> bool; ints -> any integer type their values fit in, or a
  float type; floats -> a float type (rounded to nearest, as numpy does). Floats never become ints.
- An input declared without a dtype is planned as float32 (engine/shapes.bind_input_shapes), so its
  feeds follow the float32 rules.
- Object, string, complex, structured and masked arrays are refused.
- Rank and dims must agree with the declaration: a fixed dim must match, a symbolic dim ("N") takes
  one size across all inputs; -1 and "" accept any size.
- Non-contiguous and non-native-byte-order arrays are copied into C-contiguous native ones; arrays
  already right are passed through without a copy. NaN and Inf pass unchanged.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping

import numpy as np

from .dtypes import DTYPE_CODES
from .errors import InputError
from .graph import TensorInfo

UNDECLARED_DTYPE = "float32"  # what bind_input_shapes plans for an input without a dtype
_FAMILIES = {"b": "bool", "i": "int", "u": "int", "f": "float"}


def lossless_cast(given: np.dtype, declared: np.dtype) -> bool:
    """Whether a numpy array of dtype `given` may be fed to an input of dtype `declared`."""
    given, declared = np.dtype(given), np.dtype(declared)
    if given == declared:
        return True
    family = _FAMILIES.get(given.kind)
    return (family is not None and family == _FAMILIES.get(declared.kind)
            and np.can_cast(given, declared, casting="safe"))


def _show(shape) -> str:
    return "unknown" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _from_python(name: str, value, declared: np.dtype) -> np.ndarray:
    """Lists, tuples and Python scalars converted to the declared dtype when their kind fits."""
    try:
        array = np.asarray(value)
    except (ValueError, OverflowError) as exc:  # ragged nesting, ints past int64
        raise InputError(f'input "{name}": cannot make an array of the given {type(value).__name__}: {exc}') \
            from None
    given = array.dtype
    want = declared.name
    if given.kind == "O":
        raise InputError(f'input "{name}": the given {type(value).__name__} holds values numpy cannot store as '
                         "numbers of one type (None, integers past 64 bits, mixed objects)")
    if given.kind == "b" and declared.kind == "b":
        return array
    if given.kind in "iu" and declared.kind in "iu":
        if array.size:
            info = np.iinfo(declared)
            low, high = int(array.min()), int(array.max())
            if low < info.min or high > info.max:
                bad = low if low < info.min else high
                raise InputError(f'input "{name}": value {bad} does not fit the declared dtype {want} '
                                 f"(range {info.min} .. {info.max})")
        return array.astype(declared)
    if given.kind in "iuf" and declared.kind == "f":
        return array.astype(declared)
    kinds = {"b": "booleans", "i": "integers", "u": "integers", "f": "floats"}
    got = kinds.get(given.kind, f"values of dtype {given}")
    raise InputError(f'input "{name}": expected dtype {want}, got Python {got} (shape {list(array.shape)}); '
                     f"pass np.asarray(..., dtype=np.{want}) if the conversion is intended")


def _as_array(name: str, value, declared: np.dtype) -> np.ndarray:
    if isinstance(value, np.ma.MaskedArray):
        raise InputError(f'input "{name}": masked arrays are not accepted (the mask would be ignored); pass '
                         ".filled(fill_value)")
    if not isinstance(value, (np.ndarray, np.generic)):
        return _from_python(name, value, declared)
    array = np.asarray(value)
    given = array.dtype
    if given.kind not in _FAMILIES or given.name not in DTYPE_CODES:
        raise InputError(f'input "{name}": arrays of dtype {given} cannot be fed (expected {declared.name}); '
                         "wgnn takes bool, integer and float arrays")
    if not lossless_cast(given, declared):
        if given.kind == declared.kind or _FAMILIES[given.kind] == _FAMILIES.get(declared.kind):
            why = "narrowing can change values"
        else:
            why = f"{_FAMILIES[given.kind]} -> {_FAMILIES[declared.kind]} changes meaning"
        raise InputError(f'input "{name}": expected dtype {declared.name}, got {given.name} (shape '
                         f"{list(array.shape)}); {why}: convert with .astype(np.{declared.name}) if intended")
    if given != declared or not given.isnative:
        array = array.astype(declared)  # a lossless widening, or a byte swap to native order
    # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
    return array if array.flags.c_contiguous else np.array(array, order="C")


def _check_shape(info: TensorInfo, shape: tuple[int, ...], symbols: dict[str, tuple[int, str]]) -> None:
    declared = info.shape
    if declared is None:
        return
    if len(declared) != len(shape):
        raise InputError(f'input "{info.name}": expected rank {len(declared)} (shape {_show(declared)}), '
                         f"got rank {len(shape)} (shape {list(shape)})")
    for axis, (want, got) in enumerate(zip(declared, shape)):
        if isinstance(want, str):
            if not want:
                continue
            bound = symbols.setdefault(want, (got, info.name))
            if bound[0] != got:
                raise InputError(f'input "{info.name}": dim {axis} is "{want}" = {bound[0]} in input '
                                 f'"{bound[1]}", got {got} (shape {list(shape)}, declared {_show(declared)})')
        elif want >= 0 and want != got:
            raise InputError(f'input "{info.name}": dim {axis} must be {want} (shape {_show(declared)}), got '
                             f"shape {list(shape)}")


def check_feeds(declared_inputs: list[TensorInfo], feeds) -> dict[str, np.ndarray]:
    """Validate and normalise the feeds of one run (see the module docstring for the policy).

    Arguments:
        declared_inputs: the graph's inputs (engine.graph.TensorInfo: name, dtype, shape).
        feeds: input name -> array (or Python list/scalar), one per declared input.

    Returns:
        input name -> C-contiguous native-order array of the declared dtype, in declaration order.
    """
    if not isinstance(feeds, Mapping):
        raise InputError(f"feeds must be a dict of input name -> array, got {type(feeds).__name__}")
    declared = {t.name: t for t in declared_inputs}
    odd = [k for k in feeds if not isinstance(k, str)]
    if odd:
        raise InputError(f"feed names must be strings, got {odd[:3]!r}; the model's inputs are {list(declared)}")
    unknown = sorted(set(feeds) - set(declared))
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, list(declared), n=1)
            if close:
                hints.append(f"{name!r} -> did you mean {close[0]!r}?")
        hint = f" ({'; '.join(hints)})" if hints else ""
        raise InputError(f"unknown input name(s) {unknown}; the model's inputs are {list(declared)}{hint}")
    missing = [name for name in declared if name not in feeds]
    if missing:
        raise InputError(f"missing feed(s) for input(s) {missing}; every input needs a value "
                         f"(the model's inputs are {list(declared)})")
    checked: dict[str, np.ndarray] = {}
    symbols: dict[str, tuple[int, str]] = {}
    for name, info in declared.items():
        dtype = np.dtype(info.dtype or UNDECLARED_DTYPE)
        array = _as_array(name, feeds[name], dtype)
        _check_shape(info, tuple(array.shape), symbols)
        checked[name] = array
    return checked


class FeedChecker:
    """check_feeds for one graph's inputs, with a fast path for the common repeat call: every
    feed an ndarray of exactly the declared dtype, C-contiguous, in native order, and of the
    shape the last full check accepted (so its dims and symbols were checked then). Anything
    else takes the full check."""

    def __init__(self, declared_inputs: list[TensorInfo]):
        self.declared_inputs = declared_inputs
        self.dtypes = [(t.name, np.dtype(t.dtype or UNDECLARED_DTYPE)) for t in declared_inputs]
        self.accepted: list[tuple[int, ...]] | None = None  # shapes, in declaration order

    def check(self, feeds) -> dict[str, np.ndarray]:
        accepted = self.accepted
        if accepted is not None and type(feeds) is dict and len(feeds) == len(accepted):
            checked = {}
            for (name, dtype), shape in zip(self.dtypes, accepted):
                array = feeds.get(name)
                if (type(array) is not np.ndarray or array.dtype != dtype or array.shape != shape
                        or not array.flags.c_contiguous or not array.dtype.isnative):
                    break
                checked[name] = array
            else:
                return checked
        checked = check_feeds(self.declared_inputs, feeds)
        self.accepted = [tuple(array.shape) for array in checked.values()]
        return checked
