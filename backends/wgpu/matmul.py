"""MatMul family on the GPU: Y = act(alpha * op(A) @ op(B) + beta * C) in one dispatch.

Everything shape-dependent becomes strides in the params block: transposes swap the row/k
strides, a 1-D operand is a matrix with one row (A) or one column (B) of stride 0, broadcast
batch axes have stride 0, and the bias C gets its broadcast strides over (batch..., M, N).
Two kernels: a register-blocked one (4x4 outputs per invocation) for software adapters, where
shader memory access is the cost, and a workgroup-memory tiled one for real GPUs.
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.geometry import contiguous_strides
from ..base import Step
from .backend import WORKGROUP, GpuExecution, gpu_kernel, wgsl_type
from .elementwise import INT_UNARY_EXPR, UNARY_EXPR

MAX_BATCH_RANK = 4  # params slots for batch axes (after merging contiguous ones)
BLOCK = 4  # outputs per invocation along M and N (register-blocked kernel)
STRIP = 8  # register-blocked kernel: column blocks per strip (about one SIMD row of lavapipe)
TILE = 32  # outputs per workgroup along M and N (tiled kernel: 64 invocations x 4x4)
KERNELS = {"blocked": "matmul/matmul_blocked.wgsl", "tiled": "matmul/matmul_tiled.wgsl"}


class MatMulLayout:
    """M, N, K, the merged batch axes and every operand's strides for one MatMul step."""

    def __init__(self, step: Step):
        attrs = step.attrs
        a, b = (tuple(s.shape) for s in step.input_specs[:2])
        a_vec, b_vec = len(a) == 1, len(b) == 1
        a_strides, b_strides = contiguous_strides(a), contiguous_strides(b)
        if a_vec:  # (K,) is one row: the row stride never applies
            self.m, self.k, self.a_sm, self.a_sk = 1, a[0], 0, 1
        elif attrs["trans_a"]:
            self.m, self.k, self.a_sm, self.a_sk = a[-1], a[-2], a_strides[-1], a_strides[-2]
        else:
            self.m, self.k, self.a_sm, self.a_sk = a[-2], a[-1], a_strides[-2], a_strides[-1]
        if b_vec:  # (K,) is one column
            self.n, self.b_sk, self.b_sn = 1, 1, 0
        elif attrs["trans_b"]:
            self.n, self.b_sk, self.b_sn = b[-2], b_strides[-1], b_strides[-2]
        else:
            self.n, self.b_sk, self.b_sn = b[-1], b_strides[-2], b_strides[-1]
        a_batch, b_batch = a[:-2] if not a_vec else (), b[:-2] if not b_vec else ()
        out = tuple(step.output_specs[0].shape)
        batch = out[:len(out) - (not a_vec) - (not b_vec)]
        self.batch_count = math.prod(batch)
        axes = [batch_strides(batch, a_batch, a_strides[:len(a_batch)]),
                batch_strides(batch, b_batch, b_strides[:len(b_batch)])]
        self.has_c = len(step.inputs) > 2 and bool(step.inputs[2])
        self.c_sm = self.c_sn = 0
        if self.has_c:
            c = tuple(step.input_specs[2].shape)
            # Broadcast strides of C over Y's shape, then over (batch..., M, N): a missing M or N
            # axis (1-D operand) has size 1, so stride 0.
            c_out = broadcast_strides(out, c)
            tail = c_out[len(batch):]
            self.c_sm = tail[0] if not a_vec else 0
            self.c_sn = tail[-1] if not b_vec else 0
            axes.append(list(c_out[:len(batch)]))
        else:
            axes.append([0] * len(batch))
        self.batch, self.batch_strides = merge_axes(list(batch), axes)

    def params(self) -> list[int]:
        pad = MAX_BATCH_RANK - len(self.batch)
        params = [self.m, self.n, self.k, self.batch_count, 0, 0, 0, 0]
        params += [1] * pad + self.batch
        for strides in self.batch_strides:
            params += [0] * pad + strides
        params += [self.a_sm, self.a_sk, self.b_sk, self.b_sn, self.c_sm, self.c_sn, int(self.has_c)]
        return params


def broadcast_strides(out: tuple, shape: tuple) -> list[int]:
    """Strides of a tensor of `shape` read at every index of `out` (right-aligned numpy
    broadcasting; 0 on broadcast and missing axes)."""
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    strides = contiguous_strides(padded)
    return [0 if d == 1 else s for d, s in zip(padded, strides)]


def batch_strides(batch: tuple, shape: tuple, strides: tuple) -> list[int]:
    """An operand's strides over the broadcast batch axes (0 where it has size 1 or no axis)."""
    pad = len(batch) - len(shape)
    return [0] * pad + [0 if d == 1 else s for d, s in zip(shape, strides)]


def merge_axes(shape: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 axes and merge neighbours that every operand walks as one axis."""
    keep = [i for i, d in enumerate(shape) if d != 1]
    out_shape, out_strides = [], [[] for _ in strides]
    for i in keep:
        if out_shape and all(s[-1] == own[i] * shape[i] for s, own in zip(out_strides, strides)):
            out_shape[-1] *= shape[i]
            for s, own in zip(out_strides, strides):
                s[-1] = own[i]
            continue
        out_shape.append(shape[i])
        for s, own in zip(out_strides, strides):
            s.append(own[i])
    return out_shape, out_strides


def activation_expression(step: Step) -> str | None:
    kind = step.attrs["activation"] or "identity"
    table = UNARY_EXPR if step.output_specs[0].dtype == "float32" else INT_UNARY_EXPR
    return table.get(kind)


def int_scalar(value: float) -> int:
    """An integer parameter saturated to int32 (infinite Clip bounds mean no bound)."""
    if not math.isfinite(value):
        return 2 ** 31 - 1 if value > 0 else -(2 ** 31)
    return int(np.clip(value, -(2 ** 31), 2 ** 31 - 1))


def kernel_variant(context) -> str:
    """The register-blocked kernel on software (CPU) adapters, workgroup tiling on real GPUs."""
    return "blocked" if context.info.adapter_type == "CPU" else "tiled"


@gpu_kernel("MatMul")
class MatMulGpu(GpuExecution):
    # Set to "blocked" or "tiled" to override the choice by adapter type (tests use it).
    force_variant: str | None = None

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        dtype = step.output_specs[0].dtype
        if dtype not in ("float32", "int32", "int64"):
            return f"MatMul on {dtype} has no GPU kernel"
        if activation_expression(step) is None:
            return f"fused activation {step.attrs['activation']} on {dtype} has no GPU kernel"
        if dtype != "float32" and (step.attrs["alpha"] != 1.0 or step.attrs["beta"] != 1.0):
            return "integer MatMul with alpha/beta runs on the CPU"
        layout = MatMulLayout(step)
        if len(layout.batch) > MAX_BATCH_RANK:
            return f"{len(layout.batch)} batch axes that do not merge (the kernel takes {MAX_BATCH_RANK})"
        return None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        a = step.input_specs[0].shape
        k = a[-2] if step.attrs["trans_a"] and len(a) > 1 else a[-1]
        return k + 16  # the K loop, plus the epilogue's small loops

    def prepare(self) -> None:
        step = self.step
        layout = MatMulLayout(step)
        t = wgsl_type(step.output_specs[0].dtype)
        attrs = step.attrs
        params = layout.params()
        if t == "f32":
            params[6:8] = [float(attrs["alpha"]), float(attrs["beta"])]
            params += [float(attrs["activation_alpha"]), float(attrs["activation_beta"])]
            read = "pf"
        else:
            params[6:8] = [1, 1]
            params += [int_scalar(attrs["activation_alpha"]), int_scalar(attrs["activation_beta"])]
            read = "p"
        variant = self.force_variant or kernel_variant(self.backend.context)
        if variant == "tiled" and WORKGROUP != 64:
            raise RuntimeError("matmul_tiled.wgsl is written for 64-invocation workgroups")
        block = BLOCK if variant == "blocked" else TILE
        params[4:6] = [-(-layout.m // block), -(-layout.n // block)]
        params.append(STRIP)
        # Without C the kernel never reads binding 2; A stands in so the layout stays the same.
        c = step.inputs[2] if layout.has_c else step.inputs[0]
        text = {"T": t, "READ": read, "ACT": activation_expression(step)}
        blocks = layout.batch_count * params[4] * params[5]
        invocations = blocks if variant == "blocked" else blocks * 64
        self.dispatch(KERNELS[variant], [step.inputs[0], step.inputs[1], c, step.outputs[0]], params,
                      invocations, text=text)
