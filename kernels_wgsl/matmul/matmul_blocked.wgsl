// Y = act(alpha * op(A) @ op(B) + beta * C), register-blocked: each invocation computes a 4x4
// block of Y and loops over K with 4 + 4 scalar loads per 16 multiply-adds. Cheap where shader
// memory access dominates (software adapters); real GPUs get matmul_tiled.wgsl.
// Transposes and 1-D operands are strides (backends/wgpu/matmul.py); edge blocks clamp their load
// indices (no branch in the K loop) and skip out-of-range stores. K = 0 leaves beta * C.
// params: 0 M, 1 N, 2 K, 3 batch count, 4 row blocks, 5 column blocks, 6 alpha, 7 beta,
// 8..11 batch shape (right-aligned), 12.. A, 16.. B, 20.. C batch strides (0 on broadcast),
// 24 A row stride, 25 A k stride, 26 B k stride, 27 B column stride, 28 C row stride,
// 29 C column stride, 30 has C (without it A is bound in its place and never read),
// 31 activation alpha, 32 activation beta, 33 strip width (blocks).
@group(0) @binding(0) var<storage, read_write> a: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

fn act(v: {{T}}, alpha: {{T}}, beta: {{T}}) -> {{T}} {
    return {{ACT}};
}

// Epilogue of one row of a block: scale, bias, activation; columns past N are not stored.
fn store_row(m: i32, n0: i32, acc: vec4<{{T}}>, out_base: i32, co: i32) {
    let m_size = p(0u);
    let n_size = p(1u);
    if (m >= m_size) {
        return;
    }
    let alpha = {{READ}}(6u);
    let beta = {{READ}}(7u);
    for (var j = 0; j < 4; j++) {
        let n = n0 + j;
        if (n >= n_size) {
            return;
        }
        var v = alpha * acc[j];
        if (p(30u) != 0) {
            v += beta * c[co + m * p(28u) + n * p(29u)];
        }
        y[out_base + m * n_size + n] = act(v, {{READ}}(31u), {{READ}}(32u));
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let m_size = p(0u);
    let n_size = p(1u);
    let k_size = p(2u);
    let blocks_m = pu(4u);
    let blocks_n = pu(5u);
    let id = linear_id(gid, nwg, WG);
    let per_batch = blocks_m * blocks_n;
    if (id >= pu(3u) * per_batch) {
        return;
    }
    // Blocks go in strips `strip` blocks wide, down M: neighbouring invocations share A rows and
    // the strip of B stays in cache while the strip walks M. The last strip may be narrower.
    let block = id % per_batch;
    let strip = pu(33u);
    let full = (blocks_n / strip) * strip * blocks_m;
    var mb = 0u;
    var nb = 0u;
    if (block < full) {
        mb = (block % (strip * blocks_m)) / strip;
        nb = block / (strip * blocks_m) * strip + block % strip;
    } else {
        let width = blocks_n % strip;
        mb = (block - full) / width;
        nb = blocks_n - width + (block - full) % width;
    }
    let m0 = i32(mb) * 4;
    let n0 = i32(nb) * 4;
    var rest = id / per_batch;
    let batch = rest;
    var ao = 0;
    var bo = 0;
    var co = 0;
    for (var d = 3; d >= 0; d--) {
        let size = pu(8u + u32(d));
        let coord = i32(rest % size);
        rest = rest / size;
        ao += coord * p(12u + u32(d));
        bo += coord * p(16u + u32(d));
        co += coord * p(20u + u32(d));
    }
    let ask = p(25u);
    let bsk = p(26u);
    let rows = min(vec4<i32>(m0) + vec4<i32>(0, 1, 2, 3), vec4<i32>(m_size - 1));
    let cols = min(vec4<i32>(n0) + vec4<i32>(0, 1, 2, 3), vec4<i32>(n_size - 1));
    let ar = rows * p(24u) + ao;
    let bc = cols * p(27u) + bo;
    var acc0 = vec4<{{T}}>();
    var acc1 = vec4<{{T}}>();
    var acc2 = vec4<{{T}}>();
    var acc3 = vec4<{{T}}>();
    for (var k = 0; k < k_size; k++) {
        let ka = k * ask;
        let kb = k * bsk;
        let bv = vec4<{{T}}>(b[bc.x + kb], b[bc.y + kb], b[bc.z + kb], b[bc.w + kb]);
        acc0 += a[ar.x + ka] * bv;
        acc1 += a[ar.y + ka] * bv;
        acc2 += a[ar.z + ka] * bv;
        acc3 += a[ar.w + ka] * bv;
    }
    let out_base = i32(batch) * m_size * n_size;
    store_row(m0, n0, acc0, out_base, co);
    store_row(m0 + 1, n0, acc1, out_base, co);
    store_row(m0 + 2, n0, acc2, out_base, co);
    store_row(m0 + 3, n0, acc3, out_base, co);
}
