// The Reduce kernels' kinds (included by reduce.wgsl, reduce_workgroup.wgsl, reduce_split.wgsl and
// reduce_split_merge.wgsl): the kind's start, combine, merge and finish steps (WGSL expressions set
// by backends/wgpu/reduce.py) and the walk of one row of the walked dim, 8 elements at a time.
// log_sum_exp first finds the largest finite element and exponentiates x - that (no overflow).
const SHIFTED: bool = {{SHIFTED}};

fn is_finite_f32(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

// floor(sqrt(s)) of a non-negative integer, exact (the numpy backend takes a float64 sqrt and
// truncates; f32 sqrt alone can land one below a perfect square).
fn isqrt_i32(s: i32) -> i32 {
    var r = i32(sqrt(f32(s)));
    while (r > 0 && r * r > s) {
        r -= 1;
    }
    while (r < 46340 && (r + 1) * (r + 1) <= s) {  // 46341^2 overflows i32
        r += 1;
    }
    return r;
}

// Truncating division on magnitudes: GLSL leaves negative integer division to the driver.
fn div_trunc_i32(a: i32, b: u32) -> i32 {
    let q = i32(u32(abs(a)) / b);
    return select(q, -q, a < 0);
}

// The finite-maximum pass (SHIFTED's first pass) or the kind's own.
fn start(finite_max: bool) -> {{T}} {
    return select({{INIT}}, bitcast<{{T}}>(0xff800000u), finite_max);
}

fn combine(finite_max: bool, acc: {{T}}, v: {{T}}, shift: {{T}}) -> {{T}} {
    if (finite_max) {
        return select(acc, v, is_finite_f32(bitcast<f32>(v)) && v > acc);
    }
    return {{COMBINE}};
}

fn merge(finite_max: bool, a: {{T}}, b: {{T}}) -> {{T}} {
    if (finite_max) {
        return max(a, b);
    }
    return {{MERGE}};
}

fn finish(acc: {{T}}, count: u32, shift: {{T}}) -> {{T}} {
    return {{FINAL}};
}

// One walked row: n elements `stride` apart from `at`.
fn reduce_row(first: i32, n: u32, stride: i32, shift: {{T}}, finite_max: bool) -> {{T}} {
    var acc = start(finite_max);
    var block = start(finite_max);
    var parts = 0u;
    var at = first;
    var j = 0u;
    for (; j + 8u <= n; j += 8u) {
        var part = start(finite_max);
        for (var k = 0; k < 8; k++) {  // a constant trip count: unrolled by the compiler
            part = combine(finite_max, part, x[at + k * stride], shift);
        }
        block = merge(finite_max, block, part);
        at += 8 * stride;
        parts += 1u;
        if (parts == 32u) {
            acc = merge(finite_max, acc, block);
            block = start(finite_max);
            parts = 0u;
        }
    }
    for (; j < n; j++) {
        block = combine(finite_max, block, x[at], shift);
        at += stride;
    }
    return merge(finite_max, acc, block);
}
