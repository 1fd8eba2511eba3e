"""ONNX BatchNormalization / LayerNormalization / InstanceNormalization -> wgnn BatchNorm /
LayerNorm / InstanceNorm (inference only)."""
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
    stash = node.attrs.get("stash_type", 1)
    dtype = ONNX_DTYPES.get(stash)
    if dtype not in ("float16", "float32", "float64"):
        raise ctx.fail(f"stash_type {stash} is not a supported float type")
    attrs = {"axis": node.attrs.get("axis", -1), "epsilon": node.attrs.get("epsilon", 1e-5), "stash_dtype": dtype}
    ctx.emit("LayerNorm", node.inputs[:3], node.outputs[:3], attrs)
