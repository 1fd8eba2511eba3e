// Max / average / Lp pooling over sliding windows, 1-D/2-D/3-D as D x H x W: x and y NCDHW.
// {{COMBINE}} folds values v into the accumulator a (max, sum, or sum of |v|^p), {{FINISH}}
// maps the accumulator a to the output (the p-th root for Lp). Taps outside the input read
// the fill value (the lowest float for max, 0 for average and Lp). Average divides by the product of
// per-axis counts of taps within [lo, hi): the input, or with count_include_pad the input plus
// its declared pads (never the extra room ceil_mode adds).
// Each invocation computes one (n, c) plane's row segment of p(6) output pixels along W, 4 at a
// time (the index arithmetic, integer divisions, is paid once per segment).
// params: 0 = invocations, 6 = segment length (a multiple of 4), 7 = segments per row,
// 8..10 = input D H W, 12..14 = output D H W, 16..18 = kernel D H W, 20..22 = strides,
// 24..26 = dilations, 28..30 = pads (begin),
// 31 = fill (f32 bits), 32 = divide (average), 33 = p (Lp, f32 bits), 36..38 = lo per axis,
// 40..42 = hi per axis.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

fn combine(a: vec4<f32>, v: vec4<f32>) -> vec4<f32> {
    return {{COMBINE}};
}

// |v|^p and a^(1/p) for a general p (pow of 0 is left to no driver).
fn lp_pow(v: vec4<f32>) -> vec4<f32> {
    let m = abs(v);
    return select(pow(m, vec4<f32>(pf(33u))), vec4<f32>(0.0), m == vec4<f32>(0.0));
}

fn lp_root(a: vec4<f32>) -> vec4<f32> {
    return select(pow(a, vec4<f32>(1.0 / pf(33u))), vec4<f32>(0.0), a == vec4<f32>(0.0));
}

fn finish(a: vec4<f32>) -> vec4<f32> {
    return {{FINISH}};
}

// Taps of windows starting at input index start (per lane) that fall within [lo, hi) of axis.
fn counted(start: vec4<i32>, axis: u32) -> vec4<f32> {
    var count = vec4<f32>(0.0);
    let lo = vec4<i32>(p(36u + axis));
    let hi = vec4<i32>(p(40u + axis));
    for (var t = 0; t < p(16u + axis); t++) {
        let i = start + vec4<i32>(t * p(24u + axis));
        count += select(vec4<f32>(0.0), vec4<f32>(1.0), (i >= lo) & (i < hi));
    }
    return count;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = linear_id(gid, nwg, WG);
    if (index >= pu(0u)) {
        return;
    }
    let d = p(8u); let h = p(9u); let wd = p(10u);
    let od = p(12u); let oh = p(13u); let ow = p(14u);
    let kd = p(16u); let kh = p(17u); let kw = p(18u);
    var rest = i32(index);
    let start = (rest % p(7u)) * p(6u); rest /= p(7u);
    let oy = rest % oh; rest /= oh;
    let oz = rest % od; rest /= od;
    let plane = rest;

    let xbase = plane * d * h * wd;
    let sx = p(22u);
    let dx = p(26u);
    let z0 = oz * p(20u) - p(28u);
    let y0 = oy * p(21u) - p(29u);
    let fill = vec4<f32>(pf(31u));
    let divide = p(32u) != 0;
    // Window counts along D and H are the same for the whole row segment.
    let rows = counted(vec4<i32>(z0), 0u) * counted(vec4<i32>(y0), 1u);
    let out = plane * od * oh * ow + (oz * oh + oy) * ow;
    let stop = min(start + p(6u), ow);
    for (var ox0 = start; ox0 < stop; ox0 += 4) {
        let x0 = vec4<i32>(ox0 * sx - p(30u)) + vec4<i32>(0, 1, 2, 3) * sx;
        var acc = fill;
        for (var tz = 0; tz < kd; tz++) {
            let iz = z0 + tz * p(24u);
            for (var ty = 0; ty < kh; ty++) {
                let iy = y0 + ty * p(25u);
                if (iz < 0 || iz >= d || iy < 0 || iy >= h) {
                    acc = combine(acc, fill);
                    continue;
                }
                let row = xbase + (iz * h + iy) * wd;
                for (var tx = 0; tx < kw; tx++) {
                    let ix = x0 + vec4<i32>(tx * dx);
                    let inside = (ix >= vec4<i32>(0)) & (ix < vec4<i32>(wd));
                    let xi = vec4<i32>(row) + clamp(ix, vec4<i32>(0), vec4<i32>(wd - 1));
                    acc = combine(acc, select(fill, vec4<f32>(x[xi.x], x[xi.y], x[xi.z], x[xi.w]), inside));
                }
            }
        }
        if (divide) {
            acc = acc / max(rows * counted(x0, 2u), vec4<f32>(1.0));
        }
        acc = finish(acc);
        for (var k = 0; k < min(stop - ox0, 4); k++) {
            y[out + ox0 + k] = acc[k];
        }
    }
}
