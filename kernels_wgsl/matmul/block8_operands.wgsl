// The operands of matmul_blocked.wgsl and matmul_subgroup.wgsl (included by both): their
// bindings (B also as vec4s, for params 34), where an invocation's 8x8 block reads A and B and
// writes Y, and the block's sums over K with every operand loaded by the lane itself. Edge blocks
// clamp their rows of A to M and columns of B to N, so every load is in range (store_block skips
// what is past them).
// include: matmul/block8.wgsl
// include: matmul/batch_offsets.wgsl
@group(0) @binding(0) var<storage, read_write> a: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> bv: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> res: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> y1: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> y2: array<{{T}}>;
@group(0) @binding(8) var<uniform> params: Params;

struct Block8 {
    m0: i32, n0: i32,                // the block's first row and column of Y
    ao: i32, co: i32, yo: i32,       // its product's offsets in A, C and Y
    ar0: vec4<i32>, ar1: vec4<i32>,  // A's rows 0..3 and 4..7 at k = 0
    bc0: vec4<i32>, bc1: vec4<i32>,  // B's columns 0..3 and 4..7 at k = 0
    bv0: i32, bv1: i32,              // B's vec4s at k = 0 (params 34), the second clamped to the row's last
    ak: i32, bk: i32, bvk: i32,      // from one k to the next, in A, B and B's vec4s
}

// Block `id` of the batch: its product, then its row and column blocks (params 4, 5) in strip
// order (block_coords).
fn block8_at(id: u32) -> Block8 {
    let n_size = p(1u);
    let per_batch = pu(4u) * pu(5u);
    let mn = block_coords(id % per_batch, pu(4u), pu(5u));
    let m0 = i32(mn.x) * 8;
    let n0 = i32(mn.y) * 8;
    let offsets = batch_offsets(id / per_batch);  // of this product in A, B, C and Y
    let ao = offsets.x;
    let bo = offsets.y;
    let last = vec4<i32>(p(0u) - 1);
    let ar0 = min(vec4<i32>(m0) + vec4<i32>(0, 1, 2, 3), last) * p(24u) + ao;
    let ar1 = min(vec4<i32>(m0) + vec4<i32>(4, 5, 6, 7), last) * p(24u) + ao;
    let bc0 = min(vec4<i32>(n0) + vec4<i32>(0, 1, 2, 3), vec4<i32>(n_size - 1)) * p(27u) + bo;
    let bc1 = min(vec4<i32>(n0) + vec4<i32>(4, 5, 6, 7), vec4<i32>(n_size - 1)) * p(27u) + bo;
    let bv0 = (bo + n0) / 4;
    let bv1 = (bo + min(n0 + 4, (n_size - 1) / 4 * 4)) / 4;
    let bsk = p(26u);
    return Block8(m0, n0, ao, offsets.z, offsets.w, ar0, ar1, bc0, bc1, bv0, bv1, p(25u), bsk, bsk / 4);
}

// The block's 8 elements of B at k, loaded as scalars or as vec4s.
fn block_b(o: Block8, k: i32) -> Pair {
    return load8_b(o.bc0, o.bc1, k * o.bk);
}

fn block_bv(o: Block8, k: i32) -> Pair {
    return Pair(bv[o.bv0 + k * o.bvk], bv[o.bv1 + k * o.bvk]);
}

// The block's sums over K (params 2), A and B loaded by this lane alone; B as vec4s with params 34.
fn block8_sums(acc: ptr<function, array<vec4<{{T}}>, 16>>, o: Block8) {
    let k_size = p(2u);
    if (p(34u) != 0) {
        for (var k = 0; k < k_size; k++) {
            fma8(acc, load8_a(o.ar0, o.ar1, k * o.ak), block_bv(o, k));
        }
    } else {
        for (var k = 0; k < k_size; k++) {
            fma8(acc, load8_a(o.ar0, o.ar1, k * o.ak), block_b(o, k));
        }
    }
}
