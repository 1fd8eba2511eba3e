// LayerNorm / RMSNorm as layer_norm.wgsl (same params; slots 6..14 and 16..31 unused; the skip's
// from 32, layer_norm_rows.wgsl), for rows of a
// multiple of 4 elements whose scale and bias are contiguous vectors along them (the usual (D,)
// case): every row, scale and bias access is a vec4, a quarter of the loads (on lavapipe each
// load is a loop over the SIMD lanes, whatever its width).
// include: norm/layer_norm_rows.wgsl
// include: norm/shifted_mean.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = linear_id(gid, nwg, WG);
    if (row >= pu(0u)) {
        return;
    }
    let size = pu(1u);
    let quads = size / 4u;
    let base = row * quads;
    let skip_base = skip_row(row);
    var mean = ShiftedMean(0.0, 0.0);
    if (p(15u) == 0) {
        // Sums of x - shift (the row's first element), as layer_norm.wgsl.
        let shift = row_vec4(base, skip_base, 0u).x;
        var sum = vec4<f32>();
        for (var s = 0u; s < quads; s++) {
            sum += row_vec4(base, skip_base, s) - shift;
        }
        mean = ShiftedMean(shift, (sum.x + sum.y + sum.z + sum.w) / f32(size));
    }
    var sq = vec4<f32>();
    for (var s = 0u; s < quads; s++) {
        let d = centred4(row_vec4(base, skip_base, s), mean);
        sq += d * d;
    }
    let inv_std = 1.0 / sqrt((sq.x + sq.y + sq.z + sq.w) / f32(size) + pf(2u));
    let has_bias = p(3u) != 0;
    for (var s = 0u; s < quads; s++) {
        var v = centred4(row_vec4(base, skip_base, s), mean) * inv_std * scale[s];
        if (has_bias) {
            v += bias[s];
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
