// Softmax / LogSoftmax / Hardmax as softmax.wgsl (same params and KIND) with a workgroup per row,
// for real GPUs (a row per invocation leaves most of them idle and has each SIMD group read rows
// far apart) and for rows too long for one invocation on llvmpipe: invocation t takes the row's
// elements t, t + WG, ...; the maximum and its first index, then the sum of exp(x - max), are
// combined across the workgroup (reduce/workgroup_tree.wgsl).
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
// include: reduce/workgroup_tree.wgsl
override WG: u32 = 64u;

// 0 = softmax, 1 = logsoftmax, 2 = hardmax (one-hot of the first maximum).
const KIND: u32 = {{KIND}}u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= pu(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let length = pu(1u);
    let inner = pu(2u);
    let first = (r / inner) * length * inner + r % inner;
    var own = Top(0.0, 0xffffffffu);
    for (var i = local; i < length; i += WG) {
        let v = x[first + i * inner];
        if (beats(v, i, own.value, own.index)) {
            own = Top(v, i);
        }
    }
    let top = workgroup_top(local, own);
    var total = 0.0;
    if (KIND != 2u) {
        var part = 0.0;
        for (var i = local; i < length; i += WG) {
            part += exp(x[first + i * inner] - top.value);
        }
        total = workgroup_sum(local, part);
    }
    let log_total = log(total);
    for (var i = local; i < length; i += WG) {
        let at = first + i * inner;
        if (KIND == 0u) {
            y[at] = exp(x[at] - top.value) / total;
        } else if (KIND == 1u) {
            y[at] = (x[at] - top.value) - log_total;
        } else {
            y[at] = select(0.0, 1.0, i == top.index);
        }
    }
}
