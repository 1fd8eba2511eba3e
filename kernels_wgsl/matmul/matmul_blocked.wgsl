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
@group(0) @binding(0) var<storage, read_write> a: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> bv: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> res: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> y1: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> y2: array<{{T}}>;
@group(0) @binding(8) var<uniform> params: Params;
// include: matmul/epilogue.wgsl
// include: matmul/block8.wgsl
// include: matmul/batch_offsets.wgsl
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let m_size = p(0u);
    let n_size = p(1u);
    let k_size = p(2u);
    let per_batch = pu(4u) * pu(5u);
    let id = linear_id(gid, nwg, WG);
    if (id >= pu(3u) * per_batch) {
        return;
    }
    let mn = block_coords(id % per_batch, pu(4u), pu(5u));
    let m0 = i32(mn.x) * 8;
    let n0 = i32(mn.y) * 8;
    let offsets = batch_offsets(id / per_batch);  // of this product in A, B, C and Y
    let ao = offsets.x;
    let bo = offsets.y;
    let co = offsets.z;
    let yo = offsets.w;
    let ask = p(25u);
    let bsk = p(26u);
    let last = vec4<i32>(m_size - 1);
    let ar0 = min(vec4<i32>(m0) + vec4<i32>(0, 1, 2, 3), last) * p(24u) + ao;
    let ar1 = min(vec4<i32>(m0) + vec4<i32>(4, 5, 6, 7), last) * p(24u) + ao;
    let bc0 = min(vec4<i32>(n0) + vec4<i32>(0, 1, 2, 3), vec4<i32>(n_size - 1)) * p(27u) + bo;
    let bc1 = min(vec4<i32>(n0) + vec4<i32>(4, 5, 6, 7), vec4<i32>(n_size - 1)) * p(27u) + bo;
    // vec4 path: columns n0..n0+3 and n0+4..n0+7 (the second clamped to the row's last vec4).
    let bv0 = (bo + n0) / 4;
    let bv1 = (bo + min(n0 + 4, (n_size - 1) / 4 * 4)) / 4;
    let bvk = bsk / 4;
    var acc: array<vec4<{{T}}>, 16>;
    if (p(34u) != 0) {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, load8_a(ar0, ar1, k * ask), Pair(bv[bv0 + k * bvk], bv[bv1 + k * bvk]));
        }
    } else {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, load8_a(ar0, ar1, k * ask), load8_b(bc0, bc1, k * bsk));
        }
    }
    store_block(&acc, m0, n0, yo, co);
}
