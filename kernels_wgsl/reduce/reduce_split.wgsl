// Reduce, pass 1 of the split reduction (backends/wgpu/reduce.py; reduce_split_merge.wgsl is pass
// 2), for few outputs over long rows, which a workgroup per output (reduce_workgroup.wgsl) would
// leave to a few of a GPU's cores: a workgroup per (output, chunk). Same params (5 and 6 aside),
// kinds and text as reduce.wgsl; the reduced elements of an output, outer rows (the reduced dims
// other than the walked one) of the walked dim in that order, are cut into params 5 chunks of
// params 6 elements. Workgroup o * chunks + c reduces chunk c of output o with the kind's combine
// and merge steps, no final one, into y[o * chunks + c]. log_sum_exp sums exp(v - the chunk's
// largest finite element) and stores that element too, at y[outputs * chunks + o * chunks + c]
// (-inf where the chunk has none), for pass 2 to rescale the sums to the row's.
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<uniform> params: Params;
// include: reduce/reduce_kinds.wgsl
// include: reduce/reduce_tree.wgsl
override WG: u32 = 64u;

// This invocation's share of reduced elements begin ..< end: in each outer row they meet, elements
// local, local + WG, ... of the piece in that row (neighbours read neighbouring elements of a
// contiguous walked dim).
fn chunk_share(local: u32, base: i32, begin: u32, end: u32, shift: {{T}}, finite_max: bool) -> {{T}} {
    let length = pu(2u);
    let stride = p(3u);
    var acc = start(finite_max);
    var e = begin;
    while (e < end) {
        let first = e % length;
        let n = min(end - e, length - first);
        if (local < n) {
            let at = base + strided_offset(e / length, 24u, 32u) + i32(first + local) * stride;
            let share = reduce_row(at, (n - local + WG - 1u) / WG, stride * i32(WG), shift, finite_max);
            acc = merge(finite_max, acc, share);
        }
        e += n;
    }
    return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let chunks = pu(5u);
    let w = wid.x + wid.y * nwg.x;
    if (w >= pu(0u) * chunks) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let begin = (w % chunks) * pu(6u);
    let end = min(begin + pu(6u), pu(1u));
    let base = strided_offset(w / chunks, 8u, 16u);
    var shift = {{T}}(0);
    if (SHIFTED) {
        let largest = merge_across(local, chunk_share(local, base, begin, end, shift, true), true);
        shift = select({{T}}(0), largest, largest > bitcast<{{T}}>(0xff800000u));  // 0 if none is finite
        if (local == 0u) {
            y[pu(0u) * chunks + w] = largest;
        }
    }
    let total = merge_across(local, chunk_share(local, base, begin, end, shift, false), false);
    if (local == 0u) {
        y[w] = total;
    }
}
