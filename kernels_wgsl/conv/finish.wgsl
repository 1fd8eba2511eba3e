// The end of an NC4HW4 conv kernel's output slice, shared by the kernels whose params follow
// conv_nc4hw4.wgsl (13 alpha, 14 beta, 15 has residual; r's accessor): the sums v (bias added)
// plus the residual at output pixel (n, oc4, oy, ox) where there is one, then the activation.
// include: conv/activation.wgsl

fn finish(n: i32, oc4: i32, oy: i32, ox: i32, v: vec4<f32>) -> vec4<f32> {
    var s = v;
    if (p(15u) != 0) {
        s += vec4<f32>(load_r(n, oc4, oy, ox));
    }
    return act4(s, pf(13u), pf(14u));
}
