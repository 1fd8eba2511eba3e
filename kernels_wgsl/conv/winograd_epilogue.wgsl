// The epilogue of the Winograd output transforms (winograd2_output.wgsl, winograd4_output.wgsl;
// included by both): an output slice's bias (params 12 = has bias) and the store of one output
// pixel of a tile (conv/winograd_tile.wgsl) where it is inside the output (y's dims at 21..25),
// through conv/finish.wgsl (residual, activation).
// include: conv/finish.wgsl
// include: conv/winograd_tile.wgsl

// Output slice oc4's bias, zeros without one.
fn slice_bias(oc4: i32) -> vec4<f32> {
    var b = vec4<f32>(0.0);
    if (p(12u) != 0) {
        b = bias[oc4];
    }
    return b;
}

// Bias, residual, activation and store of output pixel (oy, ox) of tile t's image and slice when
// it is inside.
fn put(t: Tile, oy: i32, ox: i32, acc: vec4<f32>, b: vec4<f32>) {
    if (oy < p(23u) && ox < p(24u)) {
        store_y(t.n, t.c4, oy, ox, finish(t.n, t.c4, oy, ox, acc + b));
    }
}
