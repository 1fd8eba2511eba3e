// The mean and variance of a row of X (array<f32>) in two passes, as the numpy backend: the
// variance from the centred values, for accuracy (included by group_norm.wgsl, instance_norm.wgsl
// and layer_norm.wgsl). Sums run in 4 lanes (elements s, s+4, ...) for shorter dependency chains
// and smaller rounding.
// include: norm/shifted_mean.wgsl

// Mean of x[base .. base + size), as the row's first element plus the mean of x minus it: the
// sums of a row far from zero lose no precision.
fn row_mean(base: u32, size: u32) -> ShiftedMean {
    let body = size / 4u * 4u;
    let shift = x[base];
    var sum = vec4<f32>();
    for (var s = 0u; s < body; s += 4u) {
        sum += vec4<f32>(x[base + s], x[base + s + 1u], x[base + s + 2u], x[base + s + 3u]) - shift;
    }
    for (var s = body; s < size; s++) {
        sum.x += x[base + s] - shift;
    }
    return ShiftedMean(shift, (sum.x + sum.y + sum.z + sum.w) / f32(size));
}

// Mean of (x - mean)^2 over x[base .. base + size).
fn row_variance(base: u32, size: u32, mean: ShiftedMean) -> f32 {
    let body = size / 4u * 4u;
    var sq = vec4<f32>();
    for (var s = 0u; s < body; s += 4u) {
        let d = centred4(vec4<f32>(x[base + s], x[base + s + 1u], x[base + s + 2u], x[base + s + 3u]), mean);
        sq += d * d;
    }
    for (var s = body; s < size; s++) {
        let d = centred(x[base + s], mean);
        sq.x += d * d;
    }
    return (sq.x + sq.y + sq.z + sq.w) / f32(size);
}
