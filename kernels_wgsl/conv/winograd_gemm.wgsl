// Winograd's batched GEMM, one per position xi of the transformed tiles (backends/wgpu/conv_winograd.py):
// M[xi][oc4][t] = sum over input slices c of U[xi][oc4][c] * V[xi][c][t], where U is a 4x4 matrix
// (column j = input lane j, rows = the output slice's 4 channels) of the weights transformed at
// prepare and V the input transform's vec4 for tile t.
// Each invocation computes 4 output slices (16 channels) x 16 consecutive tiles of one position:
// per input slice 16 u + 16 v loads for 1024 FMAs. Loads, not FMAs, bound lavapipe: this block took
// ~20% less CPU time there than 2 slices x 8 tiles (1.7x less than 1 x 8), as little as 4 x 32 or
// 8 x 16, which pad more.
// U is packed [xi][slice quad][c][16 vec4s: the 4 slices' matrices]; v and m rows (a slice at a
// position) hold the padded tile count, a multiple of 16, so no block leaves its row.
// params: 0 = invocations, 1 = tile blocks (of 16), 2 = output slice quads, 3 = input slices,
// 4 = padded tile count.
// FLOAT is the multiply type: 32-bit floats, or 16-bit ones for precision fp16-arith (U packed so,
// V converted on load; the transforms and scratch buffers stay 32-bit); ACC the type the sums run
// in (conv_paths.py: 32-bit for these long sums). No type names in comments: the loader enables
// 16-bit floats wherever their name appears.
@group(0) @binding(0) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> u: array<vec4<{{FLOAT}}>>;
@group(0) @binding(2) var<storage, read_write> m: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

fn weights(i: i32) -> mat4x4<{{FLOAT}}> {
    return mat4x4<{{FLOAT}}>(u[i], u[i + 1], u[i + 2], u[i + 3]);
}

// One tile's results for the 4 slices (rows `tiles` apart).
fn put(at: i32, tiles: i32, a: vec4<{{ACC}}>, b: vec4<{{ACC}}>, c: vec4<{{ACC}}>, d: vec4<{{ACC}}>) {
    m[at] = vec4<f32>(a);
    m[at + tiles] = vec4<f32>(b);
    m[at + 2 * tiles] = vec4<f32>(c);
    m[at + 3 * tiles] = vec4<f32>(d);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let blocks = p(1u); let quads = p(2u); let c4s = p(3u); let tiles = p(4u);
    var rest = index;
    let t0 = (rest % blocks) * 16; rest /= blocks;
    let o4 = rest % quads;
    let xi = rest / quads;
    var vi = xi * c4s * tiles + t0;
    var ui = (xi * quads + o4) * c4s * 16;
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
        let x0 = vec4<{{FLOAT}}>(v[vi + 0]); let x1 = vec4<{{FLOAT}}>(v[vi + 1]); let x2 = vec4<{{FLOAT}}>(v[vi + 2]); let x3 = vec4<{{FLOAT}}>(v[vi + 3]);
        let x4 = vec4<{{FLOAT}}>(v[vi + 4]); let x5 = vec4<{{FLOAT}}>(v[vi + 5]); let x6 = vec4<{{FLOAT}}>(v[vi + 6]); let x7 = vec4<{{FLOAT}}>(v[vi + 7]);
        let x8 = vec4<{{FLOAT}}>(v[vi + 8]); let x9 = vec4<{{FLOAT}}>(v[vi + 9]); let x10 = vec4<{{FLOAT}}>(v[vi + 10]); let x11 = vec4<{{FLOAT}}>(v[vi + 11]);
        let x12 = vec4<{{FLOAT}}>(v[vi + 12]); let x13 = vec4<{{FLOAT}}>(v[vi + 13]); let x14 = vec4<{{FLOAT}}>(v[vi + 14]); let x15 = vec4<{{FLOAT}}>(v[vi + 15]);
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
        vi += tiles;
        ui += 16;
    }
    let out = (xi * quads + o4) * 4 * tiles + t0;
    put(out + 0, tiles, a0, b0, c0, d0);
    put(out + 1, tiles, a1, b1, c1, d1);
    put(out + 2, tiles, a2, b2, c2, d2);
    put(out + 3, tiles, a3, b3, c3, d3);
    put(out + 4, tiles, a4, b4, c4, d4);
    put(out + 5, tiles, a5, b5, c5, d5);
    put(out + 6, tiles, a6, b6, c6, d6);
    put(out + 7, tiles, a7, b7, c7, d7);
    put(out + 8, tiles, a8, b8, c8, d8);
    put(out + 9, tiles, a9, b9, c9, d9);
    put(out + 10, tiles, a10, b10, c10, d10);
    put(out + 11, tiles, a11, b11, c11, d11);
    put(out + 12, tiles, a12, b12, c12, d12);
    put(out + 13, tiles, a13, b13, c13, d13);
    put(out + 14, tiles, a14, b14, c14, d14);
    put(out + 15, tiles, a15, b15, c15, d15);
}
