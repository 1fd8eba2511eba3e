// The fused activation (conv/activation.wgsl) and the input tap of the literal-weight stem kernels
// (conv_stem_nc4hw4.wgsl, conv_stem_maxpool_nc4hw4.wgsl; included by both): x is read through its
// NC4HW4 accessor, params 16..20 its dims. FLOAT as in those kernels.
// include: conv/activation.wgsl

// Input pixel (n, c4, iy, col), zeros outside the image (padding); `row` says iy is inside.
fn tap(n: i32, c4: i32, iy: i32, col: i32, row: bool) -> vec4<{{FLOAT}}> {
    let wd = p(19u);
    let inside = row && col >= 0 && col < wd;
    return select(vec4<{{FLOAT}}>(0.0), load_x(n, c4, clamp(iy, 0, p(18u) - 1), clamp(col, 0, wd - 1)), inside);
}
