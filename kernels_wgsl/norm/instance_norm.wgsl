// InstanceNorm: one invocation per (n, c) row of S spatial elements: mean, then the variance of
// the centred values (two passes, as the numpy backend, for accuracy), then the normalized row.
// Sums run in 4 lanes (elements s, s+4, ...) for shorter dependency chains and smaller rounding
// (row_mean and row_variance, norm/row_moments.wgsl).
// params: 0 rows (N * C), 1 C, 2 S, 3 epsilon, 4 bias stride per channel, 5 bias stride per
// spatial element ((C,) bias: 1, 0; (C, *spatial) bias: S, 1).
// include: norm/group_norm_operands.wgsl
// include: norm/row_moments.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = linear_id(gid, nwg, WG);
    if (row >= pu(0u)) {
        return;
    }
    let c = row % pu(1u);
    let size = pu(2u);
    let base = row * size;
    let mean = row_mean(base, size);
    let inv_std = 1.0 / sqrt(row_variance(base, size, mean) + pf(3u));
    let a = scale[c] * inv_std;
    let bias_base = c * pu(4u);
    let bias_step = pu(5u);
    for (var s = 0u; s < size; s++) {
        y[base + s] = centred(x[base + s], mean) * a + bias[bias_base + s * bias_step];
    }
}
