// Reduce, pass 2 of the split reduction (reduce_split.wgsl is pass 1): a workgroup per output
// merges the params 5 chunks' partials of pass 1 (bound as x) with the kind's merge step and
// applies its final step with the whole row's count (params 1: the mean's divisor). log_sum_exp
// takes the largest of the chunks' largest finite elements as the row's shift and rescales each
// chunk's sum of exp(v - its own) to it. Same params and text as reduce_split.wgsl.
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<uniform> params: Params;
// include: reduce/reduce_kinds.wgsl
// include: reduce/reduce_tree.wgsl
override WG: u32 = 64u;

// This invocation's share of the rescaled log_sum_exp sums of chunks first ..< first + chunks
// (f32 alone has that kind: bitcasts let the i32 kernels compile).
fn shifted_sums(local: u32, first: u32, chunks: u32, shift: f32) -> f32 {
    let shifts = pu(0u) * chunks;
    var sum = 0.0;
    for (var c = local; c < chunks; c += WG) {
        let part = bitcast<f32>(x[first + c]);
        let own = bitcast<f32>(x[shifts + first + c]);
        // An inf or NaN sum stays one whatever the shift (inf * exp(-1000) would be NaN). A chunk
        // with no finite element (own -inf) sums 0, inf or NaN: the rescaled 0 stays 0.
        sum += select(part, part * exp(own - shift), is_finite_f32(part));
    }
    return sum;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = wid.x + wid.y * nwg.x;
    if (o >= pu(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let chunks = pu(5u);
    let first = o * chunks;
    var shift = {{T}}(0);
    var acc = start(false);
    if (SHIFTED) {
        let shifts = pu(0u) * chunks;
        var largest = start(true);
        for (var c = local; c < chunks; c += WG) {
            largest = merge(true, largest, x[shifts + first + c]);
        }
        largest = merge_across(local, largest, true);
        shift = select({{T}}(0), largest, largest > bitcast<{{T}}>(0xff800000u));  // 0 if none is finite
        acc = bitcast<{{T}}>(shifted_sums(local, first, chunks, bitcast<f32>(shift)));
    } else {
        for (var c = local; c < chunks; c += WG) {
            acc = merge(false, acc, x[first + c]);
        }
    }
    let total = merge_across(local, acc, false);
    if (local == 0u) {
        y[o] = finish(total, pu(1u), shift);
    }
}
