// Conv where the W stride equals the W dilation (e.g. 3x3 stride 1; used for kernels wider than 1):
// then the 8 output pixels of a block read, for W tap t, input columns base + (k + t) * stride,
// k = 0..7, so moving to the next tap shifts the 8 loaded values by one and loads one new column.
// Otherwise as conv.wgsl: 1-D/2-D/3-D as D x H x W, x NCDHW, w OIDHW as stored, optional bias,
// fused activation {{ACT}}; 8 output channels x 8 pixels along W per invocation (sums a: pixels
// 0-3, b: 4-7); per input channel and W tap about 1 x load + 8 w loads for 64 FMAs.
// params: as conv.wgsl.
override WG: u32 = 64u;

// include: conv/conv_linear_io.wgsl
// include: conv/conv_linear_block.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = linear_id(gid, nwg, WG);
    if (index >= pu(0u)) {
        return;
    }
    let d = p(8u); let h = p(9u); let wd = p(10u);
    let kd = p(16u); let kh = p(17u); let kw = p(18u);
    let o = block(index);
    let cg = p(4u); let sx = p(22u);
    let c0 = o.ox0 * sx - p(30u);  // input column of pixel 0 at tap 0

    var s: Sums;
    for (var tz = 0; tz < kd; tz++) {
        let iz = o.oz * p(20u) - p(28u) + tz * p(24u);
        if (iz < 0 || iz >= d) {
            continue;
        }
        for (var ty = 0; ty < kh; ty++) {
            let iy = o.oy * p(21u) - p(29u) + ty * p(25u);
            if (iy < 0 || iy >= h) {
                continue;
            }
            var row = o.x + (iz * h + iy) * wd;
            var wrow = o.w + (tz * kh + ty) * kw;
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
                    fma8(&s, xa, xb, wrow + tx, o);
                }
                row += o.plane;
                wrow += o.taps;
            }
        }
    }
    store_block(s, o);
}
