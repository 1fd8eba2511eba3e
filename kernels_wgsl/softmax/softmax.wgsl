// Softmax / LogSoftmax / Hardmax: one invocation per row. A row is `length` elements `inner`
// apart; row r starts at (r / inner) * length * inner + r % inner. Passes over the row: the maximum
// (a NaN wins, as in numpy) and its first index, the sum of exp(x - max) (so exp cannot overflow),
// the write. 8 elements per loop iteration: llvmpipe ends an invocation's loops after 65535.
// params: 0 = row count, 1 = row length, 2 = inner size.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

// 0 = softmax, 1 = logsoftmax, 2 = hardmax (one-hot of the first maximum).
const KIND: u32 = {{KIND}}u;

var<private> first: u32;
var<private> inner: u32;
var<private> best: f32;
var<private> arg: u32;
var<private> total: f32;
var<private> part: f32;
var<private> log_total: f32;

// Pass 0: maximum and its index; pass 1: sum of exponentials (8 at a time); pass 2: the output.
fn visit(pass_id: u32, i: u32) {
    let at = first + i * inner;
    let v = x[at];
    if (pass_id == 0u) {
        if (!is_nan_f32(best) && (v > best || is_nan_f32(v))) {
            best = v;
            arg = i;
        }
    } else if (pass_id == 1u) {
        part += exp(v - best);
    } else if (KIND == 0u) {
        y[at] = exp(v - best) / total;
    } else if (KIND == 1u) {
        y[at] = (v - best) - log_total;
    } else {
        y[at] = select(0.0, 1.0, i == arg);
    }
}

// One pass over the row; exponentials are summed 8 at a time into `total` (fewer roundings).
fn walk(pass_id: u32, length: u32) {
    total = select(total, 0.0, pass_id == 1u);
    var i = 0u;
    for (; i + 8u <= length; i += 8u) {
        part = 0.0;
        for (var k = 0u; k < 8u; k++) {  // a constant trip count: unrolled by the compiler
            visit(pass_id, i + k);
        }
        total += part;
    }
    part = 0.0;
    for (; i < length; i++) {
        visit(pass_id, i);
    }
    total += part;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = linear_id(gid, nwg, WG);
    if (r >= u32(p(0u))) {
        return;
    }
    let length = u32(p(1u));
    inner = u32(p(2u));
    first = (r / inner) * length * inner + r % inner;
    best = x[first];
    arg = 0u;
    walk(0u, length);
    if (KIND != 2u) {
        walk(1u, length);
        log_total = log(total);
    }
    walk(2u, length);
}
