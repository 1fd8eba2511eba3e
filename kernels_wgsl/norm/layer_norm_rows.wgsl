// The operands of the LayerNorm kernels over rows of whole vec4s (included by layer_norm_vec4.wgsl
// and layer_norm_workgroup.wgsl): X, scale, bias, Y, the statistics outputs and the optional skip,
// added to X as its rows load (params 46 set; 32..37 X's leading shape and 40..45 the skip's
// strides over it, in elements, so broadcasting skips cost nothing).
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> scale: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> inv_std_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> skip: array<vec4<f32>>;
@group(0) @binding(7) var<uniform> params: Params;

// Where row `row` of the skip starts, in vec4s.
fn skip_row(row: u32) -> u32 {
    return u32(strided_offset(row, 32u, 40u)) / 4u;
}

// vec4 s of the row starting at vec4 `base` (its skip row at `skip_base`): X's, plus the skip's.
fn row_vec4(base: u32, skip_base: u32, s: u32) -> vec4<f32> {
    if (p(46u) != 0) {
        return x[base + s] + skip[skip_base + s];
    }
    return x[base + s];
}
