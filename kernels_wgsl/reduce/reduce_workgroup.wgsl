// Reduce as reduce.wgsl (same params, kinds and text) with a workgroup per output element, for
// real GPUs (few outputs over many elements leave most invocations idle with one per output) and
// for reductions too long for one invocation on llvmpipe. The reduced elements are outer rows
// (the reduced dims other than the walked one) of the walked dim, cut into params 5 pieces of
// params 6 elements each; invocation t reduces work items t, t + WG, ... (item i: piece i % pieces
// of row i / pieces), and the partials are merged across the workgroup in a tree.
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<uniform> params: Params;
// include: reduce/reduce_kinds.wgsl
// include: reduce/reduce_tree.wgsl
override WG: u32 = 64u;

// This invocation's share of the reduction.
fn reduce_share(local: u32, base: i32, outer: u32, shift: {{T}}, finite_max: bool) -> {{T}} {
    let length = pu(2u);
    let stride = p(3u);
    let pieces = pu(5u);
    let piece = pu(6u);
    var acc = start(finite_max);
    for (var i = local; i < outer * pieces; i += WG) {
        let first = (i % pieces) * piece;
        let row = base + strided_offset(i / pieces, 24u, 32u) + i32(first) * stride;
        acc = merge(finite_max, acc, reduce_row(row, min(piece, length - first), stride, shift, finite_max));
    }
    return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = wid.x + wid.y * nwg.x;
    if (o >= pu(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let count = pu(1u);
    if (count == 0u) {
        y[o] = bitcast<{{T}}>(p(4u));
        return;
    }
    let outer = count / pu(2u);
    let base = strided_offset(o, 8u, 16u);
    var shift = {{T}}(0);
    if (SHIFTED) {
        let largest = merge_across(local, reduce_share(local, base, outer, shift, true), true);
        shift = select({{T}}(0), largest, largest > bitcast<{{T}}>(0xff800000u));  // 0 if none is finite
    }
    let total = merge_across(local, reduce_share(local, base, outer, shift, false), false);
    if (local == 0u) {
        y[o] = finish(total, count, shift);
    }
}
