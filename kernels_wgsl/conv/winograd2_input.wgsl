// Winograd F(2x2, 3x3) input transform (3x3 stride-1 Conv on NC4HW4, see backends/wgpu/conv_winograd.py):
// each invocation takes one 4x4 input tile (origin 2 * tile - pad, zeros outside the image) of one
// input slice (4 channels, one vec4 per pixel) and writes V = B^T d B, 16 vec4s, to the scratch
// buffer v laid out [position xi = 4 * row + column][input slice][tile] (tiles padded to the GEMM's
// block; padding tiles stay zero).
// params: 0 = invocations, 1 = tiles along W, 2 = tiles along H, 3 = padded tile count (v's row
// length), 4 = input slices, 10..11 = pads (top, left), 16..20 x dims (N, C4, H, W, C).
{{DECL_X}}
@group(0) @binding(1) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: Params;
// include: conv/winograd_tap.wgsl
// include: conv/winograd_tile.wgsl
override WG: u32 = 64u;

// The 4 input pixels of a tile row (zeros in the padding).
fn row(n: i32, c4: i32, iy: i32, ix: i32) -> array<vec4<f32>, 4> {
    return array<vec4<f32>, 4>(tap(n, c4, iy, ix), tap(n, c4, iy, ix + 1), tap(n, c4, iy, ix + 2),
                               tap(n, c4, iy, ix + 3));
}

// Column j of V (positions 4 * i + j, i = 0..3, each `stride` apart from the previous).
fn put(at: i32, stride: i32, col: array<vec4<f32>, 4>) {
    v[at] = col[0];
    v[at + stride] = col[1];
    v[at + 2 * stride] = col[2];
    v[at + 3 * stride] = col[3];
}

// B^T applied to 4 values along one axis.
fn bt(a: array<vec4<f32>, 4>) -> array<vec4<f32>, 4> {
    return array<vec4<f32>, 4>(a[0] - a[2], a[1] + a[2], a[2] - a[1], a[1] - a[3]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let t = winograd_tile(index, p(4u));
    let iy = t.ty * 2 - p(10u);
    let ix = t.tx * 2 - p(11u);
    // Rows transformed along W first, then each column along H; constant indices only, so every
    // value stays in registers.
    let e0 = bt(row(t.n, t.c4, iy, ix));
    let e1 = bt(row(t.n, t.c4, iy + 1, ix));
    let e2 = bt(row(t.n, t.c4, iy + 2, ix));
    let e3 = bt(row(t.n, t.c4, iy + 3, ix));
    let step = t.step;  // from one position to the next
    put(t.at, 4 * step, bt(array<vec4<f32>, 4>(e0[0], e1[0], e2[0], e3[0])));
    put(t.at + step, 4 * step, bt(array<vec4<f32>, 4>(e0[1], e1[1], e2[1], e3[1])));
    put(t.at + 2 * step, 4 * step, bt(array<vec4<f32>, 4>(e0[2], e1[2], e2[2], e3[2])));
    put(t.at + 3 * step, 4 * step, bt(array<vec4<f32>, 4>(e0[3], e1[3], e2[3], e3[3])));
}
