"""3x3 stride-1 Conv on NC4HW4 by Winograd F(2x2, 3x3) or F(4x4, 3x3) (Lavin & Gray, 2015), three
dispatches:

1. input transform (winograd{m}_input.wgsl): V = B^T d B for every (m + 2)^2 input tile and input
   slice, into a scratch buffer laid out [position][input slice][tile];
2. batched GEMM (winograd_gemm.wgsl): M[position] = U[position] x V[position], U = G g G^T the
   weights transformed once at prepare and packed as 4x4 matrices over groups of 4 output slices;
3. output transform + epilogue (winograd{m}_output.wgsl): Y = A^T M A, bias, residual, activation.

F(2,3) does 2.25x fewer multiplies than the direct conv, F(4,3) 4x, for scratch traffic and two more
dispatches; conv_paths.py decides when that pays. With precision "fp16-arith" the F(2,3) GEMM
multiplies in 16 bits (U packed as f16, V rounded on load, sums in conv_paths.HALF_SUMS' type); the
transforms, the scratch buffers and F(4,3)'s GEMM stay 32-bit (conv_paths.HALF_WINOGRAD_UNITS).
"""
from __future__ import annotations

import numpy as np

from .conv import ceil_div

# Weight transforms G (alpha x 3) per output tile size m (alpha = m + 2).
G_MATRIX = {
    2: np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]),
    4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
}
TILE_BLOCK = 16  # tiles (or pixels) per GEMM invocation, and the padding of the scratch rows
SLICE_BLOCK = 4  # output slices per GEMM invocation


def pack_quads(u: np.ndarray, slices: int = SLICE_BLOCK, chunk: int = 1) -> np.ndarray:
    """(P, C_out, C_in) matrices per position -> [P][block of `slices` output slices][chunk of
    `chunk` input slices][input slice][16 vec4s per 4 output slices: for each output slice, the 4
    columns (input lanes) of its 4x4 matrix, each a vec4 over the slice's output channels].
    Channels are zero-padded to whole blocks and chunks. By default a block is a quad of
    SLICE_BLOCK slices and a chunk one input slice: [P][quad][input slice][16 vec4s]."""
    positions, cout, cin = u.shape
    blocks, chunks = ceil_div(cout, 4 * slices), ceil_div(cin, 4 * chunk)
    padded = np.zeros((positions, blocks * 4 * slices, chunks * chunk * 4), np.float64)
    padded[:, :cout, :cin] = u
    # [p][block][slice s][out lane o][chunk][c4][in lane j] -> [p][block][chunk][c4][s][j][o]
    tiles = padded.reshape(positions, blocks, slices, 4, chunks, chunk, 4).transpose(0, 1, 4, 5, 2, 6, 3)
    return np.ascontiguousarray(tiles, np.float32)


def transformed_weights(unit: int):
    """The pack function of U = G g G^T for packed_constant (computed in float64)."""

    def pack(w: np.ndarray) -> np.ndarray:
        g = G_MATRIX[unit]
        cout, cin = w.shape[:2]
        u = np.einsum("ik,ockl,jl->ijoc", g, w.astype(np.float64), g)
        return pack_quads(u.reshape(-1, cout, cin))

    return pack


def winograd_geometry(unit: int, y_shape) -> dict:
    """Tile counts and scratch sizes (vec4s) of an F(unit, 3) conv with output y_shape."""
    n, cout, oh, ow = y_shape
    alpha = unit + 2
    tw, th = ceil_div(ow, unit), ceil_div(oh, unit)
    tiles = n * th * tw
    padded = ceil_div(tiles, TILE_BLOCK) * TILE_BLOCK
    return {"alpha": alpha, "tw": tw, "th": th, "tiles": tiles, "padded": padded,
            "quads": ceil_div(cout, 4 * SLICE_BLOCK)}


def prepare_winograd(ex, unit: int, begin, epilogue: list) -> None:
    """Dispatches of the Winograd path for execution ex (an NC4HW4 Conv, one group, 3x3 stride 1
    dilation 1); epilogue holds params slots 12..30 (bias, activation, residual, tensor dims)."""
    from .conv_paths import (
        HALF_WINOGRAD_UNITS,
        arithmetic_text,
        bias_tensor,
        feature_text,
        residual_tensor,
        scratch,
        weight_packer,
    )

    step = ex.step
    x, y = step.input_specs[0], step.output_specs[0]
    geo = winograd_geometry(unit, y.shape)
    c4in = ceil_div(x.shape[1], 4)
    positions = geo["alpha"] ** 2
    padded, quads, blocks = geo["padded"], geo["quads"], geo["padded"] // TILE_BLOCK
    v = scratch(ex, "winograd_v", positions * c4in * padded)
    m = scratch(ex, "winograd_m", positions * SLICE_BLOCK * quads * padded)
    gemm, half = "conv/winograd_gemm.wgsl", unit in HALF_WINOGRAD_UNITS
    u = ex.packed_constant(f"winograd{unit}_weights", step.input_values[1],
                           weight_packer(ex, gemm, transformed_weights(unit), half))
    tiles = [geo["tw"], geo["th"], padded]
    pads = [0] * 5 + list(begin)  # slots 5..11: pads at 10, 11

    count = x.shape[0] * c4in * geo["th"] * geo["tw"]
    ex.dispatch(f"conv/winograd{unit}_input.wgsl", [step.inputs[0], v], [count, *tiles, c4in, *pads] + epilogue,
                count, text=feature_text(ex, x=0))
    count = positions * quads * blocks
    ex.dispatch(gemm, [v, u, m], [count, blocks, quads, c4in, padded], count, text=arithmetic_text(ex, gemm, half))
    count = y.shape[0] * ceil_div(y.shape[1], 4) * geo["th"] * geo["tw"]
    ex.dispatch(f"conv/winograd{unit}_output.wgsl", [m, bias_tensor(ex, u), step.outputs[0], residual_tensor(step)],
                [count, *tiles, SLICE_BLOCK * quads, *pads] + epilogue, count, text=feature_text(ex, y=2, r=3))
