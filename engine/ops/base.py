"""Op definitions: attributes with defaults, shape/dtype inference and FLOPs, one class per op type.

An op type is registered by decorating its OpDef subclass with @register_op. Families group op
types (the Unary family holds Relu, Sigmoid, ... as kinds of one op type "Unary").
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import ModelError, ShapeError, UnsupportedOpError, node_label
from ..graph import Node

REQUIRED = object()
ATTR_TYPES = ("int", "float", "string", "ints", "floats", "strings", "tensor", "graph")


@dataclass(frozen=True)
class Attr:
    type: str
    default: Any = REQUIRED


@dataclass
class TensorSpec:
    """A tensor's concrete shape and dtype once the session knows its input shapes."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # exact: numpy's int64 product would wrap on absurd shapes

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


class ValueNotKnown(ShapeError):
    """A shape function needs the value of an input that is computed at run time. The session
    turns this into a sync point: it runs the graph up to this node, then plans the rest with the
    value known."""

    def __init__(self, message: str, input_index: int):
        super().__init__(message)
        self.input_index = input_index


class InferContext:
    """What a shape function sees: resolved attributes, input specs, and the values of inputs
    known at resize (initializers, folded shape computations)."""

    def __init__(self, node: Node, attrs: dict, inputs: list[TensorSpec | None],
                 values: list[np.ndarray | None]):
        self.node = node
        self.attrs = attrs
        self.inputs = inputs
        self.values = values
        # Ops that learn their output shapes only by computing the outputs (Loop, Scan) leave
        # the outputs here, so the session does not compute them twice.
        self.computed: list[np.ndarray] | None = None

    def fail(self, message: str) -> ShapeError:
        shapes = ", ".join(
            f"{name}{list(spec.shape) if spec else ''}"
            for name, spec in zip(self.node.inputs, self.inputs) if name)
        return ShapeError(f"{node_label(self.node)}: {message} (inputs: {shapes})")

    def shape(self, i: int) -> tuple[int, ...]:
        spec = self.inputs[i] if i < len(self.inputs) else None
        if spec is None:
            raise self.fail(f"required input {i} is missing")
        return spec.shape

    def dtype(self, i: int) -> str:
        spec = self.inputs[i] if i < len(self.inputs) else None
        if spec is None:
            raise self.fail(f"required input {i} is missing")
        return spec.dtype

    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def value(self, i: int, *, required: bool = True) -> np.ndarray | None:
        """The value of input i when it is known at resize (needed by shape-like inputs)."""
        if not self.has(i):
            if required:
                raise self.fail(f"required input {i} is missing")
            return None
        value = self.values[i] if i < len(self.values) else None
        if value is None and required:
            raise ValueNotKnown(str(self.fail(
                f'input "{self.node.inputs[i]}" must be known before running (a constant or a '
                "shape computation), but it depends on data computed at run time")), i)
        return value

    def axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < max(rank, 1):
            raise self.fail(f"axis {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis


class OpDef(ABC):
    """Base of every op definition. Subclasses set op_type, family, attrs and override infer()."""

    op_type: ClassVar[str] = ""
    family: ClassVar[str] = ""
    attrs: ClassVar[dict[str, Attr]] = {}
    kinds: ClassVar[tuple[str, ...]] = ()
    # Inputs whose values (not only shapes) are needed to infer output shapes.
    value_inputs: ClassVar[tuple[int, ...]] = ()
    # Outputs depend on input shapes only (Shape, Size): evaluated at resize, never at run.
    shape_only: ClassVar[bool] = False
    # Data movement: lowered to Raster regions by geometry() at resize.
    is_geometry: ClassVar[bool] = False
    # Output shapes depend on the *data* of value_inputs (NonZero, Compress, NonMaxSuppression):
    # when those are only known at run time, the session runs the op on the CPU at a sync point
    # and plans the rest of the graph for the shapes it produced.
    data_dependent: ClassVar[bool] = False

    def resolve_attrs(self, node: Node) -> dict[str, Any]:
        """Attributes with defaults filled in; unknown or ill-typed attributes are ModelErrors."""
        resolved = {}
        for key, value in node.attrs.items():
            spec = self.attrs.get(key)
            if spec is None:
                raise ModelError(f"{node_label(node)} has unknown attribute {key!r}; "
                                 f"{self.op_type} accepts {sorted(self.attrs)}")
            resolved[key] = _check_attr(node, key, spec, value)
        for key, spec in self.attrs.items():
            if key not in resolved:
                if spec.default is REQUIRED:
                    raise ModelError(f"{node_label(node)} lacks required attribute {key!r}")
                resolved[key] = spec.default
        if self.kinds and resolved.get("kind") not in self.kinds:
            raise ModelError(f"{node_label(node)} has kind {resolved.get('kind')!r}; "
                             f"{self.op_type} kinds are {list(self.kinds)}")
        return resolved

    @abstractmethod
    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        """Output specs from input specs, attributes and the input values known at resize."""

    def flops(self, ctx: InferContext, outputs: list[TensorSpec]) -> int:
        """Floating-point operations; by default one per output element."""
        return sum(o.size for o in outputs)

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]):
        """For data-movement ops: one RasterPlan per output (see engine.geometry), or None when
        this instance cannot be lowered (its kernel runs instead)."""
        return None

    def inline(self, ctx: InferContext) -> Inlined | None:
        """For control flow: the nodes that replace this one at resize (If with a known
        condition), or None to keep the node."""
        return None


@dataclass
class Inlined:
    """Nodes (with resolved attributes and ops) that replace a node, and the constants they read."""

    nodes: list[tuple[Node, dict, OpDef]]
    constants: dict[str, np.ndarray]


def _check_attr(node: Node, key: str, spec: Attr, value: Any) -> Any:
    kind = spec.type
    ok = {
        "int": lambda v: isinstance(v, (int, np.integer)),
        "float": lambda v: isinstance(v, (int, float, np.floating, np.integer)),
        "string": lambda v: isinstance(v, str),
        "ints": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, np.integer)) for x in v),
        "floats": lambda v: isinstance(v, (list, tuple))
        and all(isinstance(x, (int, float, np.floating, np.integer)) for x in v),
        "strings": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
        "tensor": lambda v: isinstance(v, np.ndarray),
        "graph": lambda v: v.__class__.__name__ == "Graph",
    }[kind](value)
    if not ok:
        raise ModelError(f"{node_label(node)}: attribute {key!r} should be {kind}, got {value!r:.80}")
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "ints":
        return [int(x) for x in value]
    if kind == "floats":
        return [float(x) for x in value]
    return value


OPS: dict[str, OpDef] = {}


def register_op(cls: type[OpDef]) -> type[OpDef]:
    if cls.op_type in OPS:
        raise RuntimeError(f"op type {cls.op_type} registered twice")
    OPS[cls.op_type] = cls()
    return cls


def get_op(op_type: str) -> OpDef:
    op = OPS.get(op_type)
    if op is None:
        raise UnsupportedOpError(f"unknown op type {op_type!r}", {op_type: 1})
    return op


def broadcast_shapes(ctx: InferContext, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ctx.fail("shapes do not broadcast") from None
