// GroupNorm and InstanceNorm with a workgroup per (n, group) row, for real GPUs and for rows too
// long for one invocation on llvmpipe (group_norm.wgsl and instance_norm.wgsl take one invocation
// per row): the group's C / G channels and their S spatial elements lie contiguous, L = C / G * S
// elements; invocation t takes elements t, t + WG, ... for the shifted sums of the mean and the
// variance (combined across the workgroup, reduce/workgroup_tree.wgsl), then writes
// y = (x - mean) * inv_std * scale + bias channel by channel. InstanceNorm is G = C with one
// channel per group, and a bias per channel or per (channel, spatial element).
// params: 0 rows (N * G), 1 G, 2 channels per group, 3 S, 4 epsilon, 5 per_group (scale and bias
// per group), 6 bias stride per channel, 7 bias stride per spatial element.
// include: norm/group_norm_operands.wgsl
// include: reduce/workgroup_tree.wgsl
// include: norm/shifted_mean.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= pu(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let g = row % pu(1u);
    let channels = pu(2u);
    let spatial = pu(3u);
    let size = channels * spatial;
    let base = row * size;
    let shift = x[base];  // sums of x - shift: a row far from zero loses no precision
    var sum = 0.0;
    for (var e = local; e < size; e += WG) {
        sum += x[base + e] - shift;
    }
    let mean = ShiftedMean(shift, workgroup_sum(local, sum) / f32(size));
    var sq = 0.0;
    for (var e = local; e < size; e += WG) {
        let d = centred(x[base + e], mean);
        sq += d * d;
    }
    let inv_std = 1.0 / sqrt(workgroup_sum(local, sq) / f32(size) + pf(4u));
    let per_group = p(5u) != 0;
    let bias_spatial = pu(7u);
    for (var k = 0u; k < channels; k++) {
        let param = select(g * channels + k, g, per_group);
        let a = scale[param] * inv_std;
        let bias_base = param * pu(6u);
        let start = base + k * spatial;
        for (var s = local; s < spatial; s += WG) {
            y[start + s] = centred(x[start + s], mean) * a + bias[bias_base + s * bias_spatial];
        }
    }
}
