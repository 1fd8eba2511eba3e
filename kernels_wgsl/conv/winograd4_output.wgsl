// Winograd F(4x4, 3x3) output transform and epilogue: as winograd2_output.wgsl with 36 positions
// per tile and 4x4 output pixels; A^T from Lavin & Gray (2015).
// params: as winograd2_output.wgsl.
@group(0) @binding(0) var<storage, read_write> m: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(4) var<uniform> params: Params;
// include: conv/winograd_tile.wgsl
// include: conv/winograd_epilogue.wgsl
override WG: u32 = 64u;

// A^T applied to 6 values along one axis.
fn at(a: array<vec4<f32>, 6>) -> array<vec4<f32>, 4> {
    let s1 = a[1] + a[2];
    let s2 = a[3] + a[4];
    let d1 = a[1] - a[2];
    let d2 = a[3] - a[4];
    return array<vec4<f32>, 4>(a[0] + s1 + s2, d1 + 2.0 * d2, s1 + 4.0 * s2, d1 + 8.0 * d2 + a[5]);
}

// The 6 GEMM results of a tile row (positions `step` apart).
fn load_row(at: i32, step: i32) -> array<vec4<f32>, 6> {
    return array<vec4<f32>, 6>(m[at], m[at + step], m[at + 2 * step], m[at + 3 * step], m[at + 4 * step], m[at + 5 * step]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let t = winograd_tile(index, p(22u));
    let b = slice_bias(t.c4);
    let step = t.step;
    // Rows along W first, then each column along H; constant indices only (registers).
    let e0 = at(load_row(t.at, step));
    let e1 = at(load_row(t.at + 6 * step, step));
    let e2 = at(load_row(t.at + 12 * step, step));
    let e3 = at(load_row(t.at + 18 * step, step));
    let e4 = at(load_row(t.at + 24 * step, step));
    let e5 = at(load_row(t.at + 30 * step, step));
    let c0 = at(array<vec4<f32>, 6>(e0[0], e1[0], e2[0], e3[0], e4[0], e5[0]));
    let c1 = at(array<vec4<f32>, 6>(e0[1], e1[1], e2[1], e3[1], e4[1], e5[1]));
    let c2 = at(array<vec4<f32>, 6>(e0[2], e1[2], e2[2], e3[2], e4[2], e5[2]));
    let c3 = at(array<vec4<f32>, 6>(e0[3], e1[3], e2[3], e3[3], e4[3], e5[3]));
    let oy = t.ty * 4;
    let ox = t.tx * 4;
    put(t, oy, ox, c0[0], b); put(t, oy + 1, ox, c0[1], b);
    put(t, oy + 2, ox, c0[2], b); put(t, oy + 3, ox, c0[3], b);
    put(t, oy, ox + 1, c1[0], b); put(t, oy + 1, ox + 1, c1[1], b);
    put(t, oy + 2, ox + 1, c1[2], b); put(t, oy + 3, ox + 1, c1[3], b);
    put(t, oy, ox + 2, c2[0], b); put(t, oy + 1, ox + 2, c2[1], b);
    put(t, oy + 2, ox + 2, c2[2], b); put(t, oy + 3, ox + 2, c2[3], b);
    put(t, oy, ox + 3, c3[0], b); put(t, oy + 1, ox + 3, c3[1], b);
    put(t, oy + 2, ox + 3, c3[2], b); put(t, oy + 3, ox + 3, c3[3], b);
}
