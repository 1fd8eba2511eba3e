// Col2Im: each invocation computes 4 neighbouring output pixels along the last dim, gathering
// every (tap, block) pair that lands on them: along each dim, tap k of block j covers padded
// position j * stride + k * dilation. Up to 3 spatial dims (fewer are padded with unit dims).
// Input (N, C * taps, blocks); output (N, C, I0, I1, I2).
// params: 0 = output count, 1 = C, 2..4 = image dims, 5..7 = block dims, 8..10 = dilations,
// 11..13 = strides, 14..16 = pads at the start, 17..19 = blocks per dim.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

// The block along dim d whose tap k covers padded position q, or -1.
fn block_of(d: u32, q: i32, k: i32) -> i32 {
    let t = q - k * p(8u + d);
    let stride = p(11u + d);
    if (t < 0 || t % stride != 0 || t / stride >= p(17u + d)) {
        return -1;
    }
    return t / stride;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let width = u32(p(4u));
    let spans = (width + 3u) / 4u;
    let total = u32(p(0u));
    let id = linear_id(gid, nwg, WG);
    if (id >= total / width * spans) {
        return;
    }
    let row = id / spans;  // (n, c, i0, i1)
    let i1 = i32(row % u32(p(3u)));
    let i0 = i32((row / u32(p(3u))) % u32(p(2u)));
    let nc = row / (u32(p(3u)) * u32(p(2u)));
    let b0 = p(5u);
    let b1 = p(6u);
    let b2 = p(7u);
    let blocks = u32(p(17u) * p(18u) * p(19u));
    let taps = u32(b0 * b1 * b2);
    let c = nc % u32(p(1u));
    let n = nc / u32(p(1u));
    let column0 = (n * u32(p(1u)) + c) * taps;  // first column row of this (n, c)
    for (var cc = 0u; cc < 4u; cc++) {
        let i2 = (id % spans) * 4u + cc;
        if (i2 >= width) {
            return;
        }
        var acc = 0.0;
        for (var k0 = 0; k0 < b0; k0++) {
            let j0 = block_of(0u, i0 + p(14u), k0);
            if (j0 < 0) {
                continue;
            }
            for (var k1 = 0; k1 < b1; k1++) {
                let j1 = block_of(1u, i1 + p(15u), k1);
                if (j1 < 0) {
                    continue;
                }
                for (var k2 = 0; k2 < b2; k2++) {
                    let j2 = block_of(2u, i32(i2) + p(16u), k2);
                    if (j2 < 0) {
                        continue;
                    }
                    let tap = u32((k0 * b1 + k1) * b2 + k2);
                    let block = u32((j0 * p(18u) + j1) * p(19u) + j2);
                    acc += x[(column0 + tap) * blocks + block];
                }
            }
        }
        y[row * width + i2] = acc;
    }
}
