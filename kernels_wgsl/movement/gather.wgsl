// Gather along one axis with run-time indices: data viewed as (outer, axis_len, inner), output as
// (outer, count, inner). Negative indices count from the end; out-of-range indices give zeros
// (the numpy backend raises for them; a shader cannot).
// params: 0 = output element count, 1 = inner, 2 = count (indices), 3 = axis_len.
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let inner = u32(p(1u));
    let count = u32(p(2u));
    let axis_len = p(3u);
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        let x = i % inner;
        let j = (i / inner) % count;
        let o = i / (inner * count);
        var index = indices[j];
        if (index < 0) {
            index += axis_len;
        }
        if (index < 0 || index >= axis_len) {
            out[i] = 0u;
        } else {
            out[i] = data[(o * u32(axis_len) + u32(index)) * inner + x];
        }
    }
}
