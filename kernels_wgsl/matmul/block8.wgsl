// The 8x8 output blocks of matmul_blocked.wgsl and matmul_subgroup.wgsl (included by both): the
// Pair of vec4s a block's rows or columns come in, the 64 multiply-adds of one k, the block's
// stores, the loads of 8 elements of A or B, and the strip order of the blocks. Uses the kernels'
// bindings a and b, params slot 33 (strip width) and store4 (matmul/epilogue.wgsl).

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

// The block's outputs from row m0, column n0 (acc as fma8 leaves it), through the epilogue at
// Y offset out_base and C offset co; rows past M and columns past N are not stored (store4).
fn store_block(acc: ptr<function, array<vec4<{{T}}>, 16>>, m0: i32, n0: i32, out_base: i32, co: i32) {
    store4(m0, n0, (*acc)[0], out_base, co);
    store4(m0, n0 + 4, (*acc)[1], out_base, co);
    store4(m0 + 1, n0, (*acc)[2], out_base, co);
    store4(m0 + 1, n0 + 4, (*acc)[3], out_base, co);
    store4(m0 + 2, n0, (*acc)[4], out_base, co);
    store4(m0 + 2, n0 + 4, (*acc)[5], out_base, co);
    store4(m0 + 3, n0, (*acc)[6], out_base, co);
    store4(m0 + 3, n0 + 4, (*acc)[7], out_base, co);
    store4(m0 + 4, n0, (*acc)[8], out_base, co);
    store4(m0 + 4, n0 + 4, (*acc)[9], out_base, co);
    store4(m0 + 5, n0, (*acc)[10], out_base, co);
    store4(m0 + 5, n0 + 4, (*acc)[11], out_base, co);
    store4(m0 + 6, n0, (*acc)[12], out_base, co);
    store4(m0 + 6, n0 + 4, (*acc)[13], out_base, co);
    store4(m0 + 7, n0, (*acc)[14], out_base, co);
    store4(m0 + 7, n0 + 4, (*acc)[15], out_base, co);
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
