// GroupNorm: one invocation per (n, group) row: the group's C / G channels and their S spatial
// elements lie contiguous, L = C / G * S elements. Mean, then the variance of the centred
// values (two passes, as the numpy backend), then y = (x - mean) * inv_std * scale + bias per
// channel (or per group with per_group). Sums run in 4 lanes, shifted by the row's first element
// (a row far from zero loses no precision): row_mean and row_variance, norm/row_moments.wgsl.
// params: 0 rows (N * G), 1 G, 2 channels per group, 3 S, 4 epsilon, 5 per_group.
// include: norm/group_norm_operands.wgsl
// include: norm/row_moments.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = linear_id(gid, nwg, WG);
    if (row >= pu(0u)) {
        return;
    }
    let g = row % pu(1u);
    let channels = pu(2u);
    let spatial = pu(3u);
    let size = channels * spatial;
    let base = row * size;
    let mean = row_mean(base, size);
    let inv_std = 1.0 / sqrt(row_variance(base, size, mean) + pf(4u));
    let per_group = p(5u) != 0;
    for (var k = 0u; k < channels; k++) {
        let param = select(g * channels + k, g, per_group);
        let a = scale[param] * inv_std;
        let b = bias[param];
        let start = base + k * spatial;
        for (var s = 0u; s < spatial; s++) {
            y[start + s] = centred(x[start + s], mean) * a + b;
        }
    }
}
