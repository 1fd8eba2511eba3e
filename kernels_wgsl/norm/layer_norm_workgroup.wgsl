// LayerNorm / RMSNorm as layer_norm_vec4.wgsl (same params, rows of whole vec4s with contiguous
// scale and bias) with a workgroup per row, for real GPUs (a row per invocation leaves most of
// them idle and has each SIMD group read rows far apart) and for rows too long for one invocation
// on llvmpipe: invocation t takes the row's vec4s t, t + WG, ...; the sums are combined across the
// workgroup (reduce/workgroup_tree.wgsl).
// include: norm/layer_norm_rows.wgsl
// include: norm/shifted_mean.wgsl
// include: reduce/workgroup_tree.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= pu(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
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
        for (var s = local; s < quads; s += WG) {
            sum += row_vec4(base, skip_base, s) - shift;
        }
        mean = ShiftedMean(shift, workgroup_sum(local, sum.x + sum.y + sum.z + sum.w) / f32(size));
    }
    var sq = vec4<f32>();
    for (var s = local; s < quads; s += WG) {
        let d = centred4(row_vec4(base, skip_base, s), mean);
        sq += d * d;
    }
    let inv_std = 1.0 / sqrt(workgroup_sum(local, sq.x + sq.y + sq.z + sq.w) / f32(size) + pf(2u));
    let has_bias = p(3u) != 0;
    for (var s = local; s < quads; s += WG) {
        var v = centred4(row_vec4(base, skip_base, s), mean) * inv_std * scale[s];
        if (has_bias) {
            v += bias[s];
        }
        y[base + s] = v;
    }
    if (local == 0u && p(4u) != 0) {
        mean_out[row] = mean_value(mean);
    }
    if (local == 0u && p(5u) != 0) {
        inv_std_out[row] = inv_std;
    }
}
