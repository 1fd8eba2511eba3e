// ConvDwPwExpand on NC4HW4 feature maps: ConvDwPw (dwpw_nc4hw4.wgsl: a depthwise 3x3 conv, bias,
// activation {{DW_ACT}}, then the 1x1 project conv, bias, residual, activation {{ACT}}) and the 1x1
// expand conv reading its result (bias, activation {{EX_ACT}}) in one pass:
//   z = act(W_pw * dw_act(dw(x) + b_dw) + b_pw + r),  y = ex_act(W_ex * z + b_ex).
// Each invocation computes, as dwpw_nc4hw4.wgsl does, every project slice (at most 8) of a block of
// 2 x 4 output pixels in registers; stores them to z when the op keeps the block output (else
// store_z does nothing); then loops over the expand slices: per expand slice the 4x4 weight blocks
// of each project slice times that slice's 8 results, bias, activation, store. The project results
// are computed once per pixel, and the block output is neither written (unless kept) nor read back.
// Weights: depthwise [c4][ky][kx] -> vec4 over the slice's channels; wp: the project conv's
// [k][o][4 columns] (as dwpw_nc4hw4.wgsl), then from input slices x project slices x 4 on the
// expand conv's [e][o][4 columns: project lane j] -> vec4 over expand slice e's channels, zero padded.
// bias: the depthwise slices' biases, the project slices', the expand slices' (zeros where absent).
// params: 0 = invocations, 1 = column blocks (of 4), 2 = stride, 3 = input slices, 4 = project
// slices, 5 = has residual, 6..7 = pads (top, left), 8..9 = depthwise alpha, beta, 10..11 = project
// alpha, beta, 12 = row blocks (of 2), 13 = expand slices, 14..15 = expand alpha, beta (f32 bits),
// 16..20 x dims, 21..25 y dims, 26..30 r dims, 31..35 z dims (N, C4, H, W, C).
// FLOAT is the arithmetic type of the taps, weights, products and of the project results the
// expand conv reads; sums run in ACC. Biases and activations are 32-bit.
// No type names in comments: the loader enables 16-bit floats wherever their name appears.
{{DECL_X}}
{{WD_DECL}}
{{WP_DECL}}
@group(0) @binding(3) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(7) var<uniform> params: Params;
{{DECL_Z}}
override WG: u32 = 64u;

fn act_ex(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{EX_ACT}};
}

fn act_dw(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{DW_ACT}};
}

fn act(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{ACT}};
}

// Input pixel (n, c4, iy, ix), or zeros in the padding.
fn tap(n: i32, c4: i32, iy: i32, ix: i32) -> vec4<{{FLOAT}}> {
    let inside = iy >= 0 && iy < p(18u) && ix >= 0 && ix < p(19u);
    return select(vec4<{{FLOAT}}>(0.0), load_x(n, c4, clamp(iy, 0, p(18u) - 1), clamp(ix, 0, p(19u) - 1)), inside);
}

fn kernel_row(i: i32) -> array<vec4<{{FLOAT}}>, 3> {
    return array<vec4<{{FLOAT}}>, 3>(vec4<{{FLOAT}}>(wd[i]), vec4<{{FLOAT}}>(wd[i + 1]), vec4<{{FLOAT}}>(wd[i + 2]));
}

// Stride 1: the 6 input pixels of a row of 4 outputs, and one kernel row applied to them.
fn row1(n: i32, c4: i32, iy: i32, ix: i32) -> array<vec4<{{FLOAT}}>, 6> {
    return array<vec4<{{FLOAT}}>, 6>(tap(n, c4, iy, ix), tap(n, c4, iy, ix + 1), tap(n, c4, iy, ix + 2),
                               tap(n, c4, iy, ix + 3), tap(n, c4, iy, ix + 4), tap(n, c4, iy, ix + 5));
}

fn mac1(acc: array<vec4<{{FLOAT}}>, 4>, x: array<vec4<{{FLOAT}}>, 6>,
        k: array<vec4<{{FLOAT}}>, 3>) -> array<vec4<{{FLOAT}}>, 4> {
    return array<vec4<{{FLOAT}}>, 4>(acc[0] + k[0] * x[0] + k[1] * x[1] + k[2] * x[2],
                               acc[1] + k[0] * x[1] + k[1] * x[2] + k[2] * x[3],
                               acc[2] + k[0] * x[2] + k[1] * x[3] + k[2] * x[4],
                               acc[3] + k[0] * x[3] + k[1] * x[4] + k[2] * x[5]);
}

// Stride 2: the 9 input pixels of a row of 4 outputs (columns 2i..2i+2 for output i).
fn row2(n: i32, c4: i32, iy: i32, ix: i32) -> array<vec4<{{FLOAT}}>, 9> {
    return array<vec4<{{FLOAT}}>, 9>(tap(n, c4, iy, ix), tap(n, c4, iy, ix + 1), tap(n, c4, iy, ix + 2),
                               tap(n, c4, iy, ix + 3), tap(n, c4, iy, ix + 4), tap(n, c4, iy, ix + 5),
                               tap(n, c4, iy, ix + 6), tap(n, c4, iy, ix + 7), tap(n, c4, iy, ix + 8));
}

fn mac2(acc: array<vec4<{{FLOAT}}>, 4>, x: array<vec4<{{FLOAT}}>, 9>,
        k: array<vec4<{{FLOAT}}>, 3>) -> array<vec4<{{FLOAT}}>, 4> {
    return array<vec4<{{FLOAT}}>, 4>(acc[0] + k[0] * x[0] + k[1] * x[1] + k[2] * x[2],
                               acc[1] + k[0] * x[2] + k[1] * x[3] + k[2] * x[4],
                               acc[2] + k[0] * x[4] + k[1] * x[5] + k[2] * x[6],
                               acc[3] + k[0] * x[6] + k[1] * x[7] + k[2] * x[8]);
}

// The depthwise stage's bias and activation on its 8 sums (2 rows of 4 pixels) of slice k.
fn finish_dw(k: i32, top: array<vec4<{{FLOAT}}>, 4>, bottom: array<vec4<{{FLOAT}}>, 4>) -> array<vec4<{{FLOAT}}>, 8> {
    let b = bias[k];
    let alpha = pf(8u);
    let beta = pf(9u);
    let a = array<vec4<{{FLOAT}}>, 8>(top[0], top[1], top[2], top[3], bottom[0], bottom[1], bottom[2], bottom[3]);
    var out: array<vec4<{{FLOAT}}>, 8>;
    for (var i = 0; i < 8; i++) {
        let v = vec4<f32>(a[i]) + b;
        out[i] = vec4<{{FLOAT}}>(vec4<f32>(act_dw(v.x, alpha, beta), act_dw(v.y, alpha, beta),
                                           act_dw(v.z, alpha, beta), act_dw(v.w, alpha, beta)));
    }
    return out;
}

// Stride 1: input rows iy..iy+3 (row j feeds output row r with kernel row j - r).
fn dw1(n: i32, k: i32, iy: i32, ix: i32) -> array<vec4<{{FLOAT}}>, 8> {
    let zero = vec4<{{FLOAT}}>(0.0);
    let none = array<vec4<{{FLOAT}}>, 4>(zero, zero, zero, zero);
    let k0 = kernel_row(k * 9);
    let k1 = kernel_row(k * 9 + 3);
    let k2 = kernel_row(k * 9 + 6);
    let x0 = row1(n, k, iy, ix);
    var top = mac1(none, x0, k0);
    let x1 = row1(n, k, iy + 1, ix);
    top = mac1(top, x1, k1);
    var bottom = mac1(none, x1, k0);
    let x2 = row1(n, k, iy + 2, ix);
    top = mac1(top, x2, k2);
    bottom = mac1(bottom, x2, k1);
    let x3 = row1(n, k, iy + 3, ix);
    bottom = mac1(bottom, x3, k2);
    return finish_dw(k, top, bottom);
}

// Stride 2: input rows iy..iy+4 (row 2r + j feeds output row r with kernel row j).
fn dw2(n: i32, k: i32, iy: i32, ix: i32) -> array<vec4<{{FLOAT}}>, 8> {
    let zero = vec4<{{FLOAT}}>(0.0);
    let none = array<vec4<{{FLOAT}}>, 4>(zero, zero, zero, zero);
    let k0 = kernel_row(k * 9);
    let k1 = kernel_row(k * 9 + 3);
    let k2 = kernel_row(k * 9 + 6);
    var top = mac2(none, row2(n, k, iy, ix), k0);
    top = mac2(top, row2(n, k, iy + 1, ix), k1);
    let x2 = row2(n, k, iy + 2, ix);
    top = mac2(top, x2, k2);
    var bottom = mac2(none, x2, k0);
    bottom = mac2(bottom, row2(n, k, iy + 3, ix), k1);
    bottom = mac2(bottom, row2(n, k, iy + 4, ix), k2);
    return finish_dw(k, top, bottom);
}

// acc (one output slice's sums of the 8 pixels) plus the 4x4 pointwise matrix at wp[i] times d.
fn mac(acc: array<vec4<{{ACC}}>, 8>, i: i32, d: array<vec4<{{FLOAT}}>, 8>) -> array<vec4<{{ACC}}>, 8> {
    let m = mat4x4<{{FLOAT}}>(vec4<{{FLOAT}}>(wp[i]), vec4<{{FLOAT}}>(wp[i + 1]), vec4<{{FLOAT}}>(wp[i + 2]),
                              vec4<{{FLOAT}}>(wp[i + 3]));
    return array<vec4<{{ACC}}>, 8>(acc[0] + vec4<{{ACC}}>(m * d[0]), acc[1] + vec4<{{ACC}}>(m * d[1]),
                                   acc[2] + vec4<{{ACC}}>(m * d[2]), acc[3] + vec4<{{ACC}}>(m * d[3]),
                                   acc[4] + vec4<{{ACC}}>(m * d[4]), acc[5] + vec4<{{ACC}}>(m * d[5]),
                                   acc[6] + vec4<{{ACC}}>(m * d[6]), acc[7] + vec4<{{ACC}}>(m * d[7]));
}

// Bias, residual and activation of project slice o's pixels (2 rows of 4 from (oy, ox)), stored to z
// (those that exist) and returned for the expand conv; zeros for a slice past the project's.
fn project(n: i32, o: i32, oy: i32, ox: i32, acc: array<vec4<{{ACC}}>, 8>) -> array<vec4<{{FLOAT}}>, 8> {
    var out: array<vec4<{{FLOAT}}>, 8>;
    if (o >= p(4u)) {
        return out;
    }
    let b = bias[p(3u) + o];
    let alpha = pf(10u);
    let beta = pf(11u);
    for (var i = 0; i < 8; i++) {
        let y = oy + i / 4;
        let x = ox + i % 4;
        var v = vec4<f32>(acc[i]) + b;
        if (p(5u) != 0 && y < p(23u) && x < p(24u)) {
            v += vec4<f32>(load_r(n, o, y, x));
        }
        let a = vec4<{{FLOAT}}>(vec4<f32>(act(v.x, alpha, beta), act(v.y, alpha, beta), act(v.z, alpha, beta),
                                          act(v.w, alpha, beta)));
        if (y < p(23u) && x < p(24u)) {
            store_z(n, o, y, x, a);
        }
        out[i] = a;
    }
    return out;
}

// Bias, activation and store of expand slice e's pixels, those that exist.
fn put(n: i32, e: i32, oy: i32, ox: i32, acc: array<vec4<{{ACC}}>, 8>) {
    let b = bias[p(3u) + p(4u) + e];
    let alpha = pf(14u);
    let beta = pf(15u);
    for (var i = 0; i < 8; i++) {
        let y = oy + i / 4;
        let x = ox + i % 4;
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
    var rest = index;
    let ox = (rest % blocks) * 4; rest /= blocks;
    let oy = (rest % rows) * 2;
    let n = rest / rows;
    let iy = oy * p(2u) - p(6u);
    let ix = ox * p(2u) - p(7u);
    let c4s = p(3u);
    let o4s = p(4u);
    let zero = vec4<{{ACC}}>(0.0);
    let none = array<vec4<{{ACC}}>, 8>(zero, zero, zero, zero, zero, zero, zero, zero);
    var a0 = none; var a1 = none; var a2 = none; var a3 = none;
    var a4 = none; var a5 = none; var a6 = none; var a7 = none;
    var wi = 0;
    for (var k = 0; k < c4s; k++) {
        let d = {{DW}}(n, k, iy, ix);
        a0 = mac(a0, wi, d);
        if (o4s > 1) { a1 = mac(a1, wi + 4, d); }
        if (o4s > 2) { a2 = mac(a2, wi + 8, d); }
        if (o4s > 3) { a3 = mac(a3, wi + 12, d); }
        if (o4s > 4) { a4 = mac(a4, wi + 16, d); }
        if (o4s > 5) { a5 = mac(a5, wi + 20, d); }
        if (o4s > 6) { a6 = mac(a6, wi + 24, d); }
        if (o4s > 7) { a7 = mac(a7, wi + 28, d); }
        wi += o4s * 4;
    }
    let z0 = project(n, 0, oy, ox, a0);
    let z1 = project(n, 1, oy, ox, a1);
    let z2 = project(n, 2, oy, ox, a2);
    let z3 = project(n, 3, oy, ox, a3);
    let z4 = project(n, 4, oy, ox, a4);
    let z5 = project(n, 5, oy, ox, a5);
    let z6 = project(n, 6, oy, ox, a6);
    let z7 = project(n, 7, oy, ox, a7);
    // wi now points at the expand weights (past the project conv's c4s x o4s x 4).
    for (var e = 0; e < p(13u); e++) {
        var s = mac(none, wi, z0);
        if (o4s > 1) { s = mac(s, wi + 4, z1); }
        if (o4s > 2) { s = mac(s, wi + 8, z2); }
        if (o4s > 3) { s = mac(s, wi + 12, z3); }
        if (o4s > 4) { s = mac(s, wi + 16, z4); }
        if (o4s > 5) { s = mac(s, wi + 20, z5); }
        if (o4s > 6) { s = mac(s, wi + 24, z6); }
        if (o4s > 7) { s = mac(s, wi + 28, z7); }
        put(n, e, oy, ox, s);
        wi += o4s * 4;
    }
}
