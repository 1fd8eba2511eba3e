// The input taps and the stores of the 4 x 4 block depthwise 3x3 kernels (depthwise3x3_nc4hw4.wgsl,
// depthwise3x3s2_nc4hw4.wgsl; included by both): x's dims at params 16..20, y's at 21..25, the
// epilogue as conv/finish.wgsl. FLOAT as in those kernels.
// include: conv/finish.wgsl

// Input pixel (n, c4, iy, ix), or zeros in the padding.
fn tap(n: i32, c4: i32, iy: i32, ix: i32) -> vec4<{{FLOAT}}> {
    let inside = iy >= 0 && iy < p(18u) && ix >= 0 && ix < p(19u);
    return select(vec4<{{FLOAT}}>(0.0), load_x(n, c4, clamp(iy, 0, p(18u) - 1), clamp(ix, 0, p(19u) - 1)), inside);
}

// Bias, residual, activation and store of output pixel (n, c4, oy, ox) when it is inside.
fn put(n: i32, c4: i32, oy: i32, ox: i32, acc: vec4<{{FLOAT}}>, b: vec4<f32>) {
    if (oy < p(23u) && ox < p(24u)) {
        store_y(n, c4, oy, ox, vec4<{{FLOAT}}>(finish(n, c4, oy, ox, vec4<f32>(acc) + b)));
    }
}

fn put_row(n: i32, c4: i32, oy: i32, ox: i32, acc: array<vec4<{{FLOAT}}>, 4>, b: vec4<f32>) {
    put(n, c4, oy, ox, acc[0], b);
    put(n, c4, oy, ox + 1, acc[1], b);
    put(n, c4, oy, ox + 2, acc[2], b);
    put(n, c4, oy, ox + 3, acc[3], b);
}
