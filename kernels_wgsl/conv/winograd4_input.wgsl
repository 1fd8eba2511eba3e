// Winograd F(4x4, 3x3) input transform: as winograd2_input.wgsl with 6x6 input tiles (origin
// 4 * tile - pad) and 36 positions (xi = 6 * row + column); B^T from Lavin & Gray (2015).
// params: as winograd2_input.wgsl.
{{DECL_X}}
@group(0) @binding(1) var<storage, read_write> v: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: Params;
// include: conv/winograd_tap.wgsl
// include: conv/winograd_tile.wgsl
override WG: u32 = 64u;

// The 6 input pixels of a tile row (zeros in the padding).
fn row(n: i32, c4: i32, iy: i32, ix: i32) -> array<vec4<f32>, 6> {
    return array<vec4<f32>, 6>(tap(n, c4, iy, ix), tap(n, c4, iy, ix + 1), tap(n, c4, iy, ix + 2),
                               tap(n, c4, iy, ix + 3), tap(n, c4, iy, ix + 4), tap(n, c4, iy, ix + 5));
}

// Column j of V (positions 6 * i + j, i = 0..5, each `stride` apart from the previous).
fn put(at: i32, stride: i32, col: array<vec4<f32>, 6>) {
    v[at] = col[0];
    v[at + stride] = col[1];
    v[at + 2 * stride] = col[2];
    v[at + 3 * stride] = col[3];
    v[at + 4 * stride] = col[4];
    v[at + 5 * stride] = col[5];
}

// B^T applied to 6 values along one axis.
fn bt(a: array<vec4<f32>, 6>) -> array<vec4<f32>, 6> {
    let d = a[4] - a[2];
    let e = a[3] - a[1];
    return array<vec4<f32>, 6>(4.0 * a[0] - 5.0 * a[2] + a[4], a[3] + a[4] - 4.0 * (a[1] + a[2]),
                               a[4] - a[3] + 4.0 * (a[1] - a[2]), d + 2.0 * e, d - 2.0 * e,
                               4.0 * a[1] - 5.0 * a[3] + a[5]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let t = winograd_tile(index, p(4u));
    let iy = t.ty * 4 - p(10u);
    let ix = t.tx * 4 - p(11u);
    // Rows transformed along W first, then each column along H; constant indices only, so every
    // value stays in registers (a loop over a private array was ~2x slower on lavapipe).
    let e0 = bt(row(t.n, t.c4, iy, ix));
    let e1 = bt(row(t.n, t.c4, iy + 1, ix));
    let e2 = bt(row(t.n, t.c4, iy + 2, ix));
    let e3 = bt(row(t.n, t.c4, iy + 3, ix));
    let e4 = bt(row(t.n, t.c4, iy + 4, ix));
    let e5 = bt(row(t.n, t.c4, iy + 5, ix));
    let step = t.step;
    put(t.at, 6 * step, bt(array<vec4<f32>, 6>(e0[0], e1[0], e2[0], e3[0], e4[0], e5[0])));
    put(t.at + step, 6 * step, bt(array<vec4<f32>, 6>(e0[1], e1[1], e2[1], e3[1], e4[1], e5[1])));
    put(t.at + 2 * step, 6 * step, bt(array<vec4<f32>, 6>(e0[2], e1[2], e2[2], e3[2], e4[2], e5[2])));
    put(t.at + 3 * step, 6 * step, bt(array<vec4<f32>, 6>(e0[3], e1[3], e2[3], e3[3], e4[3], e5[3])));
    put(t.at + 4 * step, 6 * step, bt(array<vec4<f32>, 6>(e0[4], e1[4], e2[4], e3[4], e4[4], e5[4])));
    put(t.at + 5 * step, 6 * step, bt(array<vec4<f32>, 6>(e0[5], e1[5], e2[5], e3[5], e4[5], e5[5])));
}
