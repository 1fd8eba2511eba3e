"""Attention on the GPU: one dispatch of kernels_wgsl/matmul/attention.wgsl, the scores kept in
registers (an online softmax over the keys).

Every operand is read through strides in the params block, as the MatMul kernels read theirs:
Q', K' and V' through their permutations and transposes, the mask through its broadcast strides
over the scores, Y through perm_y's. The head sizes are fixed per model (the weights give them),
so the per-element code is written out here in vec4s (lanes past D or D_v are literal zeros) and
the kernel loops over nothing but the keys.

Two variants, chosen per adapter (WGNN_ATTENTION_VARIANT overrides, for benchmarks and tests;
else the one `wgnn tune` measured faster on the adapter; else by the adapter's type):
- "rows" (CPU adapters, e.g. lavapipe): ROWS query rows per invocation share each key's loads
  (see rows_per_invocation); no workgroup memory, no barriers. Heads past ROWS_MAX_HEAD run as the
  three ops the converter fused instead (scores MatMul, Softmax, context MatMul through two scratch
  buffers): on lavapipe 128-wide heads took x1.4-4.0 the three kernels' time in this kernel.
- "tiled" (real GPUs, kernels_wgsl/matmul/attention_tiled.wgsl): a workgroup of WG query rows
  copies K and V in tiles of up to 16 keys to workgroup memory and every row reads them from there.
"""
from __future__ import annotations

import math
import os

from ...engine.errors import WgnnError
from ...engine.geometry import contiguous_strides
from ...engine.graph import Node
from ...engine.ops.attention import MASK, MAX_HEAD, Q, read_as
from ...engine.ops.base import TensorSpec
from ..base import Step, part_step
from .backend import EXECUTIONS, WORKGROUP, GpuExecution, forced_split_size, gpu_kernel
from .matmul import MAX_BATCH_RANK, broadcast_strides, merge_axes, stored_product

KERNELS = {"rows": "matmul/attention.wgsl", "tiled": "matmul/attention_tiled.wgsl"}
MERGE_KERNEL = "matmul/attention_merge.wgsl"
VARIANT_ENV = "WGNN_ATTENTION_VARIANT"
# Split keys (split_keys): WGNN_ATTENTION_SPLIT=<keys per split> forces it wherever the tiled kernel
# runs (0: never), for tests and A/B runs.
SPLIT_ENV = "WGNN_ATTENTION_SPLIT"
# Pass 1's workgroups to aim for, and keys per split at least (one tile of 16). Fitted on an H200
# (NVIDIA Vulkan 580, 2026-12-04; docs/gpu-backend.md "Split keys"), 9 shapes from 4x128 to
# 1x4096 keys of 32- to 128-wide heads with 16 to 1024 keys per split: the GPU time went as
# (keys per split + 64) x max(workgroups, 352), whose least is where the workgroups reach 352.
# An earlier guess, 1024 workgroups of 64 keys at least, ran BERT-base's 12x512 x1.31 and 4x128
# x1.56 the best split.
SPLIT_WORKGROUPS = 352
SPLIT_MIN_KEYS = 16
TILE_KEYS = 16  # keys per workgroup-memory tile (tiled kernel) up to 64-wide heads
TILE_BYTES = 8192  # K and V tile bytes at most: wider heads take fewer keys per tile
ROWS_MAX_HEAD = 64  # widest head of the rows kernel (registers; lavapipe's code generation)


def operand_strides(step: Step, index: int, key: str) -> tuple[list[int], list[int]]:
    """Input `index`'s shape and strides as the product reads it."""
    shape = step.input_specs[index].shape
    perm, trans = step.attrs[f"perm_{key}"], step.attrs[f"trans_{key}"]
    return read_as(shape, perm, trans), read_as(contiguous_strides(shape), perm, trans)


def rows_per_invocation(cpu: bool) -> int:
    """Query rows per invocation. On CPU adapters 4 rows share each key's loads, which cost more
    than registers there (lavapipe, 64-wide heads: 4 rows ran in x0.70-0.89 of the three kernels'
    time, 2 rows x1.27, 1 row x2.1; 8 rows x0.58-0.73 but a first-ever code generation of 6.0 s
    against 2.3 s for 4 rows and 0.6 s for the three kernels). Real GPUs keep one row (D + D_v
    floats) per invocation (not measured)."""
    return 4 if cpu else 1


def kernel_variant(context) -> str:
    """WGNN_ATTENTION_VARIANT if set; else the variant wgnn tune measured faster here; else "rows"
    on CPU adapters and "tiled" on real GPUs (whose workgroups share a memory that costs lavapipe
    as much as its buffers)."""
    from .tuning import tuned_variant

    chosen = os.environ.get(VARIANT_ENV, "").strip()
    if chosen and chosen not in KERNELS:
        raise WgnnError(f"{VARIANT_ENV}={chosen!r}: expected one of {', '.join(KERNELS)}")
    return chosen or tuned_variant(context, "attention") or default_variant(context)


def default_variant(context) -> str:
    """The variant where nothing was tuned: "rows" on CPU adapters, "tiled" on real GPUs."""
    return "rows" if context.info.adapter_type == "CPU" else "tiled"


def forced_split() -> int | None:
    """WGNN_ATTENTION_SPLIT's keys per split (0: no split), or None where it is not set."""
    return forced_split_size(SPLIT_ENV, "keys per split")


def split_keys(context, groups: int, keys: int, tk: int) -> int:
    """Keys per split of the tiled kernel's keys, or 0 for none. `groups`: its workgroups unsplit
    (batch entries x row groups of WORKGROUP). WGNN_ATTENTION_SPLIT if set; else on real GPUs, where
    fewer than SPLIT_WORKGROUPS workgroups would run over at least two SPLIT_MIN_KEYS splits, as
    many splits as bring them to SPLIT_WORKGROUPS (SPLIT_MIN_KEYS keys at least each, a whole
    number of tiles): BERT-base's 12 heads of 512 queries are 96 workgroups, each an unbroken chain
    of 512 key updates per row; 4 splits of 128 keys ran in half its time on an H200. Not on CPU
    adapters: every split repeats the query loads and adds a pass."""
    chunk = forced_split()
    if chunk is None:
        if context.info.adapter_type == "CPU" or groups >= SPLIT_WORKGROUPS or keys < 2 * SPLIT_MIN_KEYS:
            return 0
        splits = min(keys // SPLIT_MIN_KEYS, -(-SPLIT_WORKGROUPS // groups))
        per_split = -(-keys // splits)
        chunk = -(-per_split // tk) * tk
    return chunk if 0 < chunk < keys else 0


class AttentionLayout:
    """Sizes and strides of one Attention step, in the kernel's params order."""

    def __init__(self, step: Step):
        (q, qs), (k, ks), (v, vs) = (operand_strides(step, i, key) for i, key in enumerate("qkv"))
        self.rows, self.d, self.keys, self.dv = q[-2], q[-1], k[-1], v[-1]
        batch = tuple(q[:-2])
        self.batch_shape = batch
        self.batch_count = math.prod(batch)
        _, y_strides = stored_product(step)
        self.has_mask = len(step.inputs) > MASK and bool(step.inputs[MASK])
        scores = (*batch, self.rows, self.keys)
        m_strides = broadcast_strides(scores, step.input_specs[MASK].shape) if self.has_mask else [0] * len(scores)
        nb = len(batch)
        self.batch, self.batch_strides = merge_axes(
            list(batch), [qs[:nb], ks[:nb], vs[:nb], m_strides[:nb], y_strides[:nb]])
        self.inner = [qs[-2], qs[-1], ks[-2], ks[-1], vs[-2], vs[-1], m_strides[-2], m_strides[-1], int(self.has_mask),
                      y_strides[-2], y_strides[-1]]

    def vec4_reads(self) -> bool:
        """Whether Q', K' and V' can be read a vec4 at a time: head sizes multiples of 4, the head
        axes contiguous, every other stride (so every offset) a multiple of 4."""
        q_row, q_d, k_d, k_key, v_key, v_d = self.inner[:6]
        others = [q_row, k_key, v_key, *self.batch_strides[0], *self.batch_strides[1], *self.batch_strides[2]]
        return (self.d % 4 == 0 and self.dv % 4 == 0 and (q_d, k_d, v_d) == (1, 1, 1)
                and all(s % 4 == 0 for s in others))

    def params(self, rows_per_block: int, alpha: float, beta: float) -> list:
        pad = MAX_BATCH_RANK - len(self.batch)
        params = [self.rows, self.keys, self.batch_count, -(-self.rows // rows_per_block)]
        params += [1] * pad + self.batch
        for strides in self.batch_strides:
            params += [0] * pad + strides
        return params + self.inner + [float(alpha), float(beta)]


def vec4_lanes(count: int, element) -> list[str]:
    """vec4 expressions covering `count` elements: element(i) for i < count, zeros past it."""
    return [f"vec4<f32>({', '.join(element(4 * g + c) if 4 * g + c < count else '0.0' for c in range(4))})"
            for g in range(-(-count // 4))]


def kernel_text(d: int, dv: int, rows: int, vec4: bool) -> dict[str, str]:
    """The rows kernel's written-out per-element code for head sizes d, dv and `rows` rows; with
    vec4 Q, K and V are read a vec4 at a time (see vec4_reads)."""
    dq, dvv = -(-d // 4), -(-dv // 4)
    if vec4:
        keys = [f"k[(at.k + j * p(31u)) / 4 + {g}]" for g in range(dq)]
        values = [f"v[(at.v + j * p(32u)) / 4 + {g}]" for g in range(dvv)]
    else:
        keys = vec4_lanes(d, lambda i: f"k[at.k + {i} * p(30u) + j * p(31u)]")
        values = vec4_lanes(dv, lambda i: f"v[at.v + j * p(32u) + {i} * p(33u)]")
    return {"ROWS": str(rows), **row_text(d, dv, rows, vec4), **key_update_text(d, dv, rows, keys, values)}


def tile_keys(d: int, dv: int) -> int:
    """Keys per tile of the tiled kernel: TILE_KEYS, fewer where K's and V's rows would pass
    TILE_BYTES. With the tile's scores (TILE_KEYS x WORKGROUP floats, 4 KiB) that stays within the
    16 KiB of workgroup memory WebGPU guarantees."""
    vec4s = -(-d // 4) + -(-dv // 4)  # of a key's K and V rows
    return max(1, min(TILE_KEYS, TILE_BYTES // (16 * vec4s)))


def tiled_kernel_text(d: int, dv: int, vec4: bool) -> dict[str, str]:
    """The tiled kernel's text: one row's code around the keys and its update with a tile
    (tile_update_text), the expressions that copy vec4 g of key j into the tiles (lanes past D or
    D_v zero where read one by one), and the partials' store of a split."""
    dq, dvv = -(-d // 4), -(-dv // 4)
    if vec4:
        k_vec4, v_vec4 = "k[(at.k + j * p(31u)) / 4 + g]", "v[(at.v + j * p(32u)) / 4 + g]"
    else:
        def lanes(read, size):
            return f"vec4<f32>({', '.join(f'select(0.0, {read(c)}, 4 * g + {c} < {size})' for c in range(4))})"

        k_vec4 = lanes(lambda c: f"k[at.k + (4 * g + {c}) * p(30u) + j * p(31u)]", "D")
        v_vec4 = lanes(lambda c: f"v[at.v + j * p(32u) + (4 * g + {c}) * p(33u)]", "DV")
    tk = tile_keys(d, dv)
    sizes = {"TK": tk, "D": d, "DV": dv, "DQ": dq, "DVQ": dvv}
    lanes = "xyzw"
    store_part = ["y[part] = best0;", "y[part + 1] = total0;"]
    store_part += [f"y[part + {2 + i}] = acc0_{i // 4}.{lanes[i % 4]};" for i in range(dv)]
    return {**{name: str(size) for name, size in sizes.items()}, "K_VEC4": k_vec4, "V_VEC4": v_vec4,
            "STORE_PART": "\n        ".join(store_part), **tile_update_text(dq, dvv),
            **row_text(d, dv, 1, vec4)}


def tile_update_text(dq: int, dvv: int) -> dict[str, str]:
    """The tiled kernel's per-tile update of its row (best0, total0, acc0_g): the score of key t
    of the tile, the rescale of the total and sums to the tile's maximum, and key t's share (its
    weight `weight`). Per key that is D + D_v multiply-adds and one exp, against a rescale of D_v
    sums and two exps per key updated one at a time."""
    rescale = ["total0 = total0 * scale;", *[f"acc0_{g} = acc0_{g} * scale;" for g in range(dvv)]]
    accumulate = ["total0 += weight;", *[f"acc0_{g} += weight * v_tile[t * DVQ + {g}];" for g in range(dvv)]]
    return {"TILE_DOT": " + ".join(f"dot(q0_{g}, k_tile[t * DQ + {g}])" for g in range(dq)),
            "RESCALE": "\n        ".join(rescale), "ACCUMULATE": "\n            ".join(accumulate),
            "ROWS_WG": str(WORKGROUP)}


def row_text(d: int, dv: int, rows: int, vec4: bool) -> dict[str, str]:
    """Both kernels' per-row code around the keys: load `rows` query rows from r0 on (scaled by
    alpha) and start their running maximum, total and value sums; store."""
    dq, dvv = -(-d // 4), -(-dv // 4)
    load_q = []
    for r in range(rows):
        load_q.append(f"let row{r} = min(r0 + {r}, rows - 1);")
        if vec4:
            rows_q = [f"q[(at.q + row{r} * p(28u)) / 4 + {g}]" for g in range(dq)]
        else:
            rows_q = vec4_lanes(d, lambda i, r=r: f"q[at.q + row{r} * p(28u) + {i} * p(29u)]")
        load_q += [f"let q{r}_{g} = alpha * {lanes};" for g, lanes in enumerate(rows_q)]
        load_q += [f"var best{r} = -3.4028235e38;", f"var total{r} = 0.0;"]
        load_q += [f"var acc{r}_{g} = vec4<f32>(0.0);" for g in range(dvv)]
    store = []
    for r in range(rows):
        lanes = "xyzw"
        writes = [f"        y[at.y + (r0 + {r}) * p(37u) + {4 * g + c} * p(38u)] = acc{r}_{g}.{lanes[c]} * inv;"
                  for g in range(dvv) for c in range(4) if 4 * g + c < dv]
        store += [f"if (r0 + {r} < rows) {{", f"        let inv = 1.0 / total{r};", *writes, "    }"]
    return {"ELEMENT": "vec4<f32>" if vec4 else "f32", "LOAD_Q": "\n    ".join(load_q), "STORE": "\n    ".join(store)}


def key_update_text(d: int, dv: int, rows: int, keys: list[str], values: list[str]) -> dict[str, str]:
    """The rows kernel's per-key code: load key j (its vec4s `keys` and `values`) and update each
    row's running maximum, total and value sums with it."""
    dq, dvv = -(-d // 4), -(-dv // 4)
    load_kv = [f"let k_{g} = {lanes};" for g, lanes in enumerate(keys)]
    load_kv += [f"let v_{g} = {lanes};" for g, lanes in enumerate(values)]
    update = []
    for r in range(rows):
        dot = " + ".join(f"dot(q{r}_{g}, k_{g})" for g in range(dq))
        update += [f"let s{r} = masked({dot}, row{r}, j, at.m, beta, has_mask);",
                   f"let top{r} = max(best{r}, s{r});", f"let scale{r} = exp(best{r} - top{r});",
                   f"let weight{r} = exp(s{r} - top{r});", f"total{r} = total{r} * scale{r} + weight{r};",
                   *[f"acc{r}_{g} = acc{r}_{g} * scale{r} + weight{r} * v_{g};" for g in range(dvv)],
                   f"best{r} = top{r};"]
    return {"LOAD_KV": "\n            ".join(load_kv), "UPDATE": "\n            ".join(update)}


@gpu_kernel("Attention")
class AttentionGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if step.output_specs[0].dtype != "float32":
            return f"Attention on {step.output_specs[0].dtype} has no GPU kernel"
        layout = AttentionLayout(step)
        if len(layout.batch) > MAX_BATCH_RANK:
            return f"{len(layout.batch)} batch axes that do not merge (the kernel takes {MAX_BATCH_RANK})"
        if max(layout.d, layout.dv) > ROWS_MAX_HEAD:  # the three products on CPU adapters (any width)
            for sub in unfused_steps(step, "scores", "probs"):
                reason = EXECUTIONS[sub.op.op_type].unsupported_reason(sub)
                if reason:
                    return f"as three ops: {reason}"
        return None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        """The fused kernels: the keys (twice in the tiled kernel: scores, then weights), plus
        (tiled) per tile its own iteration and the copy loops' (tile_keys x the head's vec4s over
        the workgroup); the three ops: theirs."""
        layout = AttentionLayout(step)
        tk = tile_keys(layout.d, layout.dv)
        copies = -(-tk * -(-layout.d // 4) // WORKGROUP) + -(-tk * -(-layout.dv // 4) // WORKGROUP)
        fused = 2 * layout.keys + -(-layout.keys // tk) * (1 + copies) + MAX_BATCH_RANK
        if max(layout.d, layout.dv) <= ROWS_MAX_HEAD:
            return fused
        return max(fused, *(EXECUTIONS[s.op.op_type].loop_iterations(s) for s in unfused_steps(step, "", "")))

    def prepare(self) -> None:
        step = self.step
        layout = AttentionLayout(step)
        if step.output_specs[0].size == 0:
            return
        mask = step.inputs[MASK] if layout.has_mask else step.inputs[Q]
        tensors = [step.inputs[0], step.inputs[1], step.inputs[2], mask, step.outputs[0]]
        context = self.backend.context
        cpu = context.info.adapter_type == "CPU"
        variant = kernel_variant(context)
        alpha, beta = step.attrs["alpha"], step.attrs["beta"]
        widest = max(layout.d, layout.dv)
        if variant == "tiled" and widest <= MAX_HEAD:  # a workgroup of WORKGROUP rows; the kernel reads WG
            self._prepare_tiled(layout, tensors, alpha, beta)
        elif widest <= ROWS_MAX_HEAD:
            rows = rows_per_invocation(cpu)
            params = layout.params(rows, alpha, beta)
            text = kernel_text(layout.d, layout.dv, rows, layout.vec4_reads())
            self.dispatch(KERNELS["rows"], tensors, params, layout.batch_count * params[3], text=text)
        else:
            self._prepare_unfused(layout)

    def _prepare_tiled(self, layout: AttentionLayout, tensors: list[str], alpha: float, beta: float) -> None:
        """The tiled kernel over all keys, or over split keys into a scratch buffer of partials
        followed by the merge (split_keys). Where a split may be picked, the pipelines of the
        other choice compile too, so that a resize compiles nothing."""
        from .conv_paths import scratch

        params = layout.params(WORKGROUP, alpha, beta)
        text = tiled_kernel_text(layout.d, layout.dv, layout.vec4_reads())
        merge_text = {"DV": str(layout.dv)}
        groups = layout.batch_count * params[3]
        tk = int(text["TK"])
        chunk = split_keys(self.backend.context, groups, layout.keys, tk)
        record_bytes = layout.batch_count * layout.rows * (layout.dv + 2) * 4  # a split's partials
        while chunk and -(-layout.keys // chunk) * record_bytes > self.backend.max_binding:
            chunk *= 2  # fewer splits, until the partials fit one binding
        splits = -(-layout.keys // chunk) if chunk else 1
        budget = self.backend.loop_budget
        if splits < 2 or (budget is not None and 2 * splits + MAX_BATCH_RANK > budget):  # the merge's loops
            chunk, splits = 0, 1
        params = params + [chunk or layout.keys, splits]  # slots 41, 42 after alpha and beta
        y = tensors[-1]
        if splits > 1:
            partials = scratch(self, "attention partials",
                               -(-layout.batch_count * layout.rows * splits * (layout.dv + 2) // 4), shared=True)
            self.dispatch(KERNELS["tiled"], [*tensors[:-1], partials], params, groups * splits * WORKGROUP, text=text)
            self.dispatch(MERGE_KERNEL, [partials, y], params, layout.batch_count * layout.rows * layout.dv,
                          text=merge_text)
        else:
            self.dispatch(KERNELS["tiled"], tensors, params, groups * WORKGROUP, text=text)
        forced = forced_split()
        may_split = bool(forced) if forced is not None else self.backend.context.info.adapter_type != "CPU"
        if may_split and splits == 1:
            self.compile(MERGE_KERNEL, [y, y], text=merge_text)

    def _prepare_unfused(self, layout: AttentionLayout) -> None:
        """The scores MatMul (alpha, the mask as its bias), Softmax over the keys and the context
        MatMul (perm_y), through two scratch buffers of the scores' size."""
        from .conv_paths import scratch

        vec4s = -(-layout.batch_count * layout.rows * layout.keys // 4)
        # Shared by the model's Attention steps of this size: one pair of buffers, not one per layer.
        scores = scratch(self, "attention scores", vec4s, shared=True)
        probs = scratch(self, "attention probabilities", vec4s, shared=True)
        for sub in unfused_steps(self.step, scores, probs):
            execution = EXECUTIONS[sub.op.op_type](self.backend, sub)
            execution.prepare()
            self.dispatches.extend(execution.dispatches)


def unfused_steps(step: Step, scores: str, probs: str) -> list[Step]:
    """The three steps Attention was fused from, the scores in tensor `scores` and the
    probabilities in `probs`: MatMul (Q', K', the mask as C), Softmax, MatMul (P, V', perm_y)."""
    layout = AttentionLayout(step)
    attrs = step.attrs
    dtype = step.output_specs[0].dtype
    scores_spec = TensorSpec((*layout.batch_shape, layout.rows, layout.keys), dtype)
    mask = step.inputs[MASK] if layout.has_mask else ""
    name = step.node.name
    scores_attrs = {"perm_a": attrs["perm_q"], "trans_a": attrs["trans_q"], "perm_b": attrs["perm_k"],
                    "trans_b": attrs["trans_k"], "alpha": attrs["alpha"], "beta": attrs["beta"]}
    context_attrs = {"perm_b": attrs["perm_v"], "trans_b": attrs["trans_v"], "perm_y": attrs["perm_y"]}
    scores_node = Node("MatMul", [step.inputs[0], step.inputs[1], mask], [scores], scores_attrs, name=f"{name}/scores")
    softmax_node = Node("Softmax", [scores], [probs], {"axis": -1, "kind": "softmax"}, name=f"{name}/softmax")
    context_node = Node("MatMul", [probs, step.inputs[2]], list(step.outputs[:1]), context_attrs,
                        name=f"{name}/context")
    mask_spec = step.input_specs[MASK] if layout.has_mask else None
    return [part_step(step, scores_node, [*step.input_specs[:2], mask_spec], [scores_spec]),
            part_step(step, softmax_node, [scores_spec], [scores_spec]),
            part_step(step, context_node, [scores_spec, step.input_specs[2]], list(step.output_specs[:1]))]
