// GatherElements: out[i] = data[c with c[axis] = indices[i]], c the coordinates of element i of
// the indices (= output) shape. Negative indices count from the end. An index still out of range
// gives 0 and is reported to the host (report_bad, check 0), which raises the numpy backend's
// InputError (indices known at resize are checked then, by the shape function).
// params: 0 = output count, 1 = axis length, 2 = data stride of the axis, 8..13 = indices shape,
// 16..21 = data strides with 0 on the axis (rank 6, right-aligned), 63 = status id.
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let axis_len = p(1u);
    let base = linear_id(gid, nwg, WG) * 4u;
    // Branch-free in the loop, one report after it (a store in a branch costs lavapipe time
    // even when never taken).
    var bad = false;
    var bad_value = 0;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            break;
        }
        let raw = indices[i];
        let index = select(raw, raw + axis_len, raw < 0);
        let ok = index >= 0 && index < axis_len;
        let safe = clamp(index, 0, max(axis_len - 1, 0));
        out[i] = select(0u, data[strided_offset(i, 8u, 16u) + safe * p(2u)], ok);
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
