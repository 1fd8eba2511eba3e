// Conv where the W stride equals the W dilation (e.g. 3x3 stride 1; used for kernels wider than 1):
// then the 8 output pixels of a block read, for W tap t, input columns base + (k + t) * stride,
// k = 0..7, so moving to the next tap shifts the 8 loaded values by one and loads one new column.
// Otherwise as conv.wgsl: 1-D/2-D/3-D as D x H x W, x NCDHW, w OIDHW as stored, optional bias,
// fused activation {{ACT}}; 8 output channels x 8 pixels along W per invocation (a*: pixels
// 0-3, b*: 4-7); per input channel and W tap about 1 x load + 8 w loads for 64 FMAs.
// params: as conv.wgsl.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> res: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/conv_linear_store.wgsl

// x[row + col], or 0 where col is outside the row (padding).
fn load(row: i32, col: i32, wd: i32) -> f32 {
    return select(0.0, x[row + clamp(col, 0, wd - 1)], col >= 0 && col < wd);
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
    var rest = i32(index);
    let ox0 = (rest % p(7u)) * 8; rest /= p(7u);
    let oy = rest % oh; rest /= oh;
    let oz = rest % od; rest /= od;
    let blocks = p(6u);
    let g = (rest % (blocks * (cout / mg))) / blocks;
    let m0 = (rest % blocks) * 8;
    let n = rest / (blocks * (cout / mg));

    let taps = kd * kh * kw;
    let plane = d * h * wd;
    // Channels past the group's end reuse the last one's weights (their results are not stored).
    let wstride = cg * taps;
    let wbase = (g * mg + m0) * wstride;
    let w1 = min(1, mg - 1 - m0) * wstride;
    let w2 = min(2, mg - 1 - m0) * wstride;
    let w3 = min(3, mg - 1 - m0) * wstride;
    let w4 = min(4, mg - 1 - m0) * wstride;
    let w5 = min(5, mg - 1 - m0) * wstride;
    let w6 = min(6, mg - 1 - m0) * wstride;
    let w7 = min(7, mg - 1 - m0) * wstride;
    let xbase = (n * cin + g * cg) * plane;
    let sx = p(22u);
    let c0 = ox0 * sx - p(30u);  // input column of pixel 0 at tap 0

    var a0 = vec4<f32>(0.0); var a1 = vec4<f32>(0.0); var a2 = vec4<f32>(0.0); var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0); var a5 = vec4<f32>(0.0); var a6 = vec4<f32>(0.0); var a7 = vec4<f32>(0.0);
    var b0 = vec4<f32>(0.0); var b1 = vec4<f32>(0.0); var b2 = vec4<f32>(0.0); var b3 = vec4<f32>(0.0);
    var b4 = vec4<f32>(0.0); var b5 = vec4<f32>(0.0); var b6 = vec4<f32>(0.0); var b7 = vec4<f32>(0.0);
    for (var tz = 0; tz < kd; tz++) {
        let iz = oz * p(20u) - p(28u) + tz * p(24u);
        if (iz < 0 || iz >= d) {
            continue;
        }
        for (var ty = 0; ty < kh; ty++) {
            let iy = oy * p(21u) - p(29u) + ty * p(25u);
            if (iy < 0 || iy >= h) {
                continue;
            }
            var row = xbase + (iz * h + iy) * wd;
            var wrow = wbase + (tz * kh + ty) * kw;
            for (var c = 0; c < cg; c++) {
                var xa = vec4<f32>(load(row, c0, wd), load(row, c0 + sx, wd), load(row, c0 + 2 * sx, wd),
                                   load(row, c0 + 3 * sx, wd));
                var xb = vec4<f32>(load(row, c0 + 4 * sx, wd), load(row, c0 + 5 * sx, wd),
                                   load(row, c0 + 6 * sx, wd), load(row, c0 + 7 * sx, wd));
                for (var tx = 0; tx < kw; tx++) {
                    if (tx > 0) {
                        xa = vec4<f32>(xa.yzw, xb.x);
                        xb = vec4<f32>(xb.yzw, load(row, c0 + (7 + tx) * sx, wd));
                    }
                    let wi = wrow + tx;
                    let v0 = w[wi]; a0 += xa * v0; b0 += xb * v0;
                    let v1 = w[wi + w1]; a1 += xa * v1; b1 += xb * v1;
                    let v2 = w[wi + w2]; a2 += xa * v2; b2 += xb * v2;
                    let v3 = w[wi + w3]; a3 += xa * v3; b3 += xb * v3;
                    let v4 = w[wi + w4]; a4 += xa * v4; b4 += xb * v4;
                    let v5 = w[wi + w5]; a5 += xa * v5; b5 += xb * v5;
                    let v6 = w[wi + w6]; a6 += xa * v6; b6 += xb * v6;
                    let v7 = w[wi + w7]; a7 += xa * v7; b7 += xb * v7;
                }
                row += plane;
                wrow += taps;
            }
        }
    }

    let oc = g * mg + m0;
    let count = mg - m0;  // channels of this block inside the group
    let out = (n * cout + oc) * od * oh * ow + (oz * oh + oy) * ow + ox0;
    let cols = ow - ox0;
    store(a0, out, oc, 0, count, cols); store(b0, out + 4, oc, 0, count, cols - 4);
    store(a1, out, oc, 1, count, cols); store(b1, out + 4, oc, 1, count, cols - 4);
    store(a2, out, oc, 2, count, cols); store(b2, out + 4, oc, 2, count, cols - 4);
    store(a3, out, oc, 3, count, cols); store(b3, out + 4, oc, 3, count, cols - 4);
    store(a4, out, oc, 4, count, cols); store(b4, out + 4, oc, 4, count, cols - 4);
    store(a5, out, oc, 5, count, cols); store(b5, out + 4, oc, 5, count, cols - 4);
    store(a6, out, oc, 6, count, cols); store(b6, out + 4, oc, 6, count, cols - 4);
    store(a7, out, oc, 7, count, cols); store(b7, out + 4, oc, 7, count, cols - 4);
}
