"""GlobalPoolMatMul on the GPU: a classifier head, global pooling of an NC4HW4 feature map and the
matrix product reading it, y = act(alpha * pool(x) @ op(B) + beta * bias), on one of two paths
chosen from the shapes at resize:

- "fused", one dispatch (kernels_wgsl/pool/global_pool_matmul_nc4hw4.wgsl): an invocation per
  (n, block of 4 outputs) pools every input slice and multiplies it by the block's 4x4 weights.
  Each of the ceil(K / 4) blocks pools x again, with only N * ceil(K / 4) invocations at work, so
  it runs where ceil(K / 4) * C4 * H * W (vec4 loads per batch item) is at most FUSED_LOADS.
- "pair", two dispatches, for bigger heads: the GlobalPool kernel (pool.dispatch_global_pool: an
  invocation or, on real GPUs, a workgroup per slice; its store accessor writing the pooled
  channels as a linear (N, C) scratch buffer) and the MatMul execution (backends/wgpu/matmul.py)
  of the MatMul the op was fused from, reading that buffer.

Both paths' pipelines are built at every prepare (their texts depend on the storage and the
weights, not on shapes: dims travel in params), so a resize that switches paths compiles nothing.
The fused path's weights are repacked once as [K4][C4][4 vec4] (zero past C and K), in a uniform
buffer on CPU adapters where they fit (conv_paths.weights_binding). 16-bit feature maps
(precision fp16, fp16-arith) are read through their accessors as 32-bit: pooling sums and products
run in 32 bits on every precision.
"""
from __future__ import annotations

import numpy as np

from ...engine.graph import Node
from ...engine.ops.base import TensorSpec
from ...engine.ops.pool_matmul import BIAS, MATMUL_ATTRS, B
from ..base import Step, part_step
from .backend import LOOP_BUDGET, GpuExecution, gpu_kernel
from .conv import activation, ceil_div, known, pack_channels
from .matmul import MatMulGpu
from .pool import COMBINE, dispatch_global_pool

KERNEL = "pool/global_pool_matmul_nc4hw4.wgsl"
# The fused kernel's vec4 loads per batch item, ceil(K / 4) * C4 * (H * W + 4) (each output block
# pools every slice, then reads its 4x4 weights), up to which it runs instead of the pair.
FUSED_LOADS = 1 << 13


def head_dims(step: Step) -> tuple[int, int, int, int, int]:
    """(N, C, H, W, K) of a GlobalPoolMatMul step."""
    n, c, h, w = step.input_specs[0].shape
    return n, c, h, w, step.output_specs[0].shape[1]


def fused_iterations(c: int, h: int, w: int) -> int:
    """Loop iterations of a fused invocation: per input slice, the plane's rows of 4 pixels."""
    return ceil_div(c, 4) * (h * (ceil_div(w, 4) + 1) + 1) + 8


def pool_iterations(h: int, w: int) -> int:
    """Loop iterations of a global_pool_nc4hw4.wgsl invocation (GlobalPoolGpu.nc4hw4_iterations)."""
    return h * (ceil_div(w, 4) + 1) + 8


def fused_loads(c: int, h: int, w: int, k: int) -> int:
    """vec4 loads of the fused kernel per batch item: pooled pixels and weights."""
    return ceil_div(k, 4) * ceil_div(c, 4) * (h * w + 4)


def runs_fused(step: Step) -> bool:
    """Whether the head is small enough for the one-dispatch kernel (and its loops stay within
    llvmpipe's loop budget)."""
    _, c, h, w, k = head_dims(step)
    return fused_loads(c, h, w, k) <= FUSED_LOADS and fused_iterations(c, h, w) <= LOOP_BUDGET


def pack_head_weights(b: np.ndarray, trans_b: int) -> np.ndarray:
    """B ((C, K), or (K, C) with trans_b) -> (K4, C4, 4 input lanes, 4 output lanes): per output
    block k4 and input slice c4 the 4x4 matrix's columns, each a vec4 over the block's outputs."""
    w = b if trans_b else b.T  # (K, C)
    k, c = w.shape
    k4, c4 = ceil_div(k, 4), ceil_div(c, 4)
    padded = np.zeros((k4 * 4, c4 * 4), np.float32)
    padded[:k, :c] = w
    return np.ascontiguousarray(padded.reshape(k4, 4, c4, 4).transpose(0, 2, 3, 1))


def pack_bias(bias: np.ndarray, k: int) -> np.ndarray:
    """A bias of shape (), (1,), (K,), (1, 1) or (1, K) as K values, padded to whole vec4s."""
    return pack_channels(np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (k,)))


def linear_store(var: str, binding: int, slot: int) -> str:
    """DECL_<VAR> of an NC4HW4 kernel's output (N, C, 1, 1) written as a linear (N, C) buffer of
    f32: store_<var> puts a slice's channels below C (slot + 4) at n * C + channel."""
    return (f"@group(0) @binding({binding}) var<storage, read_write> {var}_b: array<f32>;\n"
            f"fn store_{var}(n: i32, c4: i32, y: i32, x: i32, v: vec4<f32>) {{\n"
            f"    let c = p({slot + 4}u);\n"
            f"    for (var k = 0; k < 4; k++) {{\n"
            f"        if (c4 * 4 + k < c) {{\n"
            f"            {var}_b[n * c + c4 * 4 + k] = v[k];\n"
            f"        }}\n"
            f"    }}\n}}")


def matmul_step(step: Step, pooled: str) -> Step:
    """The MatMul the op was fused from, reading the pooled (N, C) tensor `pooled`."""
    n, c, _, _, _ = head_dims(step)
    names = (list(step.inputs) + [""] * 3)[:3]
    specs = (list(step.input_specs) + [None] * 3)[:3]
    values = (list(step.input_values or []) + [None] * 3)[:3]
    attrs = {"trans_a": 0, **{key: step.attrs[key] for key in MATMUL_ATTRS}}
    node = Node("MatMul", [pooled, *names[1:]], list(step.outputs[:1]), attrs, name=f"{step.node.name}/matmul")
    return part_step(step, node, [TensorSpec((n, c), step.input_specs[0].dtype), *specs[1:]],
                     list(step.output_specs[:1]), [None, *values[1:]])


@gpu_kernel("GlobalPoolMatMul")
class GlobalPoolMatMulGpu(GpuExecution):
    path = ""  # "fused" or "pair", set by prepare()

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        from .layout import is_feature_map

        if not is_feature_map(step.input_specs[0]):
            return "only 4-D (N, C, H, W) float32 inputs run on the GPU"
        if not (known(step, B) and known(step, BIAS)):
            return "weights and bias must be known at resize (they are repacked)"
        return activation(step)[1] or MatMulGpu.unsupported_reason(matmul_step(step, ""))

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("nc4hw4",)

    @classmethod
    def linear_inputs(cls, step: Step) -> tuple[int, ...]:
        # A linear x is read a slice at a time through its accessor: the pooling reads each pixel
        # about once, where a conversion would cost a dispatch and a pass of its own.
        return (0,)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        _, c, h, w, _ = head_dims(step)
        if runs_fused(step):
            return fused_iterations(c, h, w)
        return max(pool_iterations(h, w), MatMulGpu.loop_iterations(matmul_step(step, "")))

    def prepare(self) -> None:
        # Both paths, so that a resize switching paths finds their pipelines; only the chosen
        # path's dispatches are kept.
        self.path = "fused" if runs_fused(self.step) else "pair"
        order = [self._prepare_pair, self._prepare_fused]
        if self.path == "pair":
            order.reverse()
        order[0]()
        self.dispatches.clear()
        order[1]()

    def _prepare_fused(self) -> None:
        from .conv_paths import weights_binding
        from .elementwise import feature_map_text
        from .layout import accessor_params

        step, attrs = self.step, self.step.attrs
        x = step.input_specs[0]
        n, _, _, _, k = head_dims(step)
        k4 = ceil_div(k, 4)
        b = step.input_values[B]
        weights, declaration = weights_binding(self, "head_weights", b,
                                               lambda v: pack_head_weights(v, attrs["trans_b"]), half=False)
        has_bias = len(step.inputs) > BIAS and bool(step.inputs[BIAS])
        # Keyed by the bias, or by the weights without one (then zeros): packed once per session.
        source = step.input_values[BIAS] if has_bias else b
        bias = self.packed_constant("head_bias", source,
                                    lambda v: pack_bias(v, k) if has_bias else np.zeros(k4 * 4, np.float32))
        params = [n * k4, k4, k, int(attrs["kind"] == "avg"), int(has_bias), float(attrs["alpha"]),
                  float(attrs["beta"]), float(attrs["activation_alpha"]), float(attrs["activation_beta"]), 0,
                  *accessor_params(x)]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 10, False)})
        text.update(W_DECL=declaration, ACT=activation(step)[0], COMBINE=COMBINE[attrs["kind"]])
        self.dispatch(KERNEL, [step.inputs[0], weights, bias, step.outputs[0]], params, n * k4, text=text)

    def _prepare_pair(self) -> None:
        from .conv_paths import scratch
        from .elementwise import feature_map_text
        from .layout import accessor_params

        step = self.step
        x = step.input_specs[0]
        n, c, _, _, _ = head_dims(step)
        pooled = scratch(self, "pooled", ceil_div(n * c, 4))
        blocks = n * ceil_div(c, 4)
        params = [blocks, int(step.attrs["kind"] == "avg"), 0, 0, *accessor_params(x),
                  *accessor_params(TensorSpec((n, c, 1, 1), x.dtype))]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 4, False)})
        text.update(DECL_Y=linear_store("y", 1, 9), COMBINE=COMBINE[step.attrs["kind"]])
        dispatch_global_pool(self, [step.inputs[0], pooled], params, blocks, text, x.shape)
        matmul = MatMulGpu(self.backend, matmul_step(step, pooled))
        matmul.prepare()
        self.dispatches.extend(matmul.dispatches)
