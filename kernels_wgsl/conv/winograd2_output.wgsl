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
override WG: u32 = 64u;

// include: conv/finish.wgsl

// Bias, residual, activation and store of output pixel (n, oc4, oy, ox) when it is inside.
fn put(n: i32, oc4: i32, oy: i32, ox: i32, acc: vec4<f32>, b: vec4<f32>) {
    if (oy < p(23u) && ox < p(24u)) {
        store_y(n, oc4, oy, ox, finish(n, oc4, oy, ox, acc + b));
    }
}

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
    let tw = p(1u); let th = p(2u); let c4s = p(22u);
    var rest = index;
    let tx = rest % tw; rest /= tw;
    let ty = rest % th; rest /= th;
    let oc4 = rest % c4s;
    let n = rest / c4s;
    let tiles = p(3u);
    let base = oc4 * tiles + (n * th + ty) * tw + tx;
    let step = p(4u) * tiles;  // from one position to the next
    var b = vec4<f32>(0.0);
    if (p(12u) != 0) {
        b = bias[oc4];
    }
    // Rows along W first, then each column along H; constant indices only (registers).
    let e0 = at(load_row(base, step));
    let e1 = at(load_row(base + 4 * step, step));
    let e2 = at(load_row(base + 8 * step, step));
    let e3 = at(load_row(base + 12 * step, step));
    let c0 = at(array<vec4<f32>, 4>(e0[0], e1[0], e2[0], e3[0]));
    let c1 = at(array<vec4<f32>, 4>(e0[1], e1[1], e2[1], e3[1]));
    let oy = ty * 2;
    let ox = tx * 2;
    put(n, oc4, oy, ox, c0[0], b); put(n, oc4, oy + 1, ox, c0[1], b);
    put(n, oc4, oy, ox + 1, c1[0], b); put(n, oc4, oy + 1, ox + 1, c1[1], b);
}
