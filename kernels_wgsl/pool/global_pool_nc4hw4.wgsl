// Global max / average pooling on NC4HW4 feature maps (generated accessors, buffer or texture):
// one invocation per (n, slice) reduces the plane, 4 pixels of a row per iteration into 4
// independent accumulators (pooled, pool/global_pool_plane.wgsl); {{COMBINE}} folds v into a (max
// or sum). The output (N, C, 1, 1) is NC4HW4 too. Pixels past the row's end read the row's last
// pixel again (harmless for max) and count as zero for the average.
// params: 0 = invocations (N * C4), 1 = divide by the plane size (average), 4..8 x dims,
// 9..13 y dims (N, C4, H, W, C).
{{DECL_X}}
{{DECL_Y}}
@group(0) @binding(2) var<uniform> params: Params;
// include: pool/global_pool_plane.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let c4s = p(5u); let h = p(6u); let wd = p(7u);
    let c4 = index % c4s;
    let n = index / c4s;
    let average = p(1u) != 0;
    store_y(n, c4, 0, 0, pooled(n, c4, h, wd, average));
}
