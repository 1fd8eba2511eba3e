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
// include: matmul/attention_operands.wgsl
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
    let at = batch_offsets(id / blocks);
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
