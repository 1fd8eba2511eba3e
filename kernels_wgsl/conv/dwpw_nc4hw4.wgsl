// ConvDwPw on NC4HW4 feature maps: a depthwise 3x3 conv (dilation 1, stride 1 or 2; bias, fused
// activation {{DW_ACT}}) and the 1x1 conv that reads it (bias, residual, fused activation {{ACT}})
// in one pass, the depthwise result never leaving registers:
//   y = act(W_pw * dw_act(dw(x) + b_dw) + b_pw + r).
// Each invocation computes every output slice (at most 8: C_out <= 32) of a block of 2 x 4 output
// pixels (rows x columns). Per input slice k it computes the block's 8 depthwise results of slice
// k ({{DW}}: 4 input rows of 6 pixels at stride 1, 5 rows of 9 at stride 2), then adds W_pw[:, k]
// times them into the output sums: 4 weight vec4s (a 4x4 matrix) per output slice, shared by the 8
// pixels. Output slices past the output's are skipped by branches every invocation takes alike.
// (Measured on lavapipe: 2 x 4 blocks take 0.7-0.8x the time of 1 x 4 ones on MobileNetV2's
// blocks at 224 x 224; splitting the output slices among invocations for small images, each
// computing the depthwise results again, took 1.6x longer: the weights' index then differs
// between lanes, and uniform loads become gathers.)
// Weights: depthwise [c4][ky][kx] -> vec4 over the slice's channels (as depthwise3x3_nc4hw4.wgsl);
// pointwise [k][o][4 columns: input lane j] -> vec4 over output slice o's channels, zero padded.
// bias: the depthwise slices' biases, then the output slices' (zeros where a stage has none).
// params: 0 = invocations, 1 = column blocks (of 4), 2 = stride, 3 = input slices, 4 = output
// slices, 5 = has residual, 6..7 = pads (top, left), 8..9 = depthwise alpha, beta, 10..11 = alpha,
// beta (f32 bits), 12 = row blocks (of 2), 16..20 x dims, 21..25 y dims, 26..30 r dims (N, C4, H,
// W, C).
// FLOAT is the arithmetic type of the depthwise taps, weights and sums and of the pointwise
// products; the pointwise sums run in ACC (as in gemm1x1_nc4hw4.wgsl: 16-bit products of one
// slice, added into 32-bit sums under precision fp16-arith). Biases and activations are 32-bit.
// No type names in comments: the loader enables 16-bit floats wherever their name appears.
{{DECL_X}}
{{WD_DECL}}
{{WP_DECL}}
@group(0) @binding(3) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(6) var<uniform> params: Params;
override WG: u32 = 64u;

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

// Bias, residual, activation and store of output slice o's pixels (2 rows of 4 from (oy, ox)),
// those that exist.
fn put(n: i32, o: i32, oy: i32, ox: i32, acc: array<vec4<{{ACC}}>, 8>) {
    if (o >= p(4u)) {
        return;
    }
    let b = bias[p(3u) + o];
    let alpha = pf(10u);
    let beta = pf(11u);
    for (var i = 0; i < 8; i++) {
        let y = oy + i / 4;
        let x = ox + i % 4;
        if (y < p(23u) && x < p(24u)) {
            var v = vec4<f32>(acc[i]) + b;
            if (p(5u) != 0) {
                v += vec4<f32>(load_r(n, o, y, x));
            }
            let out = vec4<f32>(act(v.x, alpha, beta), act(v.y, alpha, beta), act(v.z, alpha, beta),
                                act(v.w, alpha, beta));
            store_y(n, o, y, x, vec4<{{FLOAT}}>(out));
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
    put(n, 0, oy, ox, a0);
    put(n, 1, oy, ox, a1);
    put(n, 2, oy, ox, a2);
    put(n, 3, oy, ox, a3);
    put(n, 4, oy, ox, a4);
    put(n, 5, oy, ox, a5);
    put(n, 6, oy, ox, a6);
    put(n, 7, oy, ox, a7);
}
