// The store of the linear-layout conv kernels (conv.wgsl and conv_slide.wgsl, through
// conv_linear_block.wgsl): params 12..14 the output D H W, 32 has bias, 33 alpha, 34 beta, 35 has
// residual (res); y, bias and res their bindings; the activation conv/activation.wgsl.
// include: conv/activation.wgsl

// Bias, activation and store of 4 pixels of channel oc0 + j at output offset out (of channel
// oc0); nothing for channels j >= count, only the first cols pixels (past the row's end).
fn store(acc: vec4<f32>, out: i32, oc0: i32, j: i32, count: i32, cols: i32) {
    if (j >= count) {
        return;
    }
    var b = 0.0;
    if (p(32u) != 0) {
        b = bias[oc0 + j];
    }
    let at = out + j * p(12u) * p(13u) * p(14u);
    for (var k = 0; k < min(cols, 4); k++) {
        var v = acc[k] + b;
        if (p(35u) != 0) {
            v += res[at + k];
        }
        y[at + k] = act(v, pf(33u), pf(34u));
    }
}
