// ConvPw on NC4HW4 feature maps: a 2-D conv of one group (any kernel, strides, dilations, pads;
// bias, fused activation {{CONV_ACT}}) with at most 16 outputs and the 1x1 conv that reads it (bias,
// residual, fused activation {{ACT}}) in one pass, the conv result never leaving registers:
//   y = act(W_pw * conv_act(conv(x) + b) + b_pw + r).
// Each invocation computes every output slice of PIXELS output pixels along W: per tap and input
// slice, the PIXELS input pixels times the MID conv slices' 4x4 weight matrices into MID x PIXELS
// sums; then per pixel the conv results (bias, activation) times the pointwise matrices, one output
// slice at a time, stored. Where the W stride equals the W dilation (SLIDE), the loop runs input
// slices around W taps and each tap shifts the loaded pixels by one and loads one more column.
// MID (conv output slices, 1..4), PIXELS (1, 2, 4 or 8) and SLIDE are override constants fixed by
// the op's weights and attributes (a resize compiles nothing); constants, so the sums of slices and
// pixels past them take no registers. (backends/wgpu/conv_pw.py runs 8 pixels: on lavapipe the
// weight loads, shared by the pixels, cost more than the spills of 8 pixels' sums.)
// Weights: conv [ty][tx][input slice k][mid slice m][4 columns: input lane j] -> vec4 over m's
// channels; pointwise [output slice o][m][4 columns: mid lane j] -> vec4 over o's channels; zero
// padded. bias: the MID conv slices' biases, then the output slices' (zeros where a stage has none).
// params: 0 = invocations, 1 = column blocks (of PIXELS), 2 = has residual, 4..5 = kernel H W,
// 6..7 = strides, 8..9 = dilations, 10..11 = pads (top, left), 12..13 = conv alpha, beta,
// 14..15 = alpha, beta (f32 bits), 16..20 x dims, 21..25 y dims, 26..30 r dims (N, C4, H, W, C).
// FLOAT is the multiply type of inputs, weights and conv results: 32-bit, or 16-bit for precision
// fp16-arith (weights packed so, accessors typed so); the sums of both stages are 32-bit (each
// slice's 4 products added into them, as conv4_nc4hw4.wgsl), as are biases and activations. No
// type names in comments: the loader enables 16-bit floats wherever their name appears.
{{DECL_X}}
{{W_DECL}}
{{WP_DECL}}
@group(0) @binding(3) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(6) var<uniform> params: Params;
override WG: u32 = 64u;
override MID: i32 = 4;
override PIXELS: i32 = 8;
override SLIDE: bool = false;

fn conv_act(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{CONV_ACT}};
}

// include: conv/activation.wgsl

fn weights(i: i32) -> mat4x4<{{FLOAT}}> {
    return mat4x4<{{FLOAT}}>(vec4<{{FLOAT}}>(w[i]), vec4<{{FLOAT}}>(w[i + 1]), vec4<{{FLOAT}}>(w[i + 2]),
                             vec4<{{FLOAT}}>(w[i + 3]));
}

fn pointwise(i: i32) -> mat4x4<{{FLOAT}}> {
    return mat4x4<{{FLOAT}}>(vec4<{{FLOAT}}>(wp[i]), vec4<{{FLOAT}}>(wp[i + 1]), vec4<{{FLOAT}}>(wp[i + 2]),
                             vec4<{{FLOAT}}>(wp[i + 3]));
}

// acc (one slice's sums of the pixels) plus m times the pixels xs (those past PIXELS untouched).
fn mac(acc: array<vec4<f32>, 8>, m: mat4x4<{{FLOAT}}>, xs: array<vec4<{{FLOAT}}>, 8>) -> array<vec4<f32>, 8> {
    var out = acc;
    out[0] += vec4<f32>(m * xs[0]);
    if (PIXELS > 1) { out[1] += vec4<f32>(m * xs[1]); }
    if (PIXELS > 2) { out[2] += vec4<f32>(m * xs[2]); out[3] += vec4<f32>(m * xs[3]); }
    if (PIXELS > 4) {
        out[4] += vec4<f32>(m * xs[4]); out[5] += vec4<f32>(m * xs[5]);
        out[6] += vec4<f32>(m * xs[6]); out[7] += vec4<f32>(m * xs[7]);
    }
    return out;
}

// The sums of the MID conv slices (those past MID are never touched).
struct Sums {
    s0: array<vec4<f32>, 8>,
    s1: array<vec4<f32>, 8>,
    s2: array<vec4<f32>, 8>,
    s3: array<vec4<f32>, 8>,
}

// One input slice's pixels xs times the MID weight matrices from wi.
fn accumulate(sums: Sums, wi: i32, xs: array<vec4<{{FLOAT}}>, 8>) -> Sums {
    var out = sums;
    out.s0 = mac(out.s0, weights(wi), xs);
    if (MID > 1) { out.s1 = mac(out.s1, weights(wi + 4), xs); }
    if (MID > 2) { out.s2 = mac(out.s2, weights(wi + 8), xs); }
    if (MID > 3) { out.s3 = mac(out.s3, weights(wi + 12), xs); }
    return out;
}

// Input pixel (n, k, iy, col), or zeros where col is outside the row (padding).
fn tap(n: i32, k: i32, iy: i32, col: i32) -> vec4<{{FLOAT}}> {
    let wd = p(19u);
    return select(vec4<{{FLOAT}}>(0.0), load_x(n, k, iy, clamp(col, 0, wd - 1)), col >= 0 && col < wd);
}

// The PIXELS input pixels from column c, sx apart.
fn row(n: i32, k: i32, iy: i32, c: i32, sx: i32) -> array<vec4<{{FLOAT}}>, 8> {
    let zero = vec4<{{FLOAT}}>(0.0);
    var xs = array<vec4<{{FLOAT}}>, 8>(tap(n, k, iy, c), zero, zero, zero, zero, zero, zero, zero);
    if (PIXELS > 1) { xs[1] = tap(n, k, iy, c + sx); }
    if (PIXELS > 2) { xs[2] = tap(n, k, iy, c + 2 * sx); xs[3] = tap(n, k, iy, c + 3 * sx); }
    if (PIXELS > 4) {
        xs[4] = tap(n, k, iy, c + 4 * sx); xs[5] = tap(n, k, iy, c + 5 * sx);
        xs[6] = tap(n, k, iy, c + 6 * sx); xs[7] = tap(n, k, iy, c + 7 * sx);
    }
    return xs;
}

// The conv results of slice m (bias, activation) from its sums.
fn finish(m: i32, acc: array<vec4<f32>, 8>) -> array<vec4<{{FLOAT}}>, 8> {
    let b = bias[m];
    let alpha = pf(12u);
    let beta = pf(13u);
    var out: array<vec4<{{FLOAT}}>, 8>;
    for (var i = 0; i < PIXELS; i++) {
        let v = acc[i] + b;
        out[i] = vec4<{{FLOAT}}>(vec4<f32>(conv_act(v.x, alpha, beta), conv_act(v.y, alpha, beta),
                                           conv_act(v.z, alpha, beta), conv_act(v.w, alpha, beta)));
    }
    return out;
}

// Bias, residual, activation and store of output slice o's pixel (n, o, oy, ox) unless it is past
// the row's end.
fn put(n: i32, o: i32, oy: i32, ox: i32, acc: vec4<f32>) {
    if (ox >= p(24u)) {
        return;
    }
    var v = acc + bias[MID + o];
    if (p(2u) != 0) {
        v += vec4<f32>(load_r(n, o, oy, ox));
    }
    let alpha = pf(14u);
    let beta = pf(15u);
    let out = act4(v, alpha, beta);
    store_y(n, o, oy, ox, vec4<{{FLOAT}}>(out));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(18u); let wd = p(19u); let c4s = p(17u);
    let oh = p(23u); let o4s = p(22u);
    let kh = p(4u); let kw = p(5u);
    // Pixel block fastest (neighbouring invocations read neighbouring input), then rows, batch.
    var rest = index;
    let ox0 = (rest % p(1u)) * PIXELS; rest /= p(1u);
    let oy = rest % oh;
    let n = rest / oh;
    let sy = p(6u); let sx = p(7u); let dy = p(8u); let dx = p(9u);
    let c0 = ox0 * sx - p(11u);  // input column of pixel 0 at W tap 0
    let ws = MID * 4;  // weight vec4s per input slice and tap
    let none = vec4<f32>(0.0);
    let empty = array<vec4<f32>, 8>(none, none, none, none, none, none, none, none);
    var sums = Sums(empty, empty, empty, empty);
    for (var ty = 0; ty < kh; ty++) {
        let iy = oy * sy - p(10u) + ty * dy;
        if (iy < 0 || iy >= h) {
            continue;
        }
        if (SLIDE) {
            // Pixel i reads column c0 + (i + tx) * sx at W tap tx.
            for (var k = 0; k < c4s; k++) {
                var xs = row(n, k, iy, c0, sx);
                var wi = (ty * kw * c4s + k) * ws;
                for (var tx = 0; tx < kw; tx++) {
                    if (tx > 0) {
                        let next = tap(n, k, iy, c0 + (PIXELS - 1 + tx) * sx);
                        if (PIXELS == 8) {
                            xs = array<vec4<{{FLOAT}}>, 8>(xs[1], xs[2], xs[3], xs[4], xs[5], xs[6], xs[7], next);
                        } else if (PIXELS == 4) {
                            xs = array<vec4<{{FLOAT}}>, 8>(xs[1], xs[2], xs[3], next, xs[4], xs[5], xs[6], xs[7]);
                        } else if (PIXELS == 2) {
                            xs = array<vec4<{{FLOAT}}>, 8>(xs[1], next, xs[2], xs[3], xs[4], xs[5], xs[6], xs[7]);
                        } else {
                            xs[0] = next;
                        }
                    }
                    sums = accumulate(sums, wi, xs);
                    wi += c4s * ws;
                }
            }
        } else {
            for (var tx = 0; tx < kw; tx++) {
                let c = c0 + tx * dx;
                var wi = (ty * kw + tx) * c4s * ws;
                for (var k = 0; k < c4s; k++) {
                    sums = accumulate(sums, wi, row(n, k, iy, c, sx));
                    wi += ws;
                }
            }
        }
    }
    let d0 = finish(0, sums.s0);
    var d1 = d0; var d2 = d0; var d3 = d0;
    if (MID > 1) { d1 = finish(1, sums.s1); }
    if (MID > 2) { d2 = finish(2, sums.s2); }
    if (MID > 3) { d3 = finish(3, sums.s3); }
    for (var o = 0; o < o4s; o++) {
        let wi = o * ws;
        var acc = empty;
        acc = mac(acc, pointwise(wi), d0);
        if (MID > 1) { acc = mac(acc, pointwise(wi + 4), d1); }
        if (MID > 2) { acc = mac(acc, pointwise(wi + 8), d2); }
        if (MID > 3) { acc = mac(acc, pointwise(wi + 12), d3); }
        put(n, o, oy, ox0, acc[0]);
        if (PIXELS > 1) { put(n, o, oy, ox0 + 1, acc[1]); }
        if (PIXELS > 2) { put(n, o, oy, ox0 + 2, acc[2]); put(n, o, oy, ox0 + 3, acc[3]); }
        if (PIXELS > 4) {
            put(n, o, oy, ox0 + 4, acc[4]); put(n, o, oy, ox0 + 5, acc[5]);
            put(n, o, oy, ox0 + 6, acc[6]); put(n, o, oy, ox0 + 7, acc[7]);
        }
    }
}
