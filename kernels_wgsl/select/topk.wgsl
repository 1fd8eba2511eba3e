// TopK: one invocation per output row. A row is `length` elements `inner` apart, starting at
// (r / inner) * length * inner + r % inner. Partial selection: pass j scans the row for the best
// element ranked after the one pass j - 1 took, so no per-row storage is needed (k passes).
// Rank: better value first (NaN is the largest value, as numpy sorts), equal values by index.
// 8 elements per loop iteration: llvmpipe ends an invocation's loops after 65535 iterations.
// params: 0 = rows, 1 = length, 2 = inner, 3 = k, 4 = largest (1) or smallest (0).
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> values: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> indices: array<i32>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

var<private> first: u32;
var<private> inner: u32;
var<private> largest: bool;
var<private> prev: {{T}};  // the element the previous pass took (valid when have_prev)
var<private> prev_index: u32;
var<private> have_prev: bool;
var<private> best: {{T}};
var<private> best_index: u32;
var<private> have_best: bool;

fn nan_of(v: {{T}}) -> bool {
    return {{IS_NAN}};
}

// a ranks strictly before b by value alone.
fn before(a: {{T}}, b: {{T}}) -> bool {
    let an = nan_of(a);
    let bn = nan_of(b);
    if (largest) {
        return (an && !bn) || (!an && !bn && a > b);
    }
    return (!an && bn) || (!an && !bn && a < b);
}

fn same(a: {{T}}, b: {{T}}) -> bool {
    return (nan_of(a) && nan_of(b)) || a == b;
}

fn consider(i: u32) {
    let v = x[first + i * inner];
    // Only elements ranked after the previous pick (by value, then index) are left.
    let left = !have_prev || before(prev, v) || (same(prev, v) && i > prev_index);
    if (left && (!have_best || before(v, best))) {
        best = v;
        best_index = i;
        have_best = true;
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = linear_id(gid, nwg, WG);
    if (r >= u32(p(0u))) {
        return;
    }
    let length = u32(p(1u));
    inner = u32(p(2u));
    let k = u32(p(3u));
    largest = p(4u) != 0;
    first = (r / inner) * length * inner + r % inner;
    let out_first = (r / inner) * k * inner + r % inner;
    have_prev = false;
    for (var j = 0u; j < k; j++) {
        have_best = false;
        var i = 0u;
        for (; i + 8u <= length; i += 8u) {
            for (var u = 0u; u < 8u; u++) {  // a constant trip count: unrolled by the compiler
                consider(i + u);
            }
        }
        for (; i < length; i++) {
            consider(i);
        }
        values[out_first + j * inner] = best;
        indices[out_first + j * inner] = i32(best_index);
        prev = best;
        prev_index = best_index;
        have_prev = true;
    }
}
