// CumSum: invocation r owns row r along the axis (the input viewed as (outer, len, inner)) and
// walks it sequentially, as the CPU does. The axis is {{AXIS}}: a param when known at resize, or
// read from its tensor at run time, when the host dispatches `invocations` = size / smallest dim
// (enough rows for any axis) and extra invocations return. A run-time axis out of range gives an
// output of zeros, each invocation clearing `chunk` elements (a shader cannot raise; the numpy
// backend raises).
// params: 0 = element count, 1 = rank, 2 = axis when known, 3 = exclusive, 4 = reverse,
// 5 = invocations, 6 = chunk, 8..13 = shape (rank 6, right-aligned, padded with 1).
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
{{AXIS_BINDING}}
@group(0) @binding({{PARAMS}}) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = linear_id(gid, nwg, WG);
    if (r >= pu(5u)) {
        return;
    }
    let rank = p(1u);
    var axis = {{AXIS}};
    if (axis < 0) {
        axis += rank;
    }
    if (axis < 0 || axis >= rank) {
        let chunk = pu(6u);
        for (var j = 0u; j < chunk; j++) {
            y[r * chunk + j] = {{T}}(0);
        }
        return;
    }
    let slot = u32(axis + 6 - rank);
    let len = pu(8u + slot);
    var inner = 1u;
    for (var d = 0u; d < 6u; d++) {
        if (d > slot) {
            inner *= pu(8u + d);
        }
    }
    if (r >= pu(0u) / len) {
        return;
    }
    let reverse = p(4u) != 0;
    let exclusive = p(3u) != 0;
    let first = (r / inner) * len * inner + r % inner;
    var at = select(first, first + (len - 1u) * inner, reverse);
    var acc = {{T}}(0);
    for (var j = 0u; j < len; j++) {
        let v = x[at];
        if (exclusive) {
            y[at] = acc;
            acc += v;
        } else {
            acc += v;
            y[at] = acc;
        }
        at = select(at + inner, at - inner, reverse);  // wraps past 0 after the last element only
    }
}
