"""MatMul family on the GPU: Y = act(alpha * op(A) @ op(B) + beta * C + R) in one dispatch.

Everything shape-dependent becomes strides in the params block: transposes swap the row/k
strides, a 1-D operand is a matrix with one row (A) or one column (B) of stride 0, broadcast
batch axes have stride 0, and the bias C gets its broadcast strides over (batch..., M, N). Y is
stored through strides too (slots 36..41: batch axes, then M and N), contiguous unless perm_y
permutes the product's axes. With split_y the product's columns go to that many outputs (slot 42,
a part's width; at most MAX_SPLIT, bound as y, y1, y2; unused ones bind Y again), each stored
with the same strides. The fused residual R (input 3) has Y's shape, so R is read at the
index Y is stored at and needs no strides; without R, A is bound in its place and a flag says so.

Three kernel variants, chosen per adapter (WGNN_MATMUL_VARIANT overrides, for benchmarks/tests;
else the one `wgnn tune` measured faster on the adapter; else by the adapter's type):
- "subgroup" (CPU adapters with the subgroup feature, e.g. lavapipe): 8x8 outputs per invocation,
  A shared across a SIMD row by subgroup shuffles, B loaded as vec4.
- "blocked" (other CPU adapters, e.g. llvmpipe OpenGL): the same without shuffles.
- "tiled" (real GPUs): workgroup-memory tiles, 32x32 (64 invocations of 4x4 outputs) or, for
  products with enough of them to fill a big GPU, 128x128 (256 invocations of 8x8: half the
  workgroup-memory reads per multiply-add); WGNN_MATMUL_TILE=32|128 forces one. Its inner loops
  are written out per tile (tiled_text), so that no private array is indexed by a variable.
On software adapters shader memory access is the cost (every load is a per-lane loop), so the
first two minimise loads per multiply-add; a constant B is repacked once at prepare into rows
padded to 8 columns, so it is always read as vec4.
"""
from __future__ import annotations

import logging
import math
import os
from functools import cache

import numpy as np

from ...engine.errors import WgnnError
from ...engine.geometry import contiguous_strides
from ...engine.ops.matmul import permuted
from ..base import Step
from .backend import GpuExecution, gpu_kernel, wgsl_type
from .elementwise import INT_UNARY_EXPR, UNARY_EXPR

log = logging.getLogger("wgnn.wgpu")

MAX_BATCH_RANK = 4  # params slots for batch axes (after merging contiguous ones)
BLOCK = 8  # outputs per invocation along M and N (blocked and subgroup kernels)
STRIP = 8  # column blocks per strip (the blocked kernels): one SIMD row of lavapipe shares A rows
# The tiled kernel's shapes: outputs per workgroup along M and N -> (outputs per invocation along
# each, K per staged slice); a workgroup has (tile / outputs)^2 invocations.
TILES = {32: (4, 16), 128: (8, 8)}
TILE_ENV = "WGNN_MATMUL_TILE"
# A product of at least this many 128x128 tiles takes them, about one per multiprocessor of a big
# GPU (an H100 has 132): with fewer, the 32x32 tiles keep more of the GPU busy. An estimate (no such
# GPU measured yet): tools/gpu_check.py times both on MatMul 4096^3 (knobs.json).
LARGE_TILE_MIN_TILES = 128
KERNELS = {"blocked": "matmul/matmul_blocked.wgsl", "subgroup": "matmul/matmul_subgroup.wgsl",
           "tiled": "matmul/matmul_tiled.wgsl"}
VARIANT_ENV = "WGNN_MATMUL_VARIANT"
_STAND_IN = np.zeros(4, np.float32)  # bound as the vec4 view of B when B is not read as vec4
RESIDUAL_SLOT = 35  # params slot of the has-residual flag, in every variant (kernels_wgsl/matmul)
# then Y's strides: MAX_BATCH_RANK batch axes, M and N; then a split part's width
MAX_SPLIT = 3  # outputs of a split product (attention's Q, K, V)


class MatMulLayout:
    """M, N, K, the merged batch axes and every operand's strides for one MatMul step.
    With packed_columns, B is read from its repacked copy (pack_b): B's own batch axes, then
    (K, packed_columns), not transposed."""

    def __init__(self, step: Step, packed_columns: int | None = None):
        attrs = step.attrs
        (a, a_strides), (b, b_strides) = (permuted_operand(step, i, key) for i, key in ((0, "perm_a"), (1, "perm_b")))
        a_vec, b_vec = len(a) == 1, len(b) == 1
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
        if packed_columns is not None:
            b_strides = contiguous_strides(b_batch + (self.k, packed_columns))
            self.b_sk, self.b_sn = packed_columns, 1
        out, y_strides = stored_product(step)
        batch = out[:len(out) - (not a_vec) - (not b_vec)]
        self.batch_count = math.prod(batch)
        self.y_sm = y_strides[len(batch)] if not a_vec else 0
        self.y_sn = y_strides[-1] if not b_vec else 0
        self.part_width = self.n // step.attrs.get("split_y", 1)
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
        axes.append(list(y_strides[:len(batch)]))
        self.batch, self.batch_strides = merge_axes(list(batch), axes)

    def params(self) -> list[int]:
        pad = MAX_BATCH_RANK - len(self.batch)
        params = [self.m, self.n, self.k, self.batch_count, 0, 0, 0, 0]
        params += [1] * pad + self.batch
        for strides in self.batch_strides[:3]:  # A, B, C
            params += [0] * pad + strides
        params += [self.a_sm, self.a_sk, self.b_sk, self.b_sn, self.c_sm, self.c_sn, int(self.has_c)]
        return params

    def store_params(self) -> list[int]:
        """Slots 36..42: Y's strides over the batch axes, M and N, and a split part's width."""
        return [0] * (MAX_BATCH_RANK - len(self.batch)) + self.batch_strides[3] + [self.y_sm, self.y_sn,
                                                                                  self.part_width]


def stored_product(step: Step) -> tuple[tuple[int, ...], list[int]]:
    """The product's shape (Y's before perm_y, or the split_y outputs side by side) and, per product
    axis, the stride it is stored at (in an output)."""
    shape = tuple(step.output_specs[0].shape)
    strides = contiguous_strides(shape)
    split = step.attrs.get("split_y", 1)
    if split > 1:
        return (*shape[:-1], shape[-1] * split), strides
    perm = step.attrs.get("perm_y") or list(range(len(shape)))
    axis_of = {p: j for j, p in enumerate(perm)}  # product axis p is Y's axis j
    return tuple(shape[axis_of[i]] for i in range(len(shape))), [strides[axis_of[i]] for i in range(len(shape))]


def permuted_operand(step: Step, index: int, key: str) -> tuple[tuple[int, ...], list[int]]:
    """Input `index` as the product reads it: its shape and strides after the permutation
    attribute `key` (a Transpose folded in by the converter costs no copy, only other strides)."""
    shape = tuple(step.input_specs[index].shape)
    perm = step.attrs.get(key) or None
    return permuted(shape, perm), list(permuted(contiguous_strides(shape), perm))


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
    """The kernel for this adapter: WGNN_MATMUL_VARIANT if set; else the one wgnn tune measured
    faster here; else on software (CPU) adapters the subgroup kernel where the adapter has
    subgroups, the blocked one where not; workgroup tiling on real GPUs. A "subgroup" on an
    adapter without subgroups runs "blocked"."""
    from .tuning import tuned_variant

    chosen = os.environ.get(VARIANT_ENV, "").strip() or None
    if chosen is not None and chosen not in KERNELS:
        raise WgnnError(f"{VARIANT_ENV}={chosen!r}: expected one of {', '.join(KERNELS)}")
    return resolve_variant(chosen or tuned_variant(context, "matmul"), context)


def resolve_variant(chosen: str | None, context) -> str:
    has_subgroups = "subgroup" in context.features
    if chosen is None:
        if context.info.adapter_type != "CPU":
            return "tiled"
        chosen = "subgroup"
    if chosen == "subgroup" and not has_subgroups:
        log.debug("MatMul: %s has no subgroup feature; using the blocked kernel", context.name)
        return "blocked"
    return chosen


def pack_b(b: np.ndarray, trans_b: int, columns: int, perm: list[int] | None = None) -> np.ndarray:
    """B as (B's batch axes..., K, columns): its axes permuted by perm, transposed if trans_b, a 1-D
    B as one column, zero columns past N so that every 8-column block is two aligned vec4 loads."""
    if perm:
        b = np.transpose(b, perm)
    if b.ndim == 1:
        b = b[:, None]
    elif trans_b:
        b = np.swapaxes(b, -1, -2)
    out = np.zeros(b.shape[:-1] + (columns,), b.dtype)
    out[..., :b.shape[-1]] = b
    return out


def choose_tile(layout: MatMulLayout) -> int:
    """The tiled kernel's tile: WGNN_MATMUL_TILE, else 128 for products of at least
    LARGE_TILE_MIN_TILES such tiles, else 32."""
    forced = os.environ.get(TILE_ENV, "").strip()
    if forced:
        if forced not in {str(t) for t in TILES}:
            raise WgnnError(f"{TILE_ENV}={forced!r}: expected one of {', '.join(map(str, TILES))}")
        return int(forced)
    large, small = max(TILES), min(TILES)
    tiles = layout.batch_count * -(-layout.m // large) * -(-layout.n // large)
    return large if tiles >= LARGE_TILE_MIN_TILES else small


def tile_settings(tile: int) -> tuple[dict[str, str], dict[str, int]]:
    """The tiled kernel's text parameters and override constants for a tile size (TILES)."""
    outputs, kt = TILES[tile]
    return {"TILE": str(tile), "TM": str(outputs), "KT": str(kt)}, {"WG": (tile // outputs) ** 2}


@cache
def tiled_text(tile: int) -> dict[str, str]:
    """matmul_tiled.wgsl's per-invocation code for a tile size (TILES), written out with literal
    names and offsets: as loops over private arrays (accumulators, staging registers) naga's
    bounds-checked indices kept the arrays in local memory on NVIDIA's driver (4% of an H200's FMA
    peak). DECLARE: the accumulators acc_h_i_g (row 4h + i of the invocation's block rows, column
    block g), the staging registers next_a*, next_b* and where they go in workgroup memory; FETCH:
    the slice at k_next into them; STAGE: them into a_tile, b_tile; PRODUCTS: one slice's KT steps,
    whole vec4s of each tile per step; STORES: the epilogue, four columns at a time."""
    outputs, kt = TILES[tile]
    halves, side, v = outputs // 4, tile // outputs, tile // 4
    row = v + 1  # the kernel's ROW: a vec4 of padding per k-row
    loads, rest = divmod(kt * v, side * side)  # vec4s of each slice an invocation stages
    if rest or not loads:
        raise ValueError(f"tile {tile}: {kt * v} vec4s per slice do not split over {side * side} invocations")
    blocks = [(h, i, g) for h in range(halves) for i in range(4) for g in range(halves)]
    declare = [f"    var acc_{h}_{i}_{g} = Vec();" for h, i, g in blocks]
    fetch, stage = [], []
    for q in range(loads):
        for x, k_fast in (("a", "a_k_fast"), ("b", "b_k_fast")):
            invocation = f"l + {q * side * side}" if q else "l"
            declare += [f"    let {x}_at{q} = slot({invocation}, {k_fast});",
                        f"    let {x}_to{q} = {x}_at{q}.y * ROW + {x}_at{q}.x;",
                        f"    var next_{x}{q}: Vec;"]
        fetch += [f"            next_a{q} = fetch_a(a_at{q}, k_next, tm0, ao);",
                  f"            next_b{q} = fetch_b(b_at{q}, k_next, tn0, bo);"]
        stage += [f"        a_tile[a_to{q}] = next_a{q};", f"        b_tile[b_to{q}] = next_b{q};"]
    products = []
    for k in range(kt):
        products.append("        {")
        products += [f"            let a{h} = a_tile[tr + {k * row + h * v // halves}];" for h in range(halves)]
        products += [f"            let b{g} = b_tile[tc + {k * row + g * v // halves}];" for g in range(halves)]
        products += [f"            acc_{h}_{i}_{g} += a{h}.{'xyzw'[i]} * b{g};" for h, i, g in blocks]
        products.append("        }")
    stores = [f"    store4(tm0 + tr * 4 + {h * tile // halves + i}, tn0 + tc * 4 + {g * tile // halves}, "
              f"acc_{h}_{i}_{g}, yo, co);" for h, i, g in blocks]
    return {"DECLARE": "\n".join(declare), "FETCH": "\n".join(fetch), "STAGE": "\n".join(stage),
            "PRODUCTS": "\n".join(products), "STORES": "\n".join(stores)}


def vec4_view_ok(layout: MatMulLayout, nbytes: int) -> bool:
    """B can be read as vec4 in place: unit column stride, 4-aligned k and batch strides."""
    return (layout.b_sn == 1 and layout.b_sk % 4 == 0 and nbytes >= 16
            and all(s % 4 == 0 for s in layout.batch_strides[1]))


@gpu_kernel("MatMul")
class MatMulGpu(GpuExecution):
    # "blocked", "subgroup" or "tiled": overrides the adapter rule and WGNN_MATMUL_VARIANT (tests).
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
        if step.attrs.get("split_y", 1) > MAX_SPLIT:
            return f"a product split into {step.attrs['split_y']} outputs (the kernels store at most {MAX_SPLIT})"
        return None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        a, _ = permuted_operand(step, 0, "perm_a")
        k = a[-2] if step.attrs["trans_a"] and len(a) > 1 else a[-1]
        return k + 16  # the K loop, plus the epilogue's small loops

    def prepare(self) -> None:
        step = self.step
        context = self.backend.context
        variant = resolve_variant(self.force_variant, context) if self.force_variant else kernel_variant(context)
        if variant == "tiled":
            layout = MatMulLayout(step)
            tile = choose_tile(layout)
            params = self._params(layout, tile)
            blocks = layout.batch_count * params[4] * params[5]
            tensors = [step.inputs[0], step.inputs[1], self._c(layout), self._residual(), *self._outputs()]
            text, constants = tile_settings(tile)
            self.dispatch(KERNELS[variant], tensors, self._tail(params, layout), blocks * constants["WG"],
                          text={**self._text(), **text, **tiled_text(tile)}, constants=constants)
            for other in TILES:  # a resize may pick the other shape: it must compile nothing
                if other != tile:
                    text, constants = tile_settings(other)
                    self.compile(KERNELS[variant], tensors, text={**self._text(), **text, **tiled_text(other)},
                                 constants=constants)
            return
        values = step.input_values or []
        if len(values) > 1 and values[1] is not None:  # weights: repacked once, read as vec4
            layout, b, b_vec = self._packed_b(values[1])
        else:
            layout = MatMulLayout(step)
            b = step.inputs[1]
            b_vec = b if vec4_view_ok(layout, step.input_specs[1].nbytes) else None
        if b_vec is None:  # the vec4 binding still needs 16 bytes; the kernel never reads it
            b_vec = self.packed_constant("vec4 stand-in", _STAND_IN, np.copy)
        params = self._params(layout, BLOCK)
        params += [STRIP, int(b_vec == b)]
        blocks = layout.batch_count * params[4] * params[5]
        tensors = [step.inputs[0], b, b_vec, self._c(layout), self._residual(), *self._outputs()]
        self.dispatch(KERNELS[variant], tensors, self._tail(params, layout), blocks, text=self._text())

    def _packed_b(self, value: np.ndarray) -> tuple[MatMulLayout, str, str | None]:
        """Layout, B's packed tensor and its vec4 view (None when under 16 bytes)."""
        trans_b, perm_b = self.step.attrs["trans_b"], self.step.attrs.get("perm_b") or None
        shape = permuted(value.shape, perm_b)
        n = 1 if len(shape) == 1 else shape[-2 if trans_b else -1]
        columns = -(-n // BLOCK) * BLOCK
        layout = MatMulLayout(self.step, packed_columns=columns)
        # The constant itself is the cache key (kept across resizes); the perm applies inside pack.
        b = self.packed_constant("b", value, lambda v: pack_b(v, trans_b, columns, perm_b))
        elements = math.prod(shape[:-2]) * layout.k * columns
        return layout, b, b if elements >= 4 else None

    def _params(self, layout: MatMulLayout, block: int) -> list:
        attrs = self.step.attrs
        params = layout.params()
        if wgsl_type(self.step.output_specs[0].dtype) == "f32":
            params[6:8] = [float(attrs["alpha"]), float(attrs["beta"])]
            params += [float(attrs["activation_alpha"]), float(attrs["activation_beta"])]
        else:
            params[6:8] = [1, 1]
            params += [int_scalar(attrs["activation_alpha"]), int_scalar(attrs["activation_beta"])]
        params[4:6] = [-(-layout.m // block), -(-layout.n // block)]
        return params

    def _outputs(self) -> list[str]:
        """y, y1, y2: the split outputs, Y again where there are fewer."""
        outputs = list(self.step.outputs)
        return outputs + [outputs[0]] * (MAX_SPLIT - len(outputs))

    def _c(self, layout: MatMulLayout) -> str:
        # Without C the kernel never reads its binding; A stands in so the layout stays the same.
        return self.step.inputs[2] if layout.has_c else self.step.inputs[0]

    def _residual(self) -> str:
        # As for C: without a residual A stands in, never read (the flag at RESIDUAL_SLOT is 0).
        return self.step.inputs[3] if len(self.step.inputs) > 3 and self.step.inputs[3] else self.step.inputs[0]

    def _tail(self, params: list, layout: MatMulLayout) -> list:
        """params padded to RESIDUAL_SLOT (the tiled kernel leaves 33, 34 unused), then the flag,
        then Y's strides."""
        if len(params) > RESIDUAL_SLOT:
            raise RuntimeError(f"MatMul params slot {RESIDUAL_SLOT} (has residual) is taken")
        has_residual = len(self.step.inputs) > 3 and bool(self.step.inputs[3])
        return params + [0] * (RESIDUAL_SLOT - len(params)) + [int(has_residual)] + layout.store_params()

    def _text(self) -> dict[str, str]:
        t = wgsl_type(self.step.output_specs[0].dtype)
        return {"T": t, "READ": "pf" if t == "f32" else "p", "ACT": activation_expression(self.step),
                "SPLIT": str(self.step.attrs.get("split_y", 1))}
