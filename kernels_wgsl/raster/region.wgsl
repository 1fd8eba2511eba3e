// One raster region: dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides] for every
// index i of a rank-6 box (right-aligned). Elements are 32-bit words of any type.
// params: 0 = element count, 1 = src offset, 2 = dst offset, 8..13 = size, 16.. src strides,
// 24.. dst strides.
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        dst[p(2u) + strided_offset(i, 8u, 24u)] = src[p(1u) + strided_offset(i, 8u, 16u)];
    }
}
