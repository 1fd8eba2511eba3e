// y = cond ? a : b with three-way broadcasting (rank <= 6).
// params: 0 = element count, 8..13 = output shape, 16.. cond strides, 24.. a strides, 32.. b strides.
@group(0) @binding(0) var<storage, read_write> cond: array<u32>;
@group(0) @binding(1) var<storage, read_write> a: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(4) var<uniform> params: Params;
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
        let pick = cond[strided_offset(i, 8u, 16u)] != 0u;
        y[i] = select(b[strided_offset(i, 8u, 32u)], a[strided_offset(i, 8u, 24u)], pick);
    }
}
