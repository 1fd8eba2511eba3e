// ArgMax / ArgMin as arg_reduce.wgsl (same params and text) with a workgroup per output element,
// for real GPUs and for rows too long for one invocation on llvmpipe: invocation t walks elements
// t, t + WG, ... of the row, then the workgroup's bests are merged in a tree, by the same rule
// (ties and NaN decided by the index, first or last).
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<i32>;
@group(0) @binding(2) var<uniform> params: Params;
// include: reduce/arg_kinds.wgsl
override WG: u32 = 64u;

const NONE = 0xffffffffu;  // the index of an invocation that walked nothing
var<workgroup> tree_best: array<{{T}}, 256>;
var<workgroup> tree_index: array<u32, 256>;

// Whether element (v, i) beats (than, than_i) where both came from walks in increasing order.
fn beats(v: {{T}}, i: u32, than: {{T}}, than_i: u32, last: bool) -> bool {
    if (i == NONE) {
        return false;
    }
    if (than_i == NONE) {
        return true;
    }
    let v_nan = nan_of(v);
    let than_nan = nan_of(than);
    if (v_nan != than_nan) {
        return v_nan;
    }
    if (v_nan || v == than) {
        return select(than_i > i, i > than_i, last);  // (written with ">" only: "a < b, c > d" parses as a template)
    }
    return v {{BETTER}} than;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = wid.x + wid.y * nwg.x;
    if (o >= pu(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let length = pu(1u);
    let inner = pu(2u);
    let last = p(3u) != 0;
    let first = (o / inner) * length * inner + o % inner;
    best_index = NONE;
    if (local < length) {
        best = x[first + local * inner];
        best_nan = nan_of(best);
        best_index = local;
    }
    for (var i = local + WG; i < length; i += WG) {
        consider(x[first + i * inner], i, last);
    }
    tree_best[local] = best;
    tree_index[local] = best_index;
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        workgroupBarrier();
        if (local < stride && local + stride < WG) {
            let other = local + stride;
            if (beats(tree_best[other], tree_index[other], tree_best[local], tree_index[local], last)) {
                tree_best[local] = tree_best[other];
                tree_index[local] = tree_index[other];
            }
        }
    }
    if (local == 0u) {
        y[o] = i32(tree_index[0]);
    }
}
