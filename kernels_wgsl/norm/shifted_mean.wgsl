// A row's mean held as shift + offset, for the kernels that centre rows (row_moments.wgsl's
// includers, group_norm_vec4, group_norm_workgroup, layer_norm_vec4, layer_norm_workgroup, mvn):
// shift is the row's first element and offset the mean of x - shift. Rounding their sum to one
// f32 would cost up to half an ulp of the row's magnitude (rows near 50: 1.9e-6, 2e-5 of a spread
// of 0.1, times the scale); centring as (x - shift) - offset keeps those digits, since x - shift
// is exact for x within a factor 2 of shift and offset is small.
struct ShiftedMean {
    shift: f32,
    offset: f32,
}

fn centred(v: f32, m: ShiftedMean) -> f32 {
    return (v - m.shift) - m.offset;
}

fn centred4(v: vec4<f32>, m: ShiftedMean) -> vec4<f32> {
    return (v - m.shift) - m.offset;
}

// The mean as one f32 (LayerNorm's Mean output).
fn mean_value(m: ShiftedMean) -> f32 {
    return m.shift + m.offset;
}
