// ConvTranspose 2-D on NC4HW4 feature maps (x, y through generated accessors, buffer or texture),
// one group or groups whose channel counts are multiples of 4, optional bias, fused activation
// {{ACT}} (a WGSL expression of v, alpha, beta, applied per lane). Output o takes tap t from input
// i where o + pad - t * dilation = i * stride (a gather: no output is written twice).
// Each invocation computes one output slice (4 output channels) x 8 output pixels along W that
// share a residue r modulo the W stride (ox = r + stride * (q0 + k)): those pixels accept the same
// W taps, from 8 consecutive input pixels, so the tap tests are done once per block, and each
// weight matrix loaded serves 8 pixels. Weights are
// repacked at prepare as the Conv kernels' (conv_nc4hw4.wgsl): vec4 over the slice's 4 output
// channels, [oc4][ky][kx][ic] with ic the group's input channel padded to whole slices; per input
// slice and tap the 4 weight vec4s form a matrix m (column j = input lane j), acc += m * x.
// params: 0 = invocations, 1 = pixel blocks per residue, 2 = output slices per group, 3 = input
// slices per group, 4..5 = kernel H W, 6..7 = strides, 8..9 = dilations, 10..11 = pads (top,
// left), 12 = has bias, 13 = alpha, 14 = beta (f32 bits), 16..20 x dims, 21..25 y dims (N, C4,
// H, W, C).
{{DECL_X}}
@group(0) @binding(1) var<storage, read_write> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/activation.wgsl

fn weights(i: i32) -> mat4x4<f32> {
    return mat4x4<f32>(w[i], w[i + 1], w[i + 2], w[i + 3]);
}

// floor(a / b) for b > 0 with non-negative integer division only (GLSL leaves negative operands
// undefined).
fn floor_div(a: i32, b: i32) -> i32 {
    if (a >= 0) {
        return a / b;
    }
    return -((b - 1 - a) / b);
}

// Bias, activation and store of output pixel (n, oc4, oy, ox) unless it is past the row's end.
fn put(n: i32, oc4: i32, oy: i32, ox: i32, acc: vec4<f32>, b: vec4<f32>) {
    if (ox < p(24u)) {
        let v = acc + b;
        let alpha = pf(13u);
        let beta = pf(14u);
        store_y(n, oc4, oy, ox, act4(v, alpha, beta));
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(18u); let wd = p(19u);
    let oc4s = p(22u); let oh = p(23u);
    let kh = p(4u); let kw = p(5u);
    let sy = p(6u); let sx = p(7u);
    var rest = index;
    let q0 = (rest % p(1u)) * 8; rest /= p(1u);
    let r = rest % sx; rest /= sx;
    let oy = rest % oh; rest /= oh;
    let oc4 = rest % oc4s;
    let n = rest / oc4s;
    let cg4 = p(3u);
    let ic0 = (oc4 / p(2u)) * cg4;  // the group's first input slice
    let lanes = vec4<i32>(0, 1, 2, 3);
    let zero = vec4<f32>(0.0);
    var a0 = zero; var a1 = zero; var a2 = zero; var a3 = zero;
    var a4 = zero; var a5 = zero; var a6 = zero; var a7 = zero;
    for (var ty = 0; ty < kh; ty++) {
        let s = oy + p(10u) - ty * p(8u);
        if (s < 0 || s % sy != 0 || s / sy >= h) {
            continue;
        }
        let iy = s / sy;
        for (var tx = 0; tx < kw; tx++) {
            // Pixel k of the block is r + sx * (q0 + k); its source is s0 / sx + k when sx divides s0.
            let s0 = r + sx * q0 + p(11u) - tx * p(9u);
            let q = floor_div(s0, sx);
            if (s0 != q * sx) {
                continue;
            }
            let ix = vec4<i32>(q) + lanes;
            let jx = ix + vec4<i32>(4);
            let inside = (ix >= vec4<i32>(0)) & (ix < vec4<i32>(wd));
            let inside2 = (jx >= vec4<i32>(0)) & (jx < vec4<i32>(wd));
            if (!any(inside) && !any(inside2)) {
                continue;
            }
            let cx = clamp(ix, vec4<i32>(0), vec4<i32>(wd - 1));
            let dx = clamp(jx, vec4<i32>(0), vec4<i32>(wd - 1));
            var wi = ((oc4 * kh + ty) * kw + tx) * cg4 * 4;
            for (var k = 0; k < cg4; k++) {
                let m = weights(wi);
                let c4 = ic0 + k;
                a0 += m * select(zero, load_x(n, c4, iy, cx.x), inside.x);
                a1 += m * select(zero, load_x(n, c4, iy, cx.y), inside.y);
                a2 += m * select(zero, load_x(n, c4, iy, cx.z), inside.z);
                a3 += m * select(zero, load_x(n, c4, iy, cx.w), inside.w);
                a4 += m * select(zero, load_x(n, c4, iy, dx.x), inside2.x);
                a5 += m * select(zero, load_x(n, c4, iy, dx.y), inside2.y);
                a6 += m * select(zero, load_x(n, c4, iy, dx.z), inside2.z);
                a7 += m * select(zero, load_x(n, c4, iy, dx.w), inside2.w);
                wi += 4;
            }
        }
    }
    var b = zero;
    if (p(12u) != 0) {
        b = bias[oc4];
    }
    let ox0 = r + sx * q0;
    put(n, oc4, oy, ox0, a0, b);
    put(n, oc4, oy, ox0 + sx, a1, b);
    put(n, oc4, oy, ox0 + 2 * sx, a2, b);
    put(n, oc4, oy, ox0 + 3 * sx, a3, b);
    put(n, oc4, oy, ox0 + 4 * sx, a4, b);
    put(n, oc4, oy, ox0 + 5 * sx, a5, b);
    put(n, oc4, oy, ox0 + 6 * sx, a6, b);
    put(n, oc4, oy, ox0 + 7 * sx, a7, b);
}
