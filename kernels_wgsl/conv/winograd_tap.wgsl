// The input tap of the Winograd input transforms (winograd2_input.wgsl, winograd4_input.wgsl;
// included by both): x is read through its NC4HW4 accessor, params 16..20 its dims.

// Input pixel (n, c4, iy, ix), or zeros in the padding.
fn tap(n: i32, c4: i32, iy: i32, ix: i32) -> vec4<f32> {
    let inside = iy >= 0 && iy < p(18u) && ix >= 0 && ix < p(19u);
    return select(vec4<f32>(0.0), load_x(n, c4, clamp(iy, 0, p(18u) - 1), clamp(ix, 0, p(19u) - 1)), inside);
}
