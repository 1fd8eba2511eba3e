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
// include: matmul/epilogue.wgsl
// include: matmul/block8.wgsl
// include: matmul/block8_operands.wgsl
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
    let k_size = p(2u);
    let per_batch = pu(4u) * pu(5u);
    // No early return: every lane takes part in the shuffles. Lanes past the end redo the last
    // block and store nothing.
    let total = pu(3u) * per_batch;
    let live = linear_id(gid, nwg, WG) < total;
    let o = block8_at(min(linear_id(gid, nwg, WG), total - 1u));
    let group = lane - lane % 8u;
    let my_row = min(o.m0 + i32(lane % 8u), m_size - 1) * p(24u) + o.ao;
    let sharing = subgroupAll(lanes % 8u == 0u && subgroupShuffle(o.m0, group) == o.m0
                              && subgroupShuffle(o.ao, group) == o.ao);
    let b_vec = p(34u) != 0;
    var acc: array<vec4<{{T}}>, 16>;
    if (sharing && b_vec) {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, shared8(a[my_row + k * o.ak], group), block_bv(o, k));
        }
    } else if (sharing) {
        for (var k = 0; k < k_size; k++) {
            fma8(&acc, shared8(a[my_row + k * o.ak], group), block_b(o, k));
        }
    } else {
        block8_sums(&acc, o);
    }
    if (!live) {
        return;
    }
    store_block(&acc, o.m0, o.n0, o.yo, o.co);
}
