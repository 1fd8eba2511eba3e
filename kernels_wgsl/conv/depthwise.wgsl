// Conv with one input channel per group (depthwise, channel multiplier mg = C_out / C_in), 1-D to
// 3-D as D x H x W: x NCDHW, w (C_out, 1, kD, kH, kW), optional bias, fused activation {{ACT}}.
// Each invocation computes one output channel's row segment of p(6) pixels along W, 4 at a
// time: the index arithmetic (integer divisions, slow on lavapipe) is paid once per segment.
// Where the W stride equals the W dilation (3x3 stride 1), each W tap reuses the previous tap's
// 4 columns shifted by one and loads one new column (~25% faster on lavapipe).
// params: 0 = invocations, 2 = C_in, 3 = C_out, 5 = output channels per group, 6 = segment length
// (a multiple of 4), 7 = segments per row, 8..10 = input D H W, 12..14 = output D H W,
// 16..18 = kernel D H W, 20..22 = strides, 24..26 = dilations, 28..30 = pads (begin),
// 32 = has bias, 33 = alpha, 34 = beta (f32 bits),
// 35 = has residual (res, of y's shape, added before the activation).
override WG: u32 = 64u;

// include: conv/conv_linear_io.wgsl
// include: conv/activation.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = linear_id(gid, nwg, WG);
    if (index >= pu(0u)) {
        return;
    }
    let cin = p(2u); let cout = p(3u);
    let d = p(8u); let h = p(9u); let wd = p(10u);
    let od = p(12u); let oh = p(13u); let ow = p(14u);
    let kd = p(16u); let kh = p(17u); let kw = p(18u);
    var rest = i32(index);
    let start = (rest % p(7u)) * p(6u); rest /= p(7u);
    let oy = rest % oh; rest /= oh;
    let oz = rest % od; rest /= od;
    let oc = rest % cout;
    let n = rest / cout;

    let xbase = (n * cin + oc / p(5u)) * d * h * wd;
    let wbase = oc * kd * kh * kw;
    let sx = p(22u);
    let dx = p(26u);
    let slide = sx == dx;
    var b = 0.0;
    if (p(32u) != 0) {
        b = bias[oc];
    }
    let alpha = pf(33u);
    let beta = pf(34u);
    let out = (n * cout + oc) * od * oh * ow + (oz * oh + oy) * ow;
    let stop = min(start + p(6u), ow);
    for (var ox0 = start; ox0 < stop; ox0 += 4) {
        let x0 = vec4<i32>(ox0 * sx - p(30u)) + vec4<i32>(0, 1, 2, 3) * sx;
        var acc = vec4<f32>(0.0);
        var wi = wbase;
        for (var tz = 0; tz < kd; tz++) {
            let iz = oz * p(20u) - p(28u) + tz * p(24u);
            for (var ty = 0; ty < kh; ty++) {
                let iy = oy * p(21u) - p(29u) + ty * p(25u);
                if (iz < 0 || iz >= d || iy < 0 || iy >= h) {
                    wi += kw;
                    continue;
                }
                let row = xbase + (iz * h + iy) * wd;
                if (slide) {
                    // W stride == W dilation: the next tap's columns are these shifted by one.
                    var xv = vec4<f32>(load(row, x0.x, wd), load(row, x0.y, wd), load(row, x0.z, wd), load(row, x0.w, wd));
                    for (var tx = 0; tx < kw; tx++) {
                        acc += xv * w[wi];
                        xv = vec4<f32>(xv.yzw, load(row, x0.x + (4 + tx) * sx, wd));
                        wi += 1;
                    }
                    continue;
                }
                for (var tx = 0; tx < kw; tx++) {
                    let ix = x0 + vec4<i32>(tx * dx);
                    let xi = columns(row, ix, wd);
                    acc += select(vec4<f32>(0.0), vec4<f32>(x[xi.x], x[xi.y], x[xi.z], x[xi.w]), inside(ix, wd)) * w[wi];
                    wi += 1;
                }
            }
        }
        for (var k = 0; k < min(stop - ox0, 4); k++) {
            var v = acc[k] + b;
            if (p(35u) != 0) {
                v += res[out + ox0 + k];
            }
            y[out + ox0 + k] = act(v, alpha, beta);
        }
    }
}
