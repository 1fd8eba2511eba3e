"""Stage 1 of resize: bind the input shapes, infer every tensor's shape and dtype, and evaluate
on the CPU the nodes whose results are known before running (Shape, Size and anything computed
from constants only: the dynamic shape subgraphs)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError, ShapeError, node_label
from .graph import Graph, Node, TensorInfo
from .ops.base import InferContext, OpDef, TensorSpec, ValueNotKnown

# Nodes computed from constants are evaluated at resize when their outputs are at most this big.
FOLD_LIMIT_ELEMENTS = 1 << 16
# The largest tensor a model may compute, as models.verify.Limits allows a model to declare.
MAX_TENSOR_ELEMENTS = 2 ** 34


@dataclass
class InferredNode:
    node: Node
    op: OpDef
    attrs: dict
    input_specs: list[TensorSpec | None]
    input_values: list[np.ndarray | None]
    output_specs: list[TensorSpec]
    flops: int
    folded: bool


@dataclass
class ShapeResult:
    specs: dict[str, TensorSpec] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)  # known before running
    nodes: list[InferredNode] = field(default_factory=list)
    symbols: dict[str, int] = field(default_factory=dict)
    sync: SyncPoint | None = None  # set when inference stopped at a run-time value


def bind_input_shapes(inputs: list[TensorInfo],
                      shapes: dict[str, tuple[int, ...]]) -> tuple[dict[str, TensorSpec], dict[str, int]]:
    """Concrete specs of the graph inputs; symbolic dims take the given sizes and must agree."""
    unknown = set(shapes) - {t.name for t in inputs}
    if unknown:
        raise InputError(f"unknown input name(s) {sorted(unknown)}; the model's inputs are "
                         f"{[t.name for t in inputs]}")
    specs: dict[str, TensorSpec] = {}
    symbols: dict[str, int] = {}
    for info in inputs:
        declared = info.shape
        given = shapes.get(info.name)
        if given is None:
            if declared is None or not all(isinstance(d, int) for d in declared):
                raise InputError(f'input "{info.name}" has dynamic shape {_show(declared)}: give its '
                                 "shape (resize) or a feed")
            given = declared
        given = tuple(int(d) for d in given)
        if declared is not None:
            if len(declared) != len(given):
                raise InputError(f'input "{info.name}": expected rank {len(declared)} '
                                 f"(shape {_show(declared)}), got rank {len(given)} (shape {list(given)})")
            for axis, (want, got) in enumerate(zip(declared, given)):
                if isinstance(want, int) and want >= 0 and want != got:
                    raise InputError(f'input "{info.name}": dim {axis} must be {want} '
                                     f"(shape {_show(declared)}), got shape {list(given)}")
                if isinstance(want, str) and want and symbols.setdefault(want, got) != got:
                    raise InputError(f'input "{info.name}": dim {axis} is "{want}" = '
                                     f"{symbols[want]} in another input, got {got}")
        if any(d < 0 for d in given):
            raise InputError(f'input "{info.name}": negative dim in shape {list(given)}')
        specs[info.name] = TensorSpec(given, info.dtype or "float32")
    return specs, symbols


def _show(shape) -> str:
    return "unknown" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


@dataclass
class SyncPoint:
    """Where shape inference stopped: `pending[0]` needs values computed at run time. The nodes
    in `pending` (with their resolved attributes and ops) are planned once those are known."""

    node: Node
    op: OpDef
    reason: str
    pending: list[tuple[Node, dict, OpDef]]


def infer_shapes(graph: Graph, attrs: list[dict], ops: list[OpDef], input_specs: dict[str, TensorSpec],
                 evaluate) -> ShapeResult:
    """Run shape inference over the (topologically sorted) graph; evaluate(step-like, inputs)
    computes a node on the CPU when its result is known before running.

    Ops that inline a subgraph (If with a known condition) are replaced by its nodes. Inference
    stops at the first node that needs a value only known at run time (result.sync)."""
    result = ShapeResult(specs=dict(input_specs))
    for name, value in graph.initializers.items():
        result.specs[name] = TensorSpec(tuple(value.shape), value.dtype.name)
        result.values[name] = value
    work = deque(zip(graph.nodes, attrs, ops))
    while work:
        node, node_attrs, op = work.popleft()
        in_specs = [result.specs.get(n) if n else None for n in node.inputs]
        for name, spec in zip(node.inputs, in_specs):
            if name and spec is None:
                raise ShapeError(f'{node_label(node)}: input "{name}" has no shape (is it produced?)')
        in_values = [result.values.get(n) if n else None for n in node.inputs]
        ctx = InferContext(node, node_attrs, in_specs, in_values)
        try:
            inlined = op.inline(ctx)
            if inlined is not None:
                for name, value in inlined.constants.items():
                    result.specs[name] = TensorSpec(tuple(value.shape), value.dtype.name)
                    result.values[name] = value
                work.extendleft(reversed(inlined.nodes))
                continue
            outs = op.infer(ctx)
        except ValueNotKnown as exc:
            result.sync = SyncPoint(node, op, str(exc), [(node, node_attrs, op), *work])
            break
        if len(outs) < len([o for o in node.outputs if o]):
            raise ShapeError(f"{node_label(node)} declares {len(node.outputs)} outputs, "
                             f"{op.op_type} produces {len(outs)}")
        for spec in outs:
            if any(d < 0 for d in spec.shape):
                raise ctx.fail(f"inferred a negative dim in output shape {list(spec.shape)}")
            if spec.size > MAX_TENSOR_ELEMENTS or any(d > MAX_TENSOR_ELEMENTS for d in spec.shape):
                raise ctx.fail(f"output shape {list(spec.shape)} has more than {MAX_TENSOR_ELEMENTS} elements: "
                               "an absurd size (a corrupted model or feed?)")
        known = all(v is not None for n, v in zip(node.inputs, in_values) if n)
        fold = (op.shape_only or ctx.computed is not None
                or (known and sum(o.size for o in outs) <= FOLD_LIMIT_ELEMENTS))
        inferred = InferredNode(node, op, node_attrs, in_specs, in_values, outs,
                                op.flops(ctx, outs), fold)
        if fold:
            values = ctx.computed if ctx.computed is not None else evaluate(inferred, in_values)
            for name, spec, value in zip(node.outputs, outs, values):
                if tuple(value.shape) != spec.shape:
                    raise ctx.fail(f"evaluated output {name} has shape {value.shape}, inferred {spec.shape}")
                if name:
                    result.values[name] = value
        for name, spec in zip(node.outputs, outs):
            if name:
                result.specs[name] = spec
        result.nodes.append(inferred)
    return result
