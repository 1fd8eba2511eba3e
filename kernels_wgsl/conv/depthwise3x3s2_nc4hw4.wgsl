// Depthwise 3x3 Conv, stride 2, dilation 1 (group = C_in = C_out) on NC4HW4 feature maps, optional
// bias and residual, fused activation {{ACT}} per lane. Each invocation computes one slice (4
// channels) over a block of 4 x 4 output pixels: it loads the block's 9 x 9 input pixels once (the
// last input row of an output row is the first of the next) and the 9 weights once: 5.6 loads per
// output pixel, where the row-segment kernel depthwise_nc4hw4.wgsl needs 11.3. An output row is
// stored as soon as its last input row is in, so only two rows of sums are live at a time.
// Weights as for that kernel: [c4][ky][kx] -> vec4 over the slice's channels.
// params: 0 = invocations, 1 = column blocks (of 4), 2 = row blocks (of 4), 10..11 = pads (top,
// left), 12 = has bias, 13 = alpha, 14 = beta (f32 bits), 15 = has residual, 16..20 x dims,
// 21..25 y dims, 26..30 r dims (N, C4, H, W, C).
// FLOAT is the arithmetic type of taps, weights and sums: 32-bit floats, or 16-bit ones for
// precision fp16-arith (weights packed so, accessors typed so; a sum of 9 products loses little in
// 16 bits). The epilogue is 32-bit, its result stored in the FLOAT type. No type names in
// comments: the loader enables 16-bit floats wherever their name appears.
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/depthwise3x3_block.wgsl

// The 9 input pixels of a block row.
fn row(n: i32, c4: i32, iy: i32, ix: i32) -> array<vec4<{{FLOAT}}>, 9> {
    return array<vec4<{{FLOAT}}>, 9>(tap(n, c4, iy, ix), tap(n, c4, iy, ix + 1), tap(n, c4, iy, ix + 2),
                               tap(n, c4, iy, ix + 3), tap(n, c4, iy, ix + 4), tap(n, c4, iy, ix + 5),
                               tap(n, c4, iy, ix + 6), tap(n, c4, iy, ix + 7), tap(n, c4, iy, ix + 8));
}

// acc (4 output pixels of a row) plus one kernel row k applied to input row x (columns 2i..2i+2
// for pixel i).
fn mac(acc: array<vec4<{{FLOAT}}>, 4>, x: array<vec4<{{FLOAT}}>, 9>,
       k: array<vec4<{{FLOAT}}>, 3>) -> array<vec4<{{FLOAT}}>, 4> {
    return array<vec4<{{FLOAT}}>, 4>(acc[0] + k[0] * x[0] + k[1] * x[1] + k[2] * x[2],
                               acc[1] + k[0] * x[2] + k[1] * x[3] + k[2] * x[4],
                               acc[2] + k[0] * x[4] + k[1] * x[5] + k[2] * x[6],
                               acc[3] + k[0] * x[6] + k[1] * x[7] + k[2] * x[8]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let block = block_at(index);
    let n = block.n;
    let c4 = block.c4;
    let oy = block.oy;
    let ox = block.ox;
    let k0 = kernel_row(c4, 0);
    let k1 = kernel_row(c4, 1);
    let k2 = kernel_row(c4, 2);
    let iy = oy * 2 - p(10u);
    let ix = ox * 2 - p(11u);
    let zero = vec4<{{FLOAT}}>(0.0);
    let none = array<vec4<{{FLOAT}}>, 4>(zero, zero, zero, zero);
    let b = slice_bias(c4);
    // Input row 2r + j feeds output row r with kernel row j: row 2r + 2 ends output row r and
    // starts row r + 1. Past the output's last row the invocation stops (no loads for it).
    let oh = p(23u);
    let x0 = row(n, c4, iy, ix);
    var a0 = mac(none, x0, k0);
    let x1 = row(n, c4, iy + 1, ix);
    a0 = mac(a0, x1, k1);
    let x2 = row(n, c4, iy + 2, ix);
    a0 = mac(a0, x2, k2);
    put_row(n, c4, oy, ox, a0, b);
    if (oy + 1 >= oh) {
        return;
    }
    var a1 = mac(none, x2, k0);
    let x3 = row(n, c4, iy + 3, ix);
    a1 = mac(a1, x3, k1);
    let x4 = row(n, c4, iy + 4, ix);
    a1 = mac(a1, x4, k2);
    put_row(n, c4, oy + 1, ox, a1, b);
    if (oy + 2 >= oh) {
        return;
    }
    var a2 = mac(none, x4, k0);
    let x5 = row(n, c4, iy + 5, ix);
    a2 = mac(a2, x5, k1);
    let x6 = row(n, c4, iy + 6, ix);
    a2 = mac(a2, x6, k2);
    put_row(n, c4, oy + 2, ox, a2, b);
    if (oy + 3 >= oh) {
        return;
    }
    var a3 = mac(none, x6, k0);
    let x7 = row(n, c4, iy + 7, ix);
    a3 = mac(a3, x7, k1);
    let x8 = row(n, c4, iy + 8, ix);
    a3 = mac(a3, x8, k2);
    put_row(n, c4, oy + 3, ox, a3, b);
}
