// The epilogue of the NC4HW4 conv kernels that store one output slice at a time (conv4_nc4hw4.wgsl,
// conv_tiled_nc4hw4.wgsl, gemm1x1_nc4hw4.wgsl; included by them): bias (params 12), residual (15, r's accessor), the
// fused activation {{ACT}} (alpha 13, beta 14), y's accessor (its dims at 21..25). ACC and FLOAT
// as in those kernels.
// include: conv/finish.wgsl

// Bias, residual, activation and store of output pixel (n, oc4, oy, ox) of one slice; nothing for
// a slice past the output's.
fn store(n: i32, oc4: i32, oy: i32, ox: i32, acc: vec4<{{ACC}}>) {
    if (oc4 >= p(22u)) {
        return;
    }
    var v = vec4<f32>(acc);
    if (p(12u) != 0) {
        v += bias[oc4];
    }
    store_y(n, oc4, oy, ox, vec4<{{FLOAT}}>(finish(n, oc4, oy, ox, v)));
}
