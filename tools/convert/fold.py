"""Constant folding at conversion: nodes computed only from constants, and shape computations on
tensors whose shapes are static, are evaluated with the numpy backend and become initializers."""
from __future__ import annotations

from ...backends.base import Step
from ...backends.numpy.kernel import evaluate
from ...engine.errors import ShapeError
from ...engine.graph import Graph
from ...engine.ops import load_ops
from ...engine.ops.base import OPS, InferContext, TensorSpec

# Folding must not blow a model up: outputs larger than this stay computed at run time.
FOLD_LIMIT_ELEMENTS = 1 << 24


def fold_constants(graph: Graph) -> None:
    from ...backends import load_backends

    load_ops()
    load_backends()
    specs: dict[str, TensorSpec] = {}
    for info in graph.inputs:
        if info.is_static() and info.dtype:
            specs[info.name] = TensorSpec(tuple(info.shape), info.dtype)
    for name, value in graph.initializers.items():
        specs[name] = TensorSpec(tuple(value.shape), value.dtype.name)
    outputs = {t.name for t in graph.outputs}
    kept = []
    for node in graph.nodes:
        op = OPS.get(node.op_type)
        in_specs = [specs.get(n) if n else None for n in node.inputs]
        if op is None or any(n and s is None for n, s in zip(node.inputs, in_specs)):
            kept.append(node)
            continue
        attrs = op.resolve_attrs(node)
        values = [graph.initializers.get(n) if n else None for n in node.inputs]
        ctx = InferContext(node, attrs, in_specs, values)
        try:
            outs = op.infer(ctx)
        except ShapeError:
            kept.append(node)  # needs values only known at run time; the session infers it later
            continue
        for name, spec in zip(node.outputs, outs):
            if name:
                specs[name] = spec
        constant = all(v is not None for n, v in zip(node.inputs, values) if n)
        small = sum(o.size for o in outs) <= FOLD_LIMIT_ELEMENTS
        if (op.shape_only or constant) and small and not any(o in outputs for o in node.outputs):
            step = Step(node, op, attrs, list(node.inputs), list(node.outputs), in_specs, outs, values)
            for name, value in zip(node.outputs, evaluate(step, values)):
                if name:
                    graph.initializers[name] = value
            continue
        kept.append(node)
    graph.nodes = kept
