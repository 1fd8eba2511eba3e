// Y = act(alpha * op(A) @ op(B) + beta * C + R), register-blocked for software adapters: each
// invocation computes an 8x8 block of Y, loading 8 scalars of A and 8 of B (two vec4 loads where
// B allows) per 64 multiply-adds. On llvmpipe every buffer load is a per-lane loop, so loads per
// multiply-add decide the speed; real GPUs get matmul_tiled.wgsl, adapters with subgroups on the
// CPU matmul_subgroup.wgsl.
// Transposes and 1-D operands are strides (backends/wgpu/matmul.py); edge blocks clamp their load
// indices and skip out-of-range stores. K = 0 leaves beta * C + R. No branch inside a K loop: llvmpipe
// runs both sides of a branch (masked), so choices are made once, around whole loops.
// params: 0 M, 1 N, 2 K, 3 batch count, 4 row blocks, 5 column blocks, 6 alpha, 7 beta,
// 8..11 batch shape (right-aligned), 12.. A, 16.. B, 20.. C batch strides (0 on broadcast),
// 24 A row stride, 25 A k stride, 26 B k stride, 27 B column stride, 28 C row stride,
// 29 C column stride, 30 has C (without it A is bound in its place and never read),
// 31 activation alpha, 32 activation beta, 33 strip width (blocks), 34 B as vec4 (column stride 1,
// k and batch strides multiples of 4: binding 2 views B as vec4; otherwise a 16-byte stand-in),
// 35 has the residual R (binding 4; of Y's shape, so read at Y's index; without it A is bound in
// its place and never read), 36..39 Y batch strides, 40 Y row stride, 41 Y column stride (Y is
// contiguous unless the op's perm_y permutes the product's axes), 42 a split part's width (with
// SPLIT > 1 column n goes to output n / width, y, y1 or y2, at column n % width).
// include: matmul/epilogue.wgsl
// include: matmul/block8.wgsl
// include: matmul/block8_operands.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let per_batch = pu(4u) * pu(5u);
    let id = linear_id(gid, nwg, WG);
    if (id >= pu(3u) * per_batch) {
        return;
    }
    let o = block8_at(id);
    var acc: array<vec4<{{T}}>, 16>;
    block8_sums(&acc, o);
    store_block(&acc, o.m0, o.n0, o.yo, o.co);
}
