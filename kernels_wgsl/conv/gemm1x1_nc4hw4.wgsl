// 1x1 Conv (stride 1, no padding, one group) on NC4HW4 feature maps as a GEMM of pixels x channels:
// y[n][oc4][p] = sum over input slices k of W[oc4][k] * x[n][k][p] with p the pixel index over
// H * W (rows are not blocks here, so narrow images keep the blocks full), then bias, residual
// and the fused activation {{ACT}} per lane.
// Each invocation computes 4 output slices (16 channels) x 16 consecutive pixels: per input slice
// 16 w + 16 x loads for 1024 FMAs (the block of winograd_gemm.wgsl); the pixels' coordinates are
// computed once, outside the loop. Weights are packed [slice quad][k][16 vec4s: the 4 slices' 4x4
// matrices, column j = input lane j], zero-padded to whole quads; bias per slice.
// params: 0 = invocations, 1 = pixel blocks per image (of 16), 2 = output slice quads, 3 = input
// slices, 12 = has bias, 13 = alpha, 14 = beta (f32 bits), 15 = has residual, 16..20 x dims,
// 21..25 y dims, 26..30 r dims (N, C4, H, W, C).
// FLOAT is the multiply type of inputs and weights: 32-bit floats, or 16-bit ones for precision
// fp16-arith (weights packed so, accessors typed so); ACC the type the sums run in (conv_paths.py:
// 32-bit for these long sums). The epilogue is 32-bit, its result stored in the FLOAT type. No
// type names in comments: the loader enables 16-bit floats wherever their name appears.
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/conv_epilogue.wgsl

fn weights(i: i32) -> mat4x4<{{FLOAT}}> {
    return mat4x4<{{FLOAT}}>(w[i], w[i + 1], w[i + 2], w[i + 3]);
}

// (row, column) of pixel q of an image; pixels past the end read the last one (never stored).
fn pixel(q: i32) -> vec2<i32> {
    let last = min(q, p(18u) * p(19u) - 1);
    return vec2<i32>(last / p(19u), last % p(19u));
}

// One pixel's results for the 4 output slices from o0.
fn put(n: i32, o0: i32, q: i32, at: vec2<i32>, a: vec4<{{ACC}}>, b: vec4<{{ACC}}>, c: vec4<{{ACC}}>, d: vec4<{{ACC}}>) {
    if (q < p(23u) * p(24u)) {
        store(n, o0, at.x, at.y, a);
        store(n, o0 + 1, at.x, at.y, b);
        store(n, o0 + 2, at.x, at.y, c);
        store(n, o0 + 3, at.x, at.y, d);
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let blocks = p(1u); let quads = p(2u); let c4s = p(3u);
    var rest = index;
    let p0 = (rest % blocks) * 16; rest /= blocks;
    let o4 = rest % quads;
    let n = rest / quads;
    let q0 = pixel(p0 + 0); let q1 = pixel(p0 + 1); let q2 = pixel(p0 + 2); let q3 = pixel(p0 + 3);
    let q4 = pixel(p0 + 4); let q5 = pixel(p0 + 5); let q6 = pixel(p0 + 6); let q7 = pixel(p0 + 7);
    let q8 = pixel(p0 + 8); let q9 = pixel(p0 + 9); let q10 = pixel(p0 + 10); let q11 = pixel(p0 + 11);
    let q12 = pixel(p0 + 12); let q13 = pixel(p0 + 13); let q14 = pixel(p0 + 14); let q15 = pixel(p0 + 15);
    var ui = o4 * c4s * 16;
    let zero = vec4<{{ACC}}>(0.0);
    var a0 = zero; var a1 = zero; var a2 = zero; var a3 = zero; var a4 = zero; var a5 = zero; var a6 = zero; var a7 = zero; var a8 = zero; var a9 = zero; var a10 = zero; var a11 = zero; var a12 = zero; var a13 = zero; var a14 = zero; var a15 = zero;
    var b0 = zero; var b1 = zero; var b2 = zero; var b3 = zero; var b4 = zero; var b5 = zero; var b6 = zero; var b7 = zero; var b8 = zero; var b9 = zero; var b10 = zero; var b11 = zero; var b12 = zero; var b13 = zero; var b14 = zero; var b15 = zero;
    var c0 = zero; var c1 = zero; var c2 = zero; var c3 = zero; var c4 = zero; var c5 = zero; var c6 = zero; var c7 = zero; var c8 = zero; var c9 = zero; var c10 = zero; var c11 = zero; var c12 = zero; var c13 = zero; var c14 = zero; var c15 = zero;
    var d0 = zero; var d1 = zero; var d2 = zero; var d3 = zero; var d4 = zero; var d5 = zero; var d6 = zero; var d7 = zero; var d8 = zero; var d9 = zero; var d10 = zero; var d11 = zero; var d12 = zero; var d13 = zero; var d14 = zero; var d15 = zero;
    for (var k = 0; k < c4s; k++) {
        let w0 = weights(ui + 0);
        let w1 = weights(ui + 4);
        let w2 = weights(ui + 8);
        let w3 = weights(ui + 12);
        let x0 = load_x(n, k, q0.x, q0.y); let x1 = load_x(n, k, q1.x, q1.y);
        let x2 = load_x(n, k, q2.x, q2.y); let x3 = load_x(n, k, q3.x, q3.y);
        let x4 = load_x(n, k, q4.x, q4.y); let x5 = load_x(n, k, q5.x, q5.y);
        let x6 = load_x(n, k, q6.x, q6.y); let x7 = load_x(n, k, q7.x, q7.y);
        let x8 = load_x(n, k, q8.x, q8.y); let x9 = load_x(n, k, q9.x, q9.y);
        let x10 = load_x(n, k, q10.x, q10.y); let x11 = load_x(n, k, q11.x, q11.y);
        let x12 = load_x(n, k, q12.x, q12.y); let x13 = load_x(n, k, q13.x, q13.y);
        let x14 = load_x(n, k, q14.x, q14.y); let x15 = load_x(n, k, q15.x, q15.y);
        a0 += vec4<{{ACC}}>(w0 * x0); b0 += vec4<{{ACC}}>(w1 * x0); c0 += vec4<{{ACC}}>(w2 * x0); d0 += vec4<{{ACC}}>(w3 * x0);
        a1 += vec4<{{ACC}}>(w0 * x1); b1 += vec4<{{ACC}}>(w1 * x1); c1 += vec4<{{ACC}}>(w2 * x1); d1 += vec4<{{ACC}}>(w3 * x1);
        a2 += vec4<{{ACC}}>(w0 * x2); b2 += vec4<{{ACC}}>(w1 * x2); c2 += vec4<{{ACC}}>(w2 * x2); d2 += vec4<{{ACC}}>(w3 * x2);
        a3 += vec4<{{ACC}}>(w0 * x3); b3 += vec4<{{ACC}}>(w1 * x3); c3 += vec4<{{ACC}}>(w2 * x3); d3 += vec4<{{ACC}}>(w3 * x3);
        a4 += vec4<{{ACC}}>(w0 * x4); b4 += vec4<{{ACC}}>(w1 * x4); c4 += vec4<{{ACC}}>(w2 * x4); d4 += vec4<{{ACC}}>(w3 * x4);
        a5 += vec4<{{ACC}}>(w0 * x5); b5 += vec4<{{ACC}}>(w1 * x5); c5 += vec4<{{ACC}}>(w2 * x5); d5 += vec4<{{ACC}}>(w3 * x5);
        a6 += vec4<{{ACC}}>(w0 * x6); b6 += vec4<{{ACC}}>(w1 * x6); c6 += vec4<{{ACC}}>(w2 * x6); d6 += vec4<{{ACC}}>(w3 * x6);
        a7 += vec4<{{ACC}}>(w0 * x7); b7 += vec4<{{ACC}}>(w1 * x7); c7 += vec4<{{ACC}}>(w2 * x7); d7 += vec4<{{ACC}}>(w3 * x7);
        a8 += vec4<{{ACC}}>(w0 * x8); b8 += vec4<{{ACC}}>(w1 * x8); c8 += vec4<{{ACC}}>(w2 * x8); d8 += vec4<{{ACC}}>(w3 * x8);
        a9 += vec4<{{ACC}}>(w0 * x9); b9 += vec4<{{ACC}}>(w1 * x9); c9 += vec4<{{ACC}}>(w2 * x9); d9 += vec4<{{ACC}}>(w3 * x9);
        a10 += vec4<{{ACC}}>(w0 * x10); b10 += vec4<{{ACC}}>(w1 * x10); c10 += vec4<{{ACC}}>(w2 * x10); d10 += vec4<{{ACC}}>(w3 * x10);
        a11 += vec4<{{ACC}}>(w0 * x11); b11 += vec4<{{ACC}}>(w1 * x11); c11 += vec4<{{ACC}}>(w2 * x11); d11 += vec4<{{ACC}}>(w3 * x11);
        a12 += vec4<{{ACC}}>(w0 * x12); b12 += vec4<{{ACC}}>(w1 * x12); c12 += vec4<{{ACC}}>(w2 * x12); d12 += vec4<{{ACC}}>(w3 * x12);
        a13 += vec4<{{ACC}}>(w0 * x13); b13 += vec4<{{ACC}}>(w1 * x13); c13 += vec4<{{ACC}}>(w2 * x13); d13 += vec4<{{ACC}}>(w3 * x13);
        a14 += vec4<{{ACC}}>(w0 * x14); b14 += vec4<{{ACC}}>(w1 * x14); c14 += vec4<{{ACC}}>(w2 * x14); d14 += vec4<{{ACC}}>(w3 * x14);
        a15 += vec4<{{ACC}}>(w0 * x15); b15 += vec4<{{ACC}}>(w1 * x15); c15 += vec4<{{ACC}}>(w2 * x15); d15 += vec4<{{ACC}}>(w3 * x15);
        ui += 16;
    }
    let o0 = o4 * 4;
    put(n, o0, p0 + 0, q0, a0, b0, c0, d0);
    put(n, o0, p0 + 1, q1, a1, b1, c1, d1);
    put(n, o0, p0 + 2, q2, a2, b2, c2, d2);
    put(n, o0, p0 + 3, q3, a3, b3, c3, d3);
    put(n, o0, p0 + 4, q4, a4, b4, c4, d4);
    put(n, o0, p0 + 5, q5, a5, b5, c5, d5);
    put(n, o0, p0 + 6, q6, a6, b6, c6, d6);
    put(n, o0, p0 + 7, q7, a7, b7, c7, d7);
    put(n, o0, p0 + 8, q8, a8, b8, c8, d8);
    put(n, o0, p0 + 9, q9, a9, b9, c9, d9);
    put(n, o0, p0 + 10, q10, a10, b10, c10, d10);
    put(n, o0, p0 + 11, q11, a11, b11, c11, d11);
    put(n, o0, p0 + 12, q12, a12, b12, c12, d12);
    put(n, o0, p0 + 13, q13, a13, b13, c13, d13);
    put(n, o0, p0 + 14, q14, a14, b14, c14, d14);
    put(n, o0, p0 + 15, q15, a15, b15, c15, d15);
}
