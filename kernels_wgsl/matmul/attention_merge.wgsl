// Attention, pass 2 of the split keys (attention_tiled.wgsl with params 42 splits > 1 is pass 1):
// an invocation per element of Y combines its row's splits, each (maximum m_s, total t_s, value
// sums a_s) of pass 1, at the row's largest maximum M: Y = sum_s a_s exp(m_s - M) / sum_s t_s
// exp(m_s - M), written through Y's strides. Same params as pass 1; DV is the value head size.
// A split whose keys are all masked to -inf kept its starting maximum (-FLT_MAX): it weighs 0.
@group(0) @binding(0) var<storage, read_write> parts: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;
const DV = {{DV}};

// Where batch entry `entry` (row-major over the merged batch axes, params 4..7) starts in Y.
fn y_offset(entry: u32) -> i32 {
    var rest = entry;
    var at = 0;
    for (var d = 3; d >= 0; d--) {
        let size = pu(4u + u32(d));
        at += i32(rest % size) * p(24u + u32(d));
        rest = rest / size;
    }
    return at;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = linear_id(gid, nwg, WG);
    let rows = pu(0u);
    if (id >= pu(2u) * rows * u32(DV)) {
        return;
    }
    let d = i32(id % u32(DV));
    let row = (id / u32(DV)) % rows;
    let entry = id / u32(DV) / rows;
    let splits = pu(42u);
    let first = (entry * rows + row) * splits;
    var top = -3.4028235e38;
    for (var s = 0u; s < splits; s++) {
        top = max(top, parts[(first + s) * u32(DV + 2)]);
    }
    var total = 0.0;
    var sum = 0.0;
    for (var s = 0u; s < splits; s++) {
        let part = (first + s) * u32(DV + 2);
        let weight = exp(parts[part] - top);
        total += parts[part + 1u] * weight;
        sum += parts[part + 2u + u32(d)] * weight;
    }
    y[y_offset(entry) + i32(row) * p(37u) + d * p(38u)] = sum / total;
}
