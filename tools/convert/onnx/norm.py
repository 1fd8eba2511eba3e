"""ONNX BatchNormalization / LayerNormalization / InstanceNormalization / GroupNormalization /
RMSNormalization / LpNormalization / LRN / MeanVarianceNormalization -> wgnn BatchNorm / LayerNorm /
InstanceNorm / GroupNorm / RMSNorm / LpNorm / LRN / MeanVarianceNorm (inference only)."""
from __future__ import annotations

from ....engine.dtypes import ONNX_DTYPES
from .table import onnx_op


@onnx_op("BatchNormalization")
def batch_normalization(ctx, node):
    """Opsets 1..15. Training (training_mode=1, or any of the running/saved statistics outputs)
    is not supported. BatchNormalization-7 spatial=0 keeps per-activation (C, D1, ...) parameters,
    which the IR op accepts as they are; is_test / consumed_inputs / momentum do not matter in
    inference."""
    if node.attrs.get("training_mode", 0):
        raise ctx.fail("training_mode=1 is not supported (wgnn runs inference)")
    extra = [name for name in node.outputs[1:] if name]
    if extra:
        raise ctx.fail(f"training outputs {extra} (running or saved statistics) are not supported")
    if len([name for name in node.inputs if name]) != 5:
        raise ctx.fail("expects 5 inputs: X, scale, B, input_mean, input_var")
    ctx.emit("BatchNorm", node.inputs[:5], node.outputs[:1], {"epsilon": node.attrs.get("epsilon", 1e-5)})


@onnx_op("InstanceNormalization")
def instance_normalization(ctx, node):
    ctx.emit("InstanceNorm", node.inputs[:3], node.outputs[:1], {"epsilon": node.attrs.get("epsilon", 1e-5)})


@onnx_op("LayerNormalization")
def layer_normalization(ctx, node):
    attrs = {"axis": node.attrs.get("axis", -1), "epsilon": node.attrs.get("epsilon", 1e-5),
             "stash_dtype": _stash(ctx, node)}
    ctx.emit("LayerNorm", node.inputs[:3], node.outputs[:3], attrs)


def _stash(ctx, node) -> str:
    stash = node.attrs.get("stash_type", 1)
    dtype = ONNX_DTYPES.get(stash)
    if dtype not in ("float16", "float32", "float64"):
        raise ctx.fail(f"stash_type {stash} is not a supported float type")
    return dtype


@onnx_op("GroupNormalization")
def group_normalization(ctx, node):
    """Opset 18: scale and bias per group (num_groups,); opset 21: per channel (C,), and a
    stash_type for the statistics."""
    if "num_groups" not in node.attrs:
        raise ctx.fail("num_groups is required")
    attrs = {"num_groups": int(node.attrs["num_groups"]), "epsilon": node.attrs.get("epsilon", 1e-5),
             "per_group": int(ctx.opset < 21), "stash_dtype": _stash(ctx, node)}
    ctx.emit("GroupNorm", node.inputs[:3], node.outputs[:1], attrs)


@onnx_op("RMSNormalization")
def rms_normalization(ctx, node):
    attrs = {"axis": node.attrs.get("axis", -1), "epsilon": node.attrs.get("epsilon", 1e-5),
             "stash_dtype": _stash(ctx, node)}
    ctx.emit("RMSNorm", node.inputs[:2], node.outputs[:1], attrs)


@onnx_op("LpNormalization")
def lp_normalization(ctx, node):
    p = int(node.attrs.get("p", 2))
    if p not in (1, 2):
        raise ctx.fail(f"p must be 1 or 2, got {p}")
    ctx.emit("LpNorm", node.inputs[:1], node.outputs[:1], {"axis": node.attrs.get("axis", -1), "p": p})


@onnx_op("LRN")
def lrn(ctx, node):
    if "size" not in node.attrs:
        raise ctx.fail("size is required")
    attrs = {"size": int(node.attrs["size"]), "alpha": node.attrs.get("alpha", 1e-4),
             "beta": node.attrs.get("beta", 0.75), "bias": node.attrs.get("bias", 1.0)}
    ctx.emit("LRN", node.inputs[:1], node.outputs[:1], attrs)


@onnx_op("MeanVarianceNormalization")
def mean_variance_normalization(ctx, node):
    """Its own IR op rather than Transpose + LayerNorm: the axes (default [0, 2, 3]) are seldom the
    trailing ones, the transposes need the input rank (not always known when converting), and
    ONNX adds epsilon (1e-9) to the standard deviation, not to the variance."""
    ctx.emit("MeanVarianceNorm", node.inputs[:1], node.outputs[:1],
             {"axes": [int(a) for a in node.attrs.get("axes", [0, 2, 3])]})
