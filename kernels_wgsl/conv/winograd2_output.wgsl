// Winograd F(2x2, 3x3) output transform and epilogue: each invocation reads one tile's 16 GEMM
// results for one output slice (m laid out [position][slice][tile]), computes A^T M A (2x2 output
// pixels), adds the bias and the residual, applies the fused activation {{ACT}} per lane and
// stores the pixels inside the output.
// params: 0 = invocations, 1 = tiles along W, 2 = tiles along H, 3 = padded tile count, 4 = slices
// in m (output slices rounded up to pairs), 12 = has bias, 13 = alpha, 14 = beta (f32 bits),
// 15 = has residual, 21..25 y dims, 26..30 r dims (N, C4, H, W, C).
@group(0) @binding(0) var<storage, read_write> m: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(4) var<uniform> params: Params;
// include: conv/winograd_tile.wgsl
// include: conv/winograd_epilogue.wgsl
override WG: u32 = 64u;

// A^T applied to 4 values along one axis.
fn at(a: array<vec4<f32>, 4>) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(a[0] + a[1] + a[2], a[1] - a[2] - a[3]);
}

// The 4 GEMM results of a tile row (positions `step` apart).
fn load_row(at: i32, step: i32) -> array<vec4<f32>, 4> {
    return array<vec4<f32>, 4>(m[at], m[at + step], m[at + 2 * step], m[at + 3 * step]);
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
    let e1 = at(load_row(t.at + 4 * step, step));
    let e2 = at(load_row(t.at + 8 * step, step));
    let e3 = at(load_row(t.at + 12 * step, step));
    let c0 = at(array<vec4<f32>, 4>(e0[0], e1[0], e2[0], e3[0]));
    let c1 = at(array<vec4<f32>, 4>(e0[1], e1[1], e2[1], e3[1]));
    let oy = t.ty * 2;
    let ox = t.tx * 2;
    put(t, oy, ox, c0[0], b); put(t, oy + 1, ox, c0[1], b);
    put(t, oy, ox + 1, c1[0], b); put(t, oy + 1, ox + 1, c1[1], b);
}
