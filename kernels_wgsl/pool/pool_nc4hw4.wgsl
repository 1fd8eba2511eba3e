// Max / average / Lp pooling over 2-D sliding windows on NC4HW4 feature maps (generated
// accessors, buffer or texture), a vec4 of 4 channels per pixel. {{COMBINE}} folds values v into
// the accumulator a (max, sum, or sum of |v|^p), {{FINISH}} maps it to the output (the p-th
// root for Lp). Taps outside the input are skipped: the result equals combining the fill (the
// lowest float for max, 0 for average and Lp). Average divides by the product of per-axis
// counts of taps within [lo, hi): the input, or with count_include_pad the input plus its
// declared pads (never the extra room ceil_mode adds).
// Each invocation computes one slice's row segment of p(2) output pixels along W (the index
// arithmetic is paid once per segment; the segment is shortened for big windows so the loops stay
// within llvmpipe's loop budget).
// params: 0 = invocations, 1 = segments per row, 2 = segment length, 3..4 = kernel H W,
// 5..6 = strides, 7..8 = dilations, 9..10 = pads (top, left), 11 = fill (f32 bits),
// 12 = divide (average), 13..14 = lo, hi along H, 15..16 = lo, hi along W, 17 = p (Lp, f32 bits),
// 20..24 x dims, 25..29 y dims (N, C4, H, W, C).
{{DECL_X}}
{{DECL_Y}}
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

fn combine(a: vec4<f32>, v: vec4<f32>) -> vec4<f32> {
    return {{COMBINE}};
}

// |v|^p and a^(1/p) for a general p (pow of 0 is left to no driver).
fn lp_pow(v: vec4<f32>) -> vec4<f32> {
    let m = abs(v);
    return select(pow(m, vec4<f32>(pf(17u))), vec4<f32>(0.0), m == vec4<f32>(0.0));
}

fn lp_root(a: vec4<f32>) -> vec4<f32> {
    return select(pow(a, vec4<f32>(1.0 / pf(17u))), vec4<f32>(0.0), a == vec4<f32>(0.0));
}

fn finish(a: vec4<f32>) -> vec4<f32> {
    return {{FINISH}};
}

// Taps t in [0, k) of a window starting at input index start with start + t * d in [lo, hi);
// divisions on non-negative operands only (GLSL leaves negative ones undefined).
fn counted(start: i32, k: i32, d: i32, lo: i32, hi: i32) -> i32 {
    if (hi - 1 - start < 0) {
        return 0;
    }
    var first = 0;
    if (start < lo) {
        first = (lo - start + d - 1) / d;
    }
    let last = min(k - 1, (hi - 1 - start) / d);
    return max(0, last - first + 1);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(22u); let wd = p(23u);
    let c4s = p(26u); let oh = p(27u); let ow = p(28u);
    let kh = p(3u); let kw = p(4u);
    var rest = index;
    let start = (rest % p(1u)) * p(2u); rest /= p(1u);
    let oy = rest % oh; rest /= oh;
    let c4 = rest % c4s;
    let n = rest / c4s;
    let sx = p(6u); let dy = p(7u); let dx = p(8u);
    let y0 = oy * p(5u) - p(9u);
    let fill = vec4<f32>(pf(11u));
    let divide = p(12u) != 0;
    // The window count along H is the same for the whole row segment.
    let rows = counted(y0, kh, dy, p(13u), p(14u));
    let stop = min(start + p(2u), ow);
    for (var ox = start; ox < stop; ox++) {
        let x0 = ox * sx - p(10u);
        var acc = fill;
        for (var ty = 0; ty < kh; ty++) {
            let iy = y0 + ty * dy;
            if (iy < 0 || iy >= h) {
                continue;
            }
            for (var tx = 0; tx < kw; tx++) {
                let ix = x0 + tx * dx;
                if (ix >= 0 && ix < wd) {
                    acc = combine(acc, load_x(n, c4, iy, ix));
                }
            }
        }
        if (divide) {
            acc = acc / f32(max(rows * counted(x0, kw, dx, p(15u), p(16u)), 1));
        }
        acc = finish(acc);
        store_y(n, c4, oy, ox, acc);
    }
}
