// Winograd F(4x4, 3x3) output transform and epilogue: as winograd2_output.wgsl with 36 positions
// per tile and 4x4 output pixels; A^T from Lavin & Gray (2015).
// params: as winograd2_output.wgsl.
@group(0) @binding(0) var<storage, read_write> m: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/finish.wgsl

fn put(n: i32, oc4: i32, oy: i32, ox: i32, acc: vec4<f32>, b: vec4<f32>) {
    if (oy < p(23u) && ox < p(24u)) {
        store_y(n, oc4, oy, ox, finish(n, oc4, oy, ox, acc + b));
    }
}

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
    let tw = p(1u); let th = p(2u); let c4s = p(22u);
    var rest = index;
    let tx = rest % tw; rest /= tw;
    let ty = rest % th; rest /= th;
    let oc4 = rest % c4s;
    let n = rest / c4s;
    let tiles = p(3u);
    let base = oc4 * tiles + (n * th + ty) * tw + tx;
    let step = p(4u) * tiles;
    var b = vec4<f32>(0.0);
    if (p(12u) != 0) {
        b = bias[oc4];
    }
    // Rows along W first, then each column along H; constant indices only (registers).
    let e0 = at(load_row(base, step));
    let e1 = at(load_row(base + 6 * step, step));
    let e2 = at(load_row(base + 12 * step, step));
    let e3 = at(load_row(base + 18 * step, step));
    let e4 = at(load_row(base + 24 * step, step));
    let e5 = at(load_row(base + 30 * step, step));
    let c0 = at(array<vec4<f32>, 6>(e0[0], e1[0], e2[0], e3[0], e4[0], e5[0]));
    let c1 = at(array<vec4<f32>, 6>(e0[1], e1[1], e2[1], e3[1], e4[1], e5[1]));
    let c2 = at(array<vec4<f32>, 6>(e0[2], e1[2], e2[2], e3[2], e4[2], e5[2]));
    let c3 = at(array<vec4<f32>, 6>(e0[3], e1[3], e2[3], e3[3], e4[3], e5[3]));
    let oy = ty * 4;
    let ox = tx * 4;
    put(n, oc4, oy, ox, c0[0], b); put(n, oc4, oy + 1, ox, c0[1], b);
    put(n, oc4, oy + 2, ox, c0[2], b); put(n, oc4, oy + 3, ox, c0[3], b);
    put(n, oc4, oy, ox + 1, c1[0], b); put(n, oc4, oy + 1, ox + 1, c1[1], b);
    put(n, oc4, oy + 2, ox + 1, c1[2], b); put(n, oc4, oy + 3, ox + 1, c1[3], b);
    put(n, oc4, oy, ox + 2, c2[0], b); put(n, oc4, oy + 1, ox + 2, c2[1], b);
    put(n, oc4, oy + 2, ox + 2, c2[2], b); put(n, oc4, oy + 3, ox + 2, c2[3], b);
    put(n, oc4, oy, ox + 3, c3[0], b); put(n, oc4, oy + 1, ox + 3, c3[1], b);
    put(n, oc4, oy + 2, ox + 3, c3[2], b); put(n, oc4, oy + 3, ox + 3, c3[3], b);
}
