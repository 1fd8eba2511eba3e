// dst[i] = value (32-bit word) for every element: the fill of a raster plan (constant Pad).
// params: 0 = element count, 1 = value bits.
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i < n) {
            dst[i] = bitcast<u32>(p(1u));
        }
    }
}
