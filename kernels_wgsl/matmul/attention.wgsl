// Attention: Y = transpose(softmax(alpha * Q' @ K' + beta * M) @ V', perm_y) (engine/ops/attention.py)
// without writing the scores: each invocation takes ROWS query rows of one batch entry and walks
// the keys once, keeping per row the running maximum, the running sum of exp(score - maximum) and
// the sums of the value rows weighted by it (rescaled whenever the maximum grows), then divides.
// The head sizes D and D_v are text constants: the per-element code is written out by
// backends/wgpu/attention.py in vec4s (the LOAD_Q, LOAD_KV, UPDATE and STORE texts), so the only
// loops are over the keys and the batch axes (llvmpipe counts every loop iteration of an
// invocation against 65535). Operands are read through strides: the head split and merge
// (permutations), transposes and the mask's broadcast cost nothing.
// params: 0 S_q, 1 S_k, 2 batch count, 3 row blocks (of ROWS), 4..7 batch shape (right-aligned),
// 8.. Q, 12.. K, 16.. V, 20.. M, 24.. Y batch strides, 28 Q row stride, 29 Q d stride,
// 30 K d stride, 31 K key stride, 32 V key stride, 33 V d stride, 34 M row stride, 35 M key stride,
// 36 has M (without it Q is bound in its place, never read), 37 Y row stride, 38 Y d stride,
// 39 alpha, 40 beta (f32 bits).
// Q, K and V are read as vec4s where their head axes are contiguous and every offset is a
// multiple of 4 (ELEMENT vec4<f32>: a quarter of the loads), else as f32s.
@group(0) @binding(0) var<storage, read_write> q: array<{{ELEMENT}}>;
@group(0) @binding(1) var<storage, read_write> k: array<{{ELEMENT}}>;
@group(0) @binding(2) var<storage, read_write> v: array<{{ELEMENT}}>;
@group(0) @binding(3) var<storage, read_write> mask: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;
const ROWS = {{ROWS}};

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = linear_id(gid, nwg, WG);
    let blocks = pu(3u);
    if (id >= pu(2u) * blocks) {
        return;
    }
    let r0 = i32(id % blocks) * ROWS;
    var rest = id / blocks;
    var qo = 0;
    var ko = 0;
    var vo = 0;
    var mo = 0;
    var yo = 0;
    for (var d = 3; d >= 0; d--) {
        let size = pu(4u + u32(d));
        let coord = i32(rest % size);
        rest = rest / size;
        qo += coord * p(8u + u32(d));
        ko += coord * p(12u + u32(d));
        vo += coord * p(16u + u32(d));
        mo += coord * p(20u + u32(d));
        yo += coord * p(24u + u32(d));
    }
    let rows = p(0u);
    let keys = p(1u);
    let alpha = pf(39u);
    let beta = pf(40u);
    let has_mask = p(36u) != 0;
    // Rows past S_q (the last block's) redo the last row and store nothing.
    {{LOAD_Q}}
    for (var j = 0; j < keys; j++) {
        {{LOAD_KV}}
        {{UPDATE}}
    }
    {{STORE}}
}

// Score of query row `row` (its vec4s already scaled by alpha) against key j: the dot product
// plus beta times the mask, when there is one.
fn masked(score: f32, row: i32, j: i32, mo: i32, beta: f32, has_mask: bool) -> f32 {
    if (has_mask) {
        return score + beta * mask[mo + row * p(34u) + j * p(35u)];
    }
    return score;
}
