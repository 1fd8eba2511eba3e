// One NC4HW4 slice pooled over its whole plane, shared by global_pool_nc4hw4.wgsl and
// global_pool_matmul_nc4hw4.wgsl (included by both): 4 pixels of a row per iteration into 4
// independent accumulators, read through the kernel's load_x accessor; {{COMBINE}} folds v into a
// (max or sum).

fn combine(a: vec4<f32>, v: vec4<f32>) -> vec4<f32> {
    return {{COMBINE}};
}

// Slice c4 of batch item n pooled over its plane. Pixels past a row's end read the row's last
// pixel again (harmless for max) and count as zero for the average.
fn pooled(n: i32, c4: i32, h: i32, wd: i32, average: bool) -> vec4<f32> {
    // Start from the first pixel (a neutral start value would need -inf for max).
    var a0 = load_x(n, c4, 0, 0);
    if (average) {
        a0 = vec4<f32>(0.0);
    }
    var a1 = a0; var a2 = a0; var a3 = a0;
    let zero = vec4<f32>(0.0);
    for (var iy = 0; iy < h; iy++) {
        for (var ix = 0; ix < wd; ix += 4) {
            let v0 = load_x(n, c4, iy, ix);
            let v1 = load_x(n, c4, iy, min(ix + 1, wd - 1));
            let v2 = load_x(n, c4, iy, min(ix + 2, wd - 1));
            let v3 = load_x(n, c4, iy, min(ix + 3, wd - 1));
            a0 = combine(a0, v0);
            a1 = combine(a1, select(v1, zero, average && ix + 1 >= wd));
            a2 = combine(a2, select(v2, zero, average && ix + 2 >= wd));
            a3 = combine(a3, select(v3, zero, average && ix + 3 >= wd));
        }
    }
    let result = combine(combine(a0, a1), combine(a2, a3));
    return select(result, result / f32(h * wd), average);
}
