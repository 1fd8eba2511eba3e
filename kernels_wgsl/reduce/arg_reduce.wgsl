// ArgMax / ArgMin: one invocation per output element walks its row of the input, seen as
// (outer, length, inner), and writes the index (int64 tensors are i32 on the GPU).
// Ties keep the first index, or the last with select_last_index; a NaN counts as the extreme
// (numpy's argmax / argmin), so the first NaN (or the last) wins.
// 8 elements per loop iteration: llvmpipe ends an invocation's loops after 65535 iterations.
// params: 0 = output count, 1 = length of the reduced axis, 2 = inner size, 3 = select_last_index.
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<i32>;
@group(0) @binding(2) var<uniform> params: Params;
// include: reduce/arg_kinds.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = linear_id(gid, nwg, WG);
    if (o >= u32(p(0u))) {
        return;
    }
    let length = u32(p(1u));
    let inner = u32(p(2u));
    let last = p(3u) != 0;
    let first = (o / inner) * length * inner + o % inner;
    best = x[first];
    best_nan = nan_of(best);
    best_index = 0u;
    var i = 1u;
    for (; i + 8u <= length; i += 8u) {
        for (var k = 0u; k < 8u; k++) {  // a constant trip count: unrolled by the compiler
            consider(x[first + (i + k) * inner], i + k, last);
        }
    }
    for (; i < length; i++) {
        consider(x[first + i * inner], i, last);
    }
    y[o] = i32(best_index);
}
