// ScatterND into out (already a copy of data): invocation i handles position s = i % slice of
// every slice addressed by the tuples of its group (i / slice), in index order. Different
// positions never collide, and one invocation walks all tuples that may share a target (all of
// them unless the host proved the targets distinct), so repeated indices resolve as on the CPU
// with no atomics. {{COMBINE}} merges the current value a with the update u. Negative indices
// count from the end; a tuple with an index still out of range is skipped and reported to the
// host (report_bad, check = its position in the tuple), which raises the numpy backend's
// InputError (known indices are checked at resize).
// params: 0 = invocations, 1 = slice size, 2 = tuple count, 3 = tuples per invocation,
// 4 = m (tuple length), 8..23 = the indexed data dims, 24..39 = their strides (m <= 16),
// 63 = status id.
@group(0) @binding(0) var<storage, read_write> indices: array<i32>;
@group(0) @binding(1) var<storage, read_write> updates: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg, WG);
    if (i >= pu(0u)) {
        return;
    }
    let slice = pu(1u);
    let m = pu(4u);
    let s = i % slice;
    let first = (i / slice) * pu(3u);
    let last = min(first + pu(3u), pu(2u));
    var bad = false;  // reported once, after the loop
    var bad_check = 0u;
    var bad_value = 0;
    for (var t = first; t < last; t++) {
        var offset = s;
        var valid = true;
        for (var j = 0u; j < m; j++) {
            let dim = p(8u + j);
            let raw = indices[t * m + j];
            let index = select(raw, raw + dim, raw < 0);
            if (index < 0 || index >= dim) {
                if (!bad) {
                    bad_check = j;
                    bad_value = raw;
                }
                bad = true;
                valid = false;
            }
            offset += u32(index) * pu(24u + j);
        }
        if (valid) {
            let a = out[offset];
            let u = updates[t * slice + s];
            out[offset] = {{COMBINE}};
        }
    }
    if (bad) {
        report_bad(bad_check, bad_value);
    }
}

{{REPORT_BAD}}
