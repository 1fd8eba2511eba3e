// ConvTranspose 2-D on NC4HW4 feature maps with a 2x2 kernel at strides 2 (dilation 1, no pads, the
// output twice the input: a decoder's up-convolution). Every output pixel takes exactly one tap of
// one input pixel, so the op is a 1x1 conv to the 4 taps' outputs and a 2x2 depth-to-space: no tap
// tests, no wasted loads. Each invocation computes one output slice (4 channels) of the 2x2 output
// pixels of 4 input pixels along W: per input slice, the 4 pixels times the 4 taps' 4x4 weight
// matrices into 16 sums; then bias, activation {{ACT}} (a WGSL expression of v, alpha, beta, per
// lane), stores. Pixels past the row's end are computed from a clamped load and not stored.
// Weights: repacked as for conv_transpose_nc4hw4.wgsl, [output slice][ky][kx][input channel]
// -> vec4 over the slice's 4 output channels; per tap and input slice the 4 vec4s form a matrix m
// (column j = input lane j), acc += m * x.
// params: 0 = invocations, 1 = column blocks (of 4 input pixels), 2 = output slices, 3 = input
// slices, 12 = has bias, 13 = alpha, 14 = beta (f32 bits), 16..20 x dims, 21..25 y dims (N, C4, H,
// W, C).
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/activation.wgsl

fn weights(i: i32) -> mat4x4<f32> {
    return mat4x4<f32>(vec4<f32>(w[i]), vec4<f32>(w[i + 1]), vec4<f32>(w[i + 2]), vec4<f32>(w[i + 3]));
}

// Bias, activation and store of the 2x2 output pixels of input pixel (iy, ix), taps t00..t11,
// unless the input pixel is past the row's end.
fn put(n: i32, oc4: i32, iy: i32, ix: i32, t00: vec4<f32>, t01: vec4<f32>, t10: vec4<f32>, t11: vec4<f32>,
       b: vec4<f32>) {
    if (ix >= p(19u)) {
        return;
    }
    let alpha = pf(13u);
    let beta = pf(14u);
    let sums = array<vec4<f32>, 4>(t00 + b, t01 + b, t10 + b, t11 + b);
    for (var t = 0; t < 4; t++) {
        let v = sums[t];
        store_y(n, oc4, 2 * iy + t / 2, 2 * ix + t % 2,
                act4(v, alpha, beta));
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(18u);
    let last = p(19u) - 1;
    var rest = index;
    let ix = (rest % p(1u)) * 4; rest /= p(1u);
    let iy = rest % h; rest /= h;
    let oc4 = rest % p(2u);
    let n = rest / p(2u);
    let c4s = p(3u);
    let x0 = min(ix, last); let x1 = min(ix + 1, last); let x2 = min(ix + 2, last); let x3 = min(ix + 3, last);
    let zero = vec4<f32>(0.0);
    var a00 = zero; var a01 = zero; var a02 = zero; var a03 = zero;  // tap (0, 0) of the 4 pixels
    var b00 = zero; var b01 = zero; var b02 = zero; var b03 = zero;  // tap (0, 1)
    var c00 = zero; var c01 = zero; var c02 = zero; var c03 = zero;  // tap (1, 0)
    var d00 = zero; var d01 = zero; var d02 = zero; var d03 = zero;  // tap (1, 1)
    let tap_stride = c4s * 4;
    var wi = oc4 * 4 * tap_stride;
    for (var k = 0; k < c4s; k++) {
        let v0 = vec4<f32>(load_x(n, k, iy, x0));
        let v1 = vec4<f32>(load_x(n, k, iy, x1));
        let v2 = vec4<f32>(load_x(n, k, iy, x2));
        let v3 = vec4<f32>(load_x(n, k, iy, x3));
        let m0 = weights(wi);
        a00 += m0 * v0; a01 += m0 * v1; a02 += m0 * v2; a03 += m0 * v3;
        let m1 = weights(wi + tap_stride);
        b00 += m1 * v0; b01 += m1 * v1; b02 += m1 * v2; b03 += m1 * v3;
        let m2 = weights(wi + 2 * tap_stride);
        c00 += m2 * v0; c01 += m2 * v1; c02 += m2 * v2; c03 += m2 * v3;
        let m3 = weights(wi + 3 * tap_stride);
        d00 += m3 * v0; d01 += m3 * v1; d02 += m3 * v2; d03 += m3 * v3;
        wi += 4;
    }
    var b = zero;
    if (p(12u) != 0) {
        b = bias[oc4];
    }
    put(n, oc4, iy, ix, a00, b00, c00, d00, b);
    put(n, oc4, iy, ix + 1, a01, b01, c01, d01, b);
    put(n, oc4, iy, ix + 2, a02, b02, c02, d02, b);
    put(n, oc4, iy, ix + 3, a03, b03, c03, d03, b);
}
