// Gather along one axis with run-time indices: data viewed as (outer, axis_len, inner), output as
// (outer, count, inner). Negative indices count from the end; an index still out of range is
// reported to the host (report_bad, check 0: the host raises InputError as the numpy backend
// does) and gives zeros (its read is clamped into the data).
// ELEMENT u32 copies 32-bit elements; vec4<u32> (where the inner size is whole vec4s, the rows of
// an embedding table) copies vec4s, a quarter of the loads and stores, with sizes in vec4s.
// params: 0 = output element count, 1 = inner, 2 = count (indices), 3 = axis_len, 63 = status id.
@group(0) @binding(0) var<storage, read_write> data: array<{{ELEMENT}}>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<{{ELEMENT}}>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let inner = u32(p(1u));
    let count = u32(p(2u));
    let axis_len = p(3u);
    let base = linear_id(gid, nwg, WG) * 4u;
    // Branch-free in the loop, one report after it: a store in a branch of the loop costs
    // lavapipe ~25% of this kernel's time even when the branch is never taken.
    var bad = false;
    var bad_value = 0;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            break;
        }
        let x = i % inner;
        let j = (i / inner) % count;
        let o = i / (inner * count);
        let raw = indices[j];
        let index = select(raw, raw + axis_len, raw < 0);
        let ok = index >= 0 && index < axis_len;
        let safe = u32(clamp(index, 0, max(axis_len - 1, 0)));
        out[i] = select({{ELEMENT}}(), data[(o * u32(axis_len) + safe) * inner + x], ok);
        if (!ok) {
            bad = true;
            bad_value = raw;
        }
    }
    if (bad) {
        report_bad(0u, bad_value);
    }
}

{{REPORT_BAD}}
