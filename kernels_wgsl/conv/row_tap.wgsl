// The padded read of one input pixel along a row, through x's NC4HW4 accessor, of the conv kernels
// that slide their taps along W (conv_slide_nc4hw4.wgsl, depthwise_nc4hw4.wgsl; included by both).

// Input pixel (n, c4, iy, col), or zeros where col is outside the row (padding).
fn tap(n: i32, c4: i32, iy: i32, col: i32, wd: i32) -> vec4<f32> {
    return select(vec4<f32>(0.0), load_x(n, c4, iy, clamp(col, 0, wd - 1)), col >= 0 && col < wd);
}
