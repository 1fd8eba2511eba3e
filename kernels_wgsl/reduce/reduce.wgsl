// Reduce: one invocation per output element loops over every reduced element of its input.
// The input is seen as kept dims (the output's order) and reduced dims, both rank 6 after the host
// merged adjacent dims; the longest reduced dim is walked directly, the others by decomposition.
// The kind's combine / merge / final steps are WGSL expressions set by the host
// (backends/wgpu/reduce.py). Elements are combined 8 at a time into partials, 32 partials into a
// block, blocks into the result: fewer rounding steps than one running sum, and 8x fewer loop
// iterations (llvmpipe ends any invocation's loops after 65535 iterations in all; reductions that
// would need more get a workgroup per output, reduce_workgroup.wgsl, or are refused).
// params: 0 = output count, 1 = reduced count, 2 = walked dim length, 3 = its stride,
// 4 = result of an empty reduction (32-bit word), 8..13 = kept shape, 16..21 = kept strides,
// 24..29 = the other reduced dims, 32..37 = their strides (rank 6, right-aligned).
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<uniform> params: Params;
// include: reduce/reduce_kinds.wgsl
override WG: u32 = 64u;

fn reduce_all(base: i32, outer: u32, shift: {{T}}, finite_max: bool) -> {{T}} {
    var acc = start(finite_max);
    for (var r = 0u; r < outer; r++) {
        let row = reduce_row(base + strided_offset(r, 24u, 32u), u32(p(2u)), p(3u), shift, finite_max);
        acc = merge(finite_max, acc, row);
    }
    return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = linear_id(gid, nwg, WG);
    if (o >= u32(p(0u))) {
        return;
    }
    let count = u32(p(1u));
    if (count == 0u) {
        y[o] = bitcast<{{T}}>(p(4u));
        return;
    }
    let outer = count / u32(p(2u));
    let base = strided_offset(o, 8u, 16u);
    var shift = {{T}}(0);
    if (SHIFTED) {
        let largest = reduce_all(base, outer, shift, true);
        shift = select({{T}}(0), largest, largest > bitcast<{{T}}>(0xff800000u));  // 0 if none is finite
    }
    y[o] = finish(reduce_all(base, outer, shift, false), count, shift);
}
