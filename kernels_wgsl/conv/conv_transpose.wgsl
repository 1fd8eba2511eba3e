// ConvTranspose as a gather, 1-D/2-D/3-D as D x H x W: x NCDHW, w (C_in, C_out / group, kD, kH, kW)
// as stored, y NCDHW, optional bias, fused activation {{ACT}}. Output o takes tap t from input i
// where o + pad - t * dilation = i * stride.
// Each invocation computes 4 output channels of one group x 4 output pixels along W that share a
// residue r modulo the W stride (ox = r + stride * (q0 + k)): those pixels accept the same W taps,
// from 4 consecutive input pixels, so the tap test is done once per block.
// params: 0 = invocations, 2 = C_in, 3 = C_out, 4 = input channels per group, 5 = output channels
// per group, 6 = channel blocks per group, 7 = pixel blocks per residue, 8..10 = input D H W,
// 12..14 = output D H W, 16..18 = kernel D H W, 20..22 = strides, 24..26 = dilations,
// 28..30 = pads (begin), 32 = has bias, 33 = alpha, 34 = beta (f32 bits).
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/activation.wgsl

// floor(a / b) for b > 0 with non-negative integer division only (GLSL leaves negative operands
// undefined).
fn floor_div(a: i32, b: i32) -> i32 {
    if (a >= 0) {
        return a / b;
    }
    return -((b - 1 - a) / b);
}

// Input index along an axis for output o and tap t, or -1 when the tap does not land on an input.
fn source(o: i32, t: i32, stride: i32, dilation: i32, pad: i32, size: i32) -> i32 {
    let s = o + pad - t * dilation;
    if (s < 0 || s % stride != 0 || s / stride >= size) {
        return -1;
    }
    return s / stride;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = linear_id(gid, nwg, WG);
    if (index >= pu(0u)) {
        return;
    }
    let cin = p(2u); let cout = p(3u); let cg = p(4u); let mg = p(5u);
    let d = p(8u); let h = p(9u); let wd = p(10u);
    let od = p(12u); let oh = p(13u); let ow = p(14u);
    let kd = p(16u); let kh = p(17u); let kw = p(18u);
    let sx = p(22u);
    var rest = i32(index);
    let q0 = (rest % p(7u)) * 4; rest /= p(7u);
    let r = rest % sx; rest /= sx;
    let oy = rest % oh; rest /= oh;
    let oz = rest % od; rest /= od;
    let blocks = p(6u);
    let g = (rest % (blocks * (cout / mg))) / blocks;
    let m0 = (rest % blocks) * 4;
    let n = rest / (blocks * (cout / mg));

    let taps = kd * kh * kw;
    let plane = d * h * wd;
    let cstride = mg * taps;  // weight step from one input channel to the next
    let wbase = (g * cg * mg + m0) * taps;
    let w1 = min(1, mg - 1 - m0) * taps;
    let w2 = min(2, mg - 1 - m0) * taps;
    let w3 = min(3, mg - 1 - m0) * taps;
    let xbase = (n * cin + g * cg) * plane;
    let lanes = vec4<i32>(0, 1, 2, 3);

    var a0 = vec4<f32>(0.0); var a1 = vec4<f32>(0.0); var a2 = vec4<f32>(0.0); var a3 = vec4<f32>(0.0);
    for (var tz = 0; tz < kd; tz++) {
        let iz = source(oz, tz, p(20u), p(24u), p(28u), d);
        if (iz < 0) {
            continue;
        }
        for (var ty = 0; ty < kh; ty++) {
            let iy = source(oy, ty, p(21u), p(25u), p(29u), h);
            if (iy < 0) {
                continue;
            }
            let row = xbase + (iz * h + iy) * wd;
            for (var tx = 0; tx < kw; tx++) {
                // Pixel k of the block is r + sx * (q0 + k); its source is s0 / sx + k when sx divides s0.
                let s0 = r + sx * q0 + p(30u) - tx * p(26u);
                let q = floor_div(s0, sx);
                if (s0 != q * sx) {
                    continue;
                }
                let ix = vec4<i32>(q) + lanes;
                let inside = (ix >= vec4<i32>(0)) & (ix < vec4<i32>(wd));
                if (!any(inside)) {
                    continue;
                }
                let xi = vec4<i32>(row) + clamp(ix, vec4<i32>(0), vec4<i32>(wd - 1));
                var xo = 0;
                var wi = wbase + (tz * kh + ty) * kw + tx;
                for (var c = 0; c < cg; c++) {
                    let xv = select(vec4<f32>(0.0), vec4<f32>(x[xi.x + xo], x[xi.y + xo], x[xi.z + xo], x[xi.w + xo]),
                                    inside);
                    a0 += xv * w[wi];
                    a1 += xv * w[wi + w1];
                    a2 += xv * w[wi + w2];
                    a3 += xv * w[wi + w3];
                    xo += plane;
                    wi += cstride;
                }
            }
        }
    }

    let oc0 = g * mg + m0;
    let out = (n * cout + oc0) * od * oh * ow + (oz * oh + oy) * ow + r + sx * q0;
    store(a0, out, 0, oc0, mg - m0, r + sx * q0);
    store(a1, out, 1, oc0, mg - m0, r + sx * q0);
    store(a2, out, 2, oc0, mg - m0, r + sx * q0);
    store(a3, out, 3, oc0, mg - m0, r + sx * q0);
}

// Bias, activation and store of channel j of a block at output offset out (first pixel at column
// ox0, the others sx apart); channels >= left are past the group's end.
fn store(acc: vec4<f32>, out: i32, j: i32, oc0: i32, left: i32, ox0: i32) {
    if (j >= left) {
        return;
    }
    var b = 0.0;
    if (p(32u) != 0) {
        b = bias[oc0 + j];
    }
    let at = out + j * p(12u) * p(13u) * p(14u);
    let sx = p(22u);
    for (var k = 0; k < 4; k++) {
        if (ox0 + k * sx < p(14u)) {
            y[at + k * sx] = act(acc[k] + b, pf(33u), pf(34u));
        }
    }
}
