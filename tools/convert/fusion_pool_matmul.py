"""fuse_globalpool_matmul: a classifier head, GlobalPool -> Flatten / Reshape to (N, C) -> MatMul,
becomes one GlobalPoolMatMul node (engine/ops/pool_matmul.py). On the GPU the pair of dispatches of
almost no work (the pooled (N, C, 1, 1) and the logits) becomes one where the head is small
(backends/wgpu/pool_matmul.py); on lavapipe a dispatch costs ~35-50 us of fixed overhead.

Runs after fusion.py's epilogue passes: the MatMul then carries its bias and activation, which
the fused op keeps. What fuses:
- a GlobalPool (avg or max) whose only reader is a Flatten, Reshape or Squeeze that gives exactly
  (N, C) from its (N, C, 1, ...) output under every probe binding of the symbolic dims (so it only
  drops the size-1 axes: element order is unchanged);
- whose only reader is a float32 MatMul as its A input, with trans_a 0 and no residual, B a 2-D
  initializer whose rows (columns with trans_b) are the C channels, and a bias that is absent or
  an initializer broadcasting onto (N, K) without an N axis ((), (1,), (K,), (1, 1), (1, K)).
Neither the pooled nor the flattened tensor may be a graph output or read inside a subgraph.
"""
from __future__ import annotations

from ...engine.graph import Graph, Node
from ...engine.ops.base import get_op
from .quant import _subgraph_reads

RESHAPES = ("Flatten", "Reshape", "Squeeze")
KINDS = ("avg", "max")
MATMUL_ATTRS = ("trans_b", "alpha", "beta", "activation", "activation_alpha", "activation_beta")


def _matmul(graph: Graph, node: Node, channels: int | None) -> bool:
    """Whether the MatMul's operands fit the fused op (channels: C, when the probe knows it)."""
    attrs = get_op("MatMul").resolve_attrs(node)
    weight = graph.initializers.get(node.input(1))
    if attrs["trans_a"] or node.input(3) or weight is None or weight.ndim != 2 or weight.dtype != "float32":
        return False
    rows, columns = weight.shape[::-1] if attrs["trans_b"] else weight.shape
    if channels is not None and rows != channels:
        return False
    if not node.input(2):
        return True
    bias = graph.initializers.get(node.input(2))
    if bias is None or bias.dtype != weight.dtype or bias.ndim > 2 or (bias.ndim == 2 and bias.shape[0] != 1):
        return False
    return bias.size in (1, columns) and (bias.ndim == 0 or bias.shape[-1] in (1, columns))


def _flattens(probes: list[dict], x: str, flat: str) -> int | None:
    """C when `flat` is (N, C) of x's (N, C, spatial...) under every probe, else None."""
    channels = set()
    for probe in probes:
        xs, fs = probe.get(x), probe.get(flat)
        if xs is None or fs is None or len(xs.shape) < 3 or tuple(fs.shape) != tuple(xs.shape[:2]):
            return None
        if fs.dtype != "float32":
            return None
        channels.add(xs.shape[1])
    return channels.pop() if len(channels) == 1 else None


def fuse_globalpool_matmul(graph: Graph) -> None:
    from .fusion import PROBE_BINDINGS, _Rewriter, probe_shapes  # fusion.py lists this pass

    rw = _Rewriter(graph)
    probes = hidden = None
    for matmul in graph.nodes:
        if matmul.op_type != "MatMul" or id(matmul) in rw.removed:
            continue
        flat_name = matmul.input(0)
        flat = rw.producer(flat_name, RESHAPES)
        if flat is None or not rw.sole_reader(flat_name, matmul):
            continue
        pooled_name = flat.input(0)
        pool = rw.producer(pooled_name, ("GlobalPool",))
        if pool is None or pool.attrs.get("kind") not in KINDS or not rw.sole_reader(pooled_name, flat):
            continue
        if not _matmul(graph, matmul, None):
            continue
        if hidden is None:
            hidden = _subgraph_reads(graph)
            probes = [probe_shapes(graph, base) for base in PROBE_BINDINGS]
        if pooled_name in hidden or flat_name in hidden:
            continue
        channels = _flattens(probes, pool.input(0), flat_name)
        if channels is None or not _matmul(graph, matmul, channels):
            continue
        attrs = get_op("MatMul").resolve_attrs(matmul)
        matmul.op_type = "GlobalPoolMatMul"
        matmul.inputs = [pool.input(0), matmul.input(1), matmul.input(2)]
        matmul.attrs = {"kind": pool.attrs["kind"], **{key: attrs[key] for key in MATMUL_ATTRS}}
        rw.removed.update((id(pool), id(flat)))
        for name in (pooled_name, flat_name):
            graph.value_info.pop(name, None)
    rw.finish("fuse_globalpool_matmul")
