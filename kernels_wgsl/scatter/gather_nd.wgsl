// GatherND: output row r (of indices.shape[:-1]) is the slice of data at the index tuple
// indices[r, 0..m) inside batch r / tuples_per_batch. Negative indices count from the end; a
// tuple with an index still out of range gives a slice of 0 and is reported to the host
// (report_bad, check = its position in the tuple), which raises the numpy backend's InputError
// (indices known at resize are checked by the shape function).
// params: 0 = output count, 1 = slice size, 2 = tuples per batch, 3 = data elements per batch,
// 4 = m (tuple length), 8..23 = the indexed data dims, 24..39 = their strides (m <= 16),
// 63 = status id.
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

// A bad index of the invocation's elements, reported once after its loop (a report inside the
// loop costs lavapipe time even when never made).
var<private> bad = false;
var<private> bad_check = 0u;
var<private> bad_value = 0;

fn element(i: u32) -> u32 {
    let slice = pu(1u);
    let m = pu(4u);
    let row = i / slice;
    var offset = (row / pu(2u)) * pu(3u) + i % slice;
    for (var j = 0u; j < m; j++) {
        let dim = p(8u + j);
        let raw = indices[row * m + j];
        let index = select(raw, raw + dim, raw < 0);
        if (index < 0 || index >= dim) {
            bad = true;
            bad_check = j;
            bad_value = raw;
            return 0u;
        }
        offset += u32(index) * pu(24u + j);
    }
    return data[offset];
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i < n) {
            out[i] = element(i);
        }
    }
    if (bad) {
        report_bad(bad_check, bad_value);
    }
}

{{REPORT_BAD}}
