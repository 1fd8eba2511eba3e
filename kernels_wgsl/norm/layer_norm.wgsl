// LayerNorm: one invocation per normalized row of D elements: mean, variance of the centred
// values (two passes, as the numpy backend: norm/row_moments.wgsl), then
// y = (x - mean) * inv_std * scale + bias, and the row's Mean / InvStdDev when those outputs exist.
// RMSNorm (flag 15) skips the mean pass: the mean is 0, so the "variance" is the mean square.
// Scale and bias broadcast over the normalized axes: with one (merged) axis their offset is
// d * stride, otherwise the strided offset over the rank-6 normalized shape. Absent bias /
// statistics outputs are bound to a stand-in tensor and never touched (flags), so one pipeline
// serves every combination.
// params: 0 rows, 1 D, 2 epsilon, 3 has bias, 4 write mean, 5 write inv_std, 6 one-axis flag,
// 7 scale stride, 8..13 normalized shape, 14 bias stride, 15 RMSNorm, 16.. scale strides,
// 24.. bias strides.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> inv_std_out: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;
// include: norm/row_moments.wgsl
override WG: u32 = 64u;

fn param_offsets(d: u32) -> vec2<i32> {
    if (p(6u) != 0) {
        return vec2<i32>(i32(d)) * vec2<i32>(p(7u), p(14u));
    }
    return vec2<i32>(strided_offset(d, 8u, 16u), strided_offset(d, 8u, 24u));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = linear_id(gid, nwg, WG);
    if (row >= pu(0u)) {
        return;
    }
    let size = pu(1u);
    let base = row * size;
    var mean = ShiftedMean(0.0, 0.0);
    if (p(15u) == 0) {
        mean = row_mean(base, size);
    }
    let inv_std = 1.0 / sqrt(row_variance(base, size, mean) + pf(2u));
    let has_bias = p(3u) != 0;
    for (var s = 0u; s < size; s++) {
        let o = param_offsets(s);
        var v = centred(x[base + s], mean) * inv_std * scale[o.x];
        if (has_bias) {
            v += bias[o.y];
        }
        y[base + s] = v;
    }
    if (p(4u) != 0) {
        mean_out[row] = mean_value(mean);
    }
    if (p(5u) != 0) {
        inv_std_out[row] = inv_std;
    }
}
