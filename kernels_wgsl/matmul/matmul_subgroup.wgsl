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
override WG: u32 = 64u;

// The 8 rows' elements of A from the 8 lanes of this lane's group.
fn shared8(mine: {{T}}, group: u32) -> Pair {
    return Pair(vec4<{{T}}>(subgroupShuffle(mine, group), subgroupShuffle(mine, group + 1u),
                            subgroupShuffle(mine, group + 2u), subgroupShuffle(mine, group + 3u)),
                vec4<{{T}}>(subgroupShuffle(mine, group + 4u), subgroupShuffle(mine, group + 5u),
                            subgroupShuffle(mine, group + 6u), subgroupShuffle(mine, group + 7u)));
}

// Rows 0..3 and 4..7 of a block, or columns 0..3 and 4..7.
struct Pair {
    lo: vec4<{{T}}>,
    hi: vec4<{{T}}>,
}

// acc[2i], acc[2i + 1]: row i of the block, columns 0..3 and 4..7.
fn fma8(acc: ptr<function, array<vec4<{{T}}>, 16>>, a8: Pair, b8: Pair) {
    (*acc)[0] += a8.lo.x * b8.lo;
    (*acc)[1] += a8.lo.x * b8.hi;
    (*acc)[2] += a8.lo.y * b8.lo;
    (*acc)[3] += a8.lo.y * b8.hi;
    (*acc)[4] += a8.lo.z * b8.lo;
    (*acc)[5] += a8.lo.z * b8.hi;
    (*acc)[6] += a8.lo.w * b8.lo;
    (*acc)[7] += a8.lo.w * b8.hi;
    (*acc)[8] += a8.hi.x * b8.lo;
    (*acc)[9] += a8.hi.x * b8.hi;
    (*acc)[10] += a8.hi.y * b8.lo;
    (*acc)[11] += a8.hi.y * b8.hi;
    (*acc)[12] += a8.hi.z * b8.lo;
    (*acc)[13] += a8.hi.z * b8.hi;
    (*acc)[14] += a8.hi.w * b8.lo;
    (*acc)[15] += a8.hi.w * b8.hi;
}

// 8 elements of A (row offsets plus k * A's k stride) or of B (column offsets plus k * B's k stride).
fn load8_a(x: vec4<i32>, z: vec4<i32>, off: i32) -> Pair {
    return Pair(vec4<{{T}}>(a[x.x + off], a[x.y + off], a[x.z + off], a[x.w + off]),
                vec4<{{T}}>(a[z.x + off], a[z.y + off], a[z.z + off], a[z.w + off]));
}

fn load8_b(x: vec4<i32>, z: vec4<i32>, off: i32) -> Pair {
    return Pair(vec4<{{T}}>(b[x.x + off], b[x.y + off], b[x.z + off], b[x.w + off]),
                vec4<{{T}}>(b[z.x + off], b[z.y + off], b[z.z + off], b[z.w + off]));
}

// (row block, column block) of block index `block`: blocks go in strips `strip` blocks wide, down
// M, so the lanes of one SIMD row share A rows and a strip of B stays in cache while it walks M.
fn block_coords(block: u32, blocks_m: u32, blocks_n: u32) -> vec2<u32> {
    let strip = pu(33u);
    let full = (blocks_n / strip) * strip * blocks_m;
    if (block < full) {
        return vec2<u32>((block % (strip * blocks_m)) / strip, block / (strip * blocks_m) * strip + block % strip);
    }
    let width = blocks_n % strip;
    return vec2<u32>((block - full) / width, blocks_n - width + (block - full) % width);
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
    var rest = id / per_batch;
    var ao = 0;
    var bo = 0;
    var co = 0;
    var yo = 0;
    for (var d = 3; d >= 0; d--) {
        let size = pu(8u + u32(d));
        let coord = i32(rest % size);
        rest = rest / size;
        ao += coord * p(12u + u32(d));
        bo += coord * p(16u + u32(d));
        co += coord * p(20u + u32(d));
        yo += coord * p(36u + u32(d));
    }
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
    let out_base = yo;
    store4(m0, n0, acc[0], out_base, co);
    store4(m0, n0 + 4, acc[1], out_base, co);
    store4(m0 + 1, n0, acc[2], out_base, co);
    store4(m0 + 1, n0 + 4, acc[3], out_base, co);
    store4(m0 + 2, n0, acc[4], out_base, co);
    store4(m0 + 2, n0 + 4, acc[5], out_base, co);
    store4(m0 + 3, n0, acc[6], out_base, co);
    store4(m0 + 3, n0 + 4, acc[7], out_base, co);
    store4(m0 + 4, n0, acc[8], out_base, co);
    store4(m0 + 4, n0 + 4, acc[9], out_base, co);
    store4(m0 + 5, n0, acc[10], out_base, co);
    store4(m0 + 5, n0 + 4, acc[11], out_base, co);
    store4(m0 + 6, n0, acc[12], out_base, co);
    store4(m0 + 6, n0 + 4, acc[13], out_base, co);
    store4(m0 + 7, n0, acc[14], out_base, co);
    store4(m0 + 7, n0 + 4, acc[15], out_base, co);
}
