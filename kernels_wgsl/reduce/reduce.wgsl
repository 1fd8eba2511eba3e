// Reduce: one invocation per output element loops over every reduced element of its input.
// The input is seen as kept dims (the output's order) and reduced dims, both rank 6 after the host
// merged adjacent dims; the longest reduced dim is walked directly, the others by decomposition.
// The kind's combine / merge / final steps are WGSL expressions set by the host
// (backends/wgpu/reduce.py). Elements are combined 8 at a time into partials, 32 partials into a
// block, blocks into the result: fewer rounding steps than one running sum, and 8x fewer loop
// iterations (llvmpipe ends any invocation's loops after 65535 iterations in all; the host
// refuses reductions that would need more).
// params: 0 = output count, 1 = reduced count, 2 = walked dim length, 3 = its stride,
// 4 = result of an empty reduction (32-bit word), 8..13 = kept shape, 16..21 = kept strides,
// 24..29 = the other reduced dims, 32..37 = their strides (rank 6, right-aligned).
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

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

fn reduce_all(base: i32, outer: u32, shift: {{T}}, finite_max: bool) -> {{T}} {
    var acc = start(finite_max);
    for (var r = 0u; r < outer; r++) {
        let row = reduce_row(base + strided_offset(r, 24u, 32u), u32(p(2u)), p(3u), shift, finite_max);
        acc = merge(finite_max, acc, row);
    }
    return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = linear_id(gid, nwg, WG);
    if (o >= u32(p(0u))) {
        return;
    }
    let count = u32(p(1u));
    if (count == 0u) {
        y[o] = bitcast<{{T}}>(p(4u));
        return;
    }
    let outer = count / u32(p(2u));
    let base = strided_offset(o, 8u, 16u);
    var shift = {{T}}(0);
    if (SHIFTED) {
        let largest = reduce_all(base, outer, shift, true);
        shift = select({{T}}(0), largest, largest > bitcast<{{T}}>(0xff800000u));  // 0 if none is finite
    }
    y[o] = finish(reduce_all(base, outer, shift, false), count, shift);
}
