// GroupNorm and InstanceNorm as group_norm_workgroup.wgsl (same params) with one invocation per
// (n, group) row, for spatial sizes that are whole vec4s (so every channel of a row starts on one):
// X and Y are read and written a vec4 at a time, a quarter of group_norm.wgsl's loads (on lavapipe
// each load is a loop over the SIMD lanes, whatever its width). Sums of x - shift (the row's first
// element), as group_norm.wgsl's (norm/row_moments.wgsl), and the mean kept as that shift plus
// an offset (norm/shifted_mean.wgsl).
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;
// include: norm/shifted_mean.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = linear_id(gid, nwg, WG);
    if (row >= pu(0u)) {
        return;
    }
    let g = row % pu(1u);
    let channels = pu(2u);
    let quads = pu(3u) / 4u;  // vec4s per channel
    let size = channels * quads;
    let base = row * size;
    let shift = x[base].x;
    var sum = vec4<f32>();
    for (var s = 0u; s < size; s++) {
        sum += x[base + s] - shift;
    }
    let mean = ShiftedMean(shift, (sum.x + sum.y + sum.z + sum.w) / f32(4u * size));
    var sq = vec4<f32>();
    for (var s = 0u; s < size; s++) {
        let d = centred4(x[base + s], mean);
        sq += d * d;
    }
    let inv_std = 1.0 / sqrt((sq.x + sq.y + sq.z + sq.w) / f32(4u * size) + pf(4u));
    let per_group = p(5u) != 0;
    let per_element = pu(7u) != 0u;
    for (var k = 0u; k < channels; k++) {
        let param = select(g * channels + k, g, per_group);
        let a = scale[param] * inv_std;
        let bias_base = param * pu(6u);
        let start = base + k * quads;
        if (per_element) {  // InstanceNorm's (C, *spatial) bias
            for (var s = 0u; s < quads; s++) {
                let b = bias_base + 4u * s;
                y[start + s] = centred4(x[start + s], mean) * a + vec4<f32>(bias[b], bias[b + 1u], bias[b + 2u], bias[b + 3u]);
            }
        } else {
            let b = bias[bias_base];
            for (var s = 0u; s < quads; s++) {
                y[start + s] = centred4(x[start + s], mean) * a + b;
            }
        }
    }
}
