// The bindings of the linear-layout conv kernels (conv.wgsl, conv_slide.wgsl, depthwise.wgsl;
// included by them): x, w, bias, y, the residual res and params; and their reads of an input row
// of x (from index row, wd columns), zeros in the padding: one column (load) or 4 (columns, inside).
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> res: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

// x[row + col], or 0 where col is outside the row (padding).
fn load(row: i32, col: i32, wd: i32) -> f32 {
    return select(0.0, x[row + clamp(col, 0, wd - 1)], col >= 0 && col < wd);
}

// Indices in x of 4 columns ix of the row (clamped into it), and whether each is inside it.
fn columns(row: i32, ix: vec4<i32>, wd: i32) -> vec4<i32> {
    return vec4<i32>(row) + clamp(ix, vec4<i32>(0), vec4<i32>(wd - 1));
}

fn inside(ix: vec4<i32>, wd: i32) -> vec4<bool> {
    return (ix >= vec4<i32>(0)) & (ix < vec4<i32>(wd));
}
