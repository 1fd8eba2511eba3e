// The Attention kernels' operands (included by attention.wgsl and attention_tiled.wgsl): Q, K, V,
// the mask and Y, read and written through the strides in params (see attention.wgsl), and the
// score of a query row against a key.
@group(0) @binding(0) var<storage, read_write> q: array<{{ELEMENT}}>;
@group(0) @binding(1) var<storage, read_write> k: array<{{ELEMENT}}>;
@group(0) @binding(2) var<storage, read_write> v: array<{{ELEMENT}}>;
@group(0) @binding(3) var<storage, read_write> mask: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

struct Offsets {
    q: i32,
    k: i32,
    v: i32,
    m: i32,
    y: i32,
}

// Where batch entry `entry` (row-major over the merged batch axes, params 4..7) starts in each
// operand.
fn batch_offsets(entry: u32) -> Offsets {
    var rest = entry;
    var at = Offsets(0, 0, 0, 0, 0);
    for (var d = 3; d >= 0; d--) {
        let size = pu(4u + u32(d));
        let coord = i32(rest % size);
        rest = rest / size;
        at.q += coord * p(8u + u32(d));
        at.k += coord * p(12u + u32(d));
        at.v += coord * p(16u + u32(d));
        at.m += coord * p(20u + u32(d));
        at.y += coord * p(24u + u32(d));
    }
    return at;
}

// Score of query row `row` (its vec4s already scaled by alpha) against key j: the dot product
// plus beta times the mask, when there is one.
fn masked(score: f32, row: i32, j: i32, mo: i32, beta: f32, has_mask: bool) -> f32 {
    if (has_mask) {
        return score + beta * mask[mo + row * p(34u) + j * p(35u)];
    }
    return score;
}
