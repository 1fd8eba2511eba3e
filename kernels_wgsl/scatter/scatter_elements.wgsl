// ScatterElements in one pass: invocation l owns line l of the output along the axis (no other
// line can be written by its updates), copies the data line into it, then applies the updates of
// the matching indices line in index order: repeated indices resolve as on the CPU (the last
// update wins, or all combine in order) with no atomics. {{COMBINE}} merges the current value a
// with the update u. Negative indices count from the end; an index still out of range is skipped
// and reported to the host (report_bad, check 0), which raises the numpy backend's InputError
// (known indices are checked at resize).
// params: 0 = lines, 1 = data axis length, 2 = data axis stride, 3 = indices axis length,
// 4 = indices axis stride, 8..13 = data shape with 1 on the axis, 16..21 = data strides,
// 24..29 = indices shape with 1 on the axis, 32..37 = indices strides (rank 6, right-aligned),
// 63 = status id.
@group(0) @binding(0) var<storage, read_write> data: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<storage, read_write> updates: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let line = linear_id(gid, nwg, WG);
    if (line >= pu(0u)) {
        return;
    }
    // The line's coordinates; it has updates when they lie inside the indices' shape.
    var rest = line;
    var at = 0u;
    var src = 0u;
    var inside = true;
    for (var d = 5; d >= 0; d--) {
        let size = pu(8u + u32(d));
        let c = rest % size;
        rest /= size;
        at += c * pu(16u + u32(d));
        src += c * pu(32u + u32(d));
        inside = inside && c < pu(24u + u32(d));
    }
    let len = p(1u);
    let stride = pu(2u);
    for (var j = 0u; j < u32(len); j++) {
        out[at + j * stride] = data[at + j * stride];
    }
    if (!inside) {
        return;
    }
    let count = pu(3u);
    let src_stride = pu(4u);
    var bad = false;  // reported once, after the loop
    var bad_value = 0;
    for (var j = 0u; j < count; j++) {
        let raw = indices[src + j * src_stride];
        let index = select(raw, raw + len, raw < 0);
        if (index >= 0 && index < len) {
            let dst = at + u32(index) * stride;
            let a = out[dst];
            let u = updates[src + j * src_stride];
            out[dst] = {{COMBINE}};
        } else if (!bad) {
            bad = true;
            bad_value = raw;
        }
    }
    if (bad) {
        report_bad(0u, bad_value);
    }
}

{{REPORT_BAD}}
