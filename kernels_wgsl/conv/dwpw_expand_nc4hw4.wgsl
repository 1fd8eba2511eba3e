// ConvDwPwExpand on NC4HW4 feature maps: ConvDwPw (dwpw_nc4hw4.wgsl: a depthwise 3x3 conv, bias,
// activation {{DW_ACT}}, then the 1x1 project conv, bias, residual, activation {{ACT}}) and the 1x1
// expand conv reading its result (bias, activation {{EX_ACT}}) in one pass:
//   z = act(W_pw * dw_act(dw(x) + b_dw) + b_pw + r),  y = ex_act(W_ex * z + b_ex).
// Each invocation computes, as dwpw_nc4hw4.wgsl does, every project slice (at most 8) of a block of
// ROWS x COLS output pixels in registers (the block's size picked by backends/wgpu/conv_dwpw.py);
// stores them to z when the op keeps the block output (else store_z does nothing); then loops over
// the expand slices: per expand slice the 4x4 weight blocks of each project slice times that
// slice's results, bias, activation, store. The project results are computed once per pixel, and
// the block output is neither written (unless kept) nor read back. With params 2 = G > 1 expand
// groups (real GPUs, where a small map's few invocations would each loop over every expand slice),
// G neighbouring invocations share a pixel block, each computing its project results and then its
// share of the expand slices: a shorter chain per invocation for G times the depthwise and project
// work; the group 0 invocation stores z.
// Weights: depthwise [c4][ky][kx] -> vec4 over the slice's channels; wp: the project conv's
// [k][o][4 columns] (as dwpw_nc4hw4.wgsl), then from input slices x project slices x 4 on the
// expand conv's [e][o][4 columns: project lane j] -> vec4 over expand slice e's channels, zero padded.
// bias: the depthwise slices' biases, the project slices', the expand slices' (zeros where absent).
// params: 0 = invocations, 1 = column blocks (of COLS), 2 = expand groups (0: one), 3 = input slices, 4 = project slices,
// 6..7 = pads (top, left), 8..9 = depthwise alpha, beta, 10..11 = project alpha,
// beta, 12 = row blocks (of ROWS), 13 = expand slices, 14..15 = expand alpha, beta (f32 bits),
// 16..20 x dims, 21..25 y dims, 26..30 r dims, 31..35 z dims (N, C4, H, W, C).
// FLOAT is the arithmetic type of the taps, weights, products and of the project results the
// expand conv reads; sums run in ACC. Biases and activations are 32-bit.
// No type names in comments: the loader enables 16-bit floats wherever their name appears.
// include: conv/dwpw_stage.wgsl
{{DECL_X}}
{{WD_DECL}}
{{WP_DECL}}
@group(0) @binding(3) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(7) var<uniform> params: Params;
{{DECL_Z}}
override WG: u32 = 64u;
// Whether the op adds a residual: a constant, so that without one the residual loads are not
// compiled at all (on lavapipe they were a third of the expand kernel's compile time).
override RESIDUAL: bool = false;

fn act_ex(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{EX_ACT}};
}

// include: conv/activation.wgsl

// Bias, residual and activation of project slice o's pixels (the block from (oy, ox)), stored to z
// (those that exist, where `keep`) and returned for the expand conv; zeros for a slice past the
// project's.
fn project(n: i32, o: i32, oy: i32, ox: i32, acc: array<vec4<{{ACC}}>, PIXELS>,
           keep: bool) -> array<vec4<{{FLOAT}}>, PIXELS> {
    var out: array<vec4<{{FLOAT}}>, PIXELS>;
    if (o >= p(4u)) {
        return out;
    }
    let b = bias[p(3u) + o];
    let alpha = pf(10u);
    let beta = pf(11u);
    for (var i = 0; i < PIXELS; i++) {
        let y = oy + i / COLS;
        let x = ox + i % COLS;
        var v = vec4<f32>(acc[i]) + b;
        if (RESIDUAL && y < p(23u) && x < p(24u)) {
            v += vec4<f32>(load_r(n, o, y, x));
        }
        let a = vec4<{{FLOAT}}>(act4(v, alpha, beta));
        if (keep && y < p(23u) && x < p(24u)) {
            store_z(n, o, y, x, a);
        }
        out[i] = a;
    }
    return out;
}

// Bias, activation and store of expand slice e's pixels, those that exist.
fn put(n: i32, e: i32, oy: i32, ox: i32, acc: array<vec4<{{ACC}}>, PIXELS>) {
    let b = bias[p(3u) + p(4u) + e];
    let alpha = pf(14u);
    let beta = pf(15u);
    for (var i = 0; i < PIXELS; i++) {
        let y = oy + i / COLS;
        let x = ox + i % COLS;
        if (y < p(23u) && x < p(24u)) {
            let v = vec4<f32>(acc[i]) + b;
            let out = vec4<f32>(act_ex(v.x, alpha, beta), act_ex(v.y, alpha, beta), act_ex(v.z, alpha, beta),
                                act_ex(v.w, alpha, beta));
            store_y(n, e, y, x, vec4<{{FLOAT}}>(out));
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let blocks = p(1u);
    let rows = p(12u);
    let groups = max(p(2u), 1);
    let group = index % groups;
    var rest = index / groups;
    let ox = (rest % blocks) * COLS; rest /= blocks;
    let oy = (rest % rows) * ROWS;
    let n = rest / rows;
    let iy = oy * STRIDE - p(6u);
    let ix = ox * STRIDE - p(7u);
    let c4s = p(3u);
    let o4s = p(4u);
    let sums = project_sums(n, iy, ix, c4s, o4s);
    var none: array<vec4<{{ACC}}>, PIXELS>;
    let share = (p(13u) + groups - 1) / groups;
    let first = group * share;
    let last = min(first + share, p(13u));
    var wi = (c4s + first) * o4s * 4;  // the expand weights follow the project conv's
    let keep = group == 0;
    let z0 = project(n, 0, oy, ox, sums.a0, keep);
    var z1: array<vec4<{{FLOAT}}>, PIXELS>; var z2 = z1; var z3 = z1;
    var z4 = z1; var z5 = z1; var z6 = z1; var z7 = z1;
    if (has_slice(1, o4s)) { z1 = project(n, 1, oy, ox, sums.a1, keep); }
    if (has_slice(2, o4s)) { z2 = project(n, 2, oy, ox, sums.a2, keep); }
    if (has_slice(3, o4s)) { z3 = project(n, 3, oy, ox, sums.a3, keep); }
    if (has_slice(4, o4s)) { z4 = project(n, 4, oy, ox, sums.a4, keep); }
    if (has_slice(5, o4s)) { z5 = project(n, 5, oy, ox, sums.a5, keep); }
    if (has_slice(6, o4s)) { z6 = project(n, 6, oy, ox, sums.a6, keep); }
    if (has_slice(7, o4s)) { z7 = project(n, 7, oy, ox, sums.a7, keep); }
    for (var e = first; e < last; e++) {
        var s = mac(none, wi, z0);
        if (has_slice(1, o4s)) { s = mac(s, wi + 4, z1); }
        if (has_slice(2, o4s)) { s = mac(s, wi + 8, z2); }
        if (has_slice(3, o4s)) { s = mac(s, wi + 12, z3); }
        if (has_slice(4, o4s)) { s = mac(s, wi + 16, z4); }
        if (has_slice(5, o4s)) { s = mac(s, wi + 20, z5); }
        if (has_slice(6, o4s)) { s = mac(s, wi + 24, z6); }
        if (has_slice(7, o4s)) { s = mac(s, wi + 28, z7); }
        put(n, e, oy, ox, s);
        wi += o4s * 4;
    }
}
