// Y = act(alpha * op(A) @ op(B) + beta * C + R) as matmul_blocked.wgsl (8x8 outputs per invocation,
// same params and bindings), with the loads of A shared through subgroup shuffles: the 8 lanes of
// a SIMD row work on the same rows of A, so each lane loads one row's element and takes the other
// seven from its neighbours. On llvmpipe a load is a per-lane loop and a shuffle a few register
// moves: 1 load of A per k instead of 8. Needs the adapter's "subgroup" feature.
// Sharing needs subgroups of a multiple of 8 lanes whose aligned groups of 8 hold the same rows
// (the strip order gives that, except in a narrow last strip or where a batch starts mid-group);
// each subgroup checks this and otherwise loads as matmul_blocked.wgsl does, so any subgroup size
// or lane order gives correct results.
// params: as matmul_blocked.wgsl (slots 0..42).
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

// The 8 rows' elements of A from the 8 lanes of this lane's group.
fn shared8(mine: {{T}}, group: u32) -> Pair {
    return Pair(vec4<{{T}}>(subgroupShuffle(mine, group), subgroupShuffle(mine, group + 1u),
                            subgroupShuffle(mine, group + 2u), subgroupShuffle(mine, group + 3u)),
                vec4<{{T}}>(subgroupShuffle(mine, group + 4u), subgroupShuffle(mine, group + 5u),
                            subgroupShuffle(mine, group + 6u), subgroupShuffle(mine, group + 7u)));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) lanes: u32) {
    let m_size = p(0u);
    let n_size = p(1u);
    let k_size = p(2u);
    let per_batch = pu(4u) * pu(5u);
    // No early return: every lane takes part in the shuffles. Lanes past the end redo the last
    // block and store nothing.
    let total = pu(3u) * per_batch;
    let live = linear_id(gid, nwg, WG) < total;
    let id = min(linear_id(gid, nwg, WG), total - 1u);
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
    let group = lane - lane % 8u;
    let my_row = min(m0 + i32(lane % 8u), m_size - 1) * p(24u) + ao;
    let sharing = subgroupAll(lanes % 8u == 0u && subgroupShuffle(m0, group) == m0
                              && subgroupShuffle(ao, group) == ao);
    let b_vec = p(34u) != 0;
    var acc: array<vec4<{{T}}>, 16>;
    if (sharing && b_vec) {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, shared8(a[my_row + k * ask], group), Pair(bv[bv0 + k * bvk], bv[bv1 + k * bvk]));
        }
    } else if (sharing) {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, shared8(a[my_row + k * ask], group), load8_b(bc0, bc1, k * bsk));
        }
    } else if (b_vec) {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, load8_a(ar0, ar1, k * ask), Pair(bv[bv0 + k * bvk], bv[bv1 + k * bvk]));
        }
    } else {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, load8_a(ar0, ar1, k * ask), load8_b(bc0, bc1, k * bsk));
        }
    }
    if (!live) {
        return;
    }
    store_block(&acc, m0, n0, yo, co);
}
