// EyeLike: ones on diagonal k (col - row == k) of a 2-D output, zeros elsewhere; computed per
// element, so a large output needs no table.
// params: 0 = element count, 1 = columns, 2 = k (clamped by the host to [-rows, cols]).
@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let cols = pu(1u);
    let k = p(2u);
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var j = 0u; j < 4u; j++) {
        let i = base + j;
        if (i < n) {
            out[i] = select({{T}}(0), {{T}}(1), i32(i % cols) - i32(i / cols) == k);
        }
    }
}
