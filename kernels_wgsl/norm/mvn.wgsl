// MeanVarianceNorm: y = (x - mean) / (sqrt(variance) + epsilon) over any set of axes. One
// invocation per row (an index over the kept axes, up to 6 merged ones: its base offset by
// strided_offset); the row's elements walk the reduced axes (up to 4 merged ones) with an
// odometer, so no division per element. Mean, then the variance of the centred values (two
// passes, as the numpy backend), then the write pass; sums shifted by the row's first element, and
// the mean kept as that shift plus an offset (norm/shifted_mean.wgsl).
// params: 0 rows, 1 elements per row, 2 epsilon, 4..7 reduced sizes, 8..11 reduced strides,
// 12..17 kept sizes, 18..23 kept strides.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
// include: norm/shifted_mean.wgsl
override WG: u32 = 64u;

// The next index over the reduced axes (the last axis fastest).
fn advance(c: vec4<i32>) -> vec4<i32> {
    var n = c;
    n.w += 1;
    if (n.w == p(7u)) {
        n.w = 0;
        n.z += 1;
        if (n.z == p(6u)) {
            n.z = 0;
            n.y += 1;
            if (n.y == p(5u)) {
                n.y = 0;
                n.x += 1;
            }
        }
    }
    return n;
}

fn offset(c: vec4<i32>) -> i32 {
    return c.x * p(8u) + c.y * p(9u) + c.z * p(10u) + c.w * p(11u);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = linear_id(gid, nwg, WG);
    if (row >= pu(0u)) {
        return;
    }
    let size = pu(1u);
    let base = strided_offset(row, 12u, 18u);
    let shift = x[base];
    var c = vec4<i32>();
    var sum = 0.0;
    for (var e = 0u; e < size; e++) {
        sum += x[base + offset(c)] - shift;
        c = advance(c);
    }
    let mean = ShiftedMean(shift, sum / f32(size));
    c = vec4<i32>();
    var sq = 0.0;
    for (var e = 0u; e < size; e++) {
        let d = centred(x[base + offset(c)], mean);
        sq += d * d;
        c = advance(c);
    }
    let scale = 1.0 / (sqrt(sq / f32(size)) + pf(2u));
    c = vec4<i32>();
    for (var e = 0u; e < size; e++) {
        let i = base + offset(c);
        y[i] = centred(x[i], mean) * scale;
        c = advance(c);
    }
}
