// Resize of a 4-D float tensor along H and W only, 4 channels at a time: each invocation computes a
// vec4 (one slice of 4 channels) for a row segment of up to p(2) output pixels along W, reading
// through the generated accessors load_x / store_y: NC4HW4 (buffer or texture), or the linear
// accessors of backends/wgpu/resize.py (4 channel planes gathered into a vec4). The H axis is set
// up once per segment, the W axis once per pixel, with no private arrays (resize.wgsl, with per-axis
// private arrays indexed at run time and index arithmetic over all dims, ran 12x slower on lavapipe).
// Source coordinates are the fixed point lines of resize.wgsl (x = A * y + B, 40 fractional bits,
// checked on the host against the numpy backend), so nearest indices match it exactly; both take
// source_position and cubic from resize/resample.wgsl.
// tf_crop_and_resize: positions outside [inside_lo, inside_hi] take the extrapolation value, times
// the weight sum of the axis the numpy backend applies after it (p(6): whether H goes first).
// params: 0 = invocations, 1 = segments per row, 2 = segment length, 3 = extrapolation value (f32
// bits), 4 = cubic a, 5 = flags (1 = exclude_outside, 2 = antialias), 6 = H applied before W,
// 7 = bilinear without extrapolation or normalisation (bilinear_row), 8..18 H axis and 19..29 W
// axis (11 slots each, as resize.wgsl: dim, in_len, A lo, A hi, B lo, B hi, inside_lo, inside_hi,
// taps, first tap, filter stretch; an axis left alone is the identity line with one tap),
// 30..34 x dims, 35..39 y dims (N, C4, H, W, C).
{{DECL_X}}
{{DECL_Y}}
@group(0) @binding(2) var<uniform> params: Params;
// include: resize/resample.wgsl
override WG: u32 = 64u;

const NEAREST: bool = {{NEAREST}};
const H_AXIS: u32 = 8u;
const W_AXIS: u32 = 19u;

// One axis at one output position.
struct Axis {
    len: i32,
    floor_x: i32,
    frac_x: f32,
    outside: bool,  // extrapolated (tf_crop_and_resize)
    taps: i32,
    first: i32,
    stretch: f32,
    factor: f32,  // weight normalisation (antialias, exclude_outside)
    sum: f32,  // the axis's weights summed: 1, or 0 when exclude_outside drops every tap
}

fn raw_weight(a: Axis, j: i32) -> f32 {
    let t = (f32(a.first + j) - a.frac_x) * a.stretch;
    return {{KERNEL}};
}

fn tap_inside(a: Axis, j: i32) -> bool {
    let index = a.floor_x + a.first + j;
    return index >= 0 && index < a.len;
}

fn weight(a: Axis, j: i32) -> f32 {
    return select(0.0, raw_weight(a, j) * a.factor, (pu(5u) & 1u) == 0u || tap_inside(a, j));
}

// Input index of tap j (edges replicate).
fn tap_index(a: Axis, j: i32) -> i32 {
    return clamp(a.floor_x + a.first + j, 0, a.len - 1);
}

fn axis_at(s: u32, pos: i32) -> Axis {
    let fixed = source_position(s, u32(pos));
    var a: Axis;
    a.len = p(s + 1u);
    a.floor_x = bitcast<i32>(fixed.y) >> 8u;  // arithmetic shift: negative positions floor down
    a.outside = pos < p(s + 6u) || pos > p(s + 7u);
    a.taps = 1;
    a.first = 0;
    a.stretch = 1.0;
    a.factor = 1.0;
    a.frac_x = 0.0;
    let excluded = (pu(5u) & 1u) != 0u && (a.floor_x < 0 || a.floor_x >= a.len);
    a.sum = select(1.0, 0.0, excluded);
    if (NEAREST) {
        return a;
    }
    a.sum = 1.0;
    a.frac_x = f32(fixed.y & 0xffu) * 0.00390625 + f32(fixed.x) * 9.094947017729282e-13;  // 2^-8, 2^-40
    a.taps = p(s + 8u);
    a.first = p(s + 9u);
    a.stretch = pf(s + 10u);
    // Antialias normalises the weights to sum 1; exclude_outside drops taps past the edges and
    // renormalises (a sum of 0 stays 0), in the numpy backend's order.
    if ((pu(5u) & 3u) == 0u) {
        return a;  // linear and cubic weights already sum to 1
    }
    var total = 0.0;
    var inside = 0.0;
    for (var j = 0; j < a.taps; j++) {
        let w = raw_weight(a, j);
        total += w;
        inside += select(0.0, w, tap_inside(a, j));
    }
    a.factor = select(1.0, 1.0 / total, (pu(5u) & 2u) != 0u);
    a.sum = total * a.factor;
    if ((pu(5u) & 1u) != 0u) {
        let kept = inside * a.factor;
        a.factor = a.factor / select(kept, 1.0, kept == 0.0);
        a.sum = inside * a.factor;
    }
    return a;
}

fn resampled(n: i32, c4: i32, ay: Axis, ax: Axis) -> vec4<f32> {
    if (NEAREST) {
        let v = load_x(n, c4, clamp(ay.floor_x, 0, ay.len - 1), clamp(ax.floor_x, 0, ax.len - 1));
        return v * (ay.sum * ax.sum);  // 0 where exclude_outside dropped the index, as numpy's weight
    }
    var acc = vec4<f32>(0.0);
    for (var jy = 0; jy < ay.taps; jy++) {
        let wy = weight(ay, jy);
        let iy = tap_index(ay, jy);
        for (var jx = 0; jx < ax.taps; jx++) {
            acc += (wy * weight(ax, jx)) * load_x(n, c4, iy, tap_index(ax, jx));
        }
    }
    return acc;
}

// Bilinear rows without extrapolation or weight normalisation (p(7) set; the common upsampling):
// each input column's two taps along H are blended once and kept while the next pixel reuses it,
// so 2x upsampling loads each input pixel about once per output row instead of 4 times per pixel.
fn bilinear_row(n: i32, c4: i32, oy: i32, start: i32, stop: i32, ay: Axis) {
    let y0 = tap_index(ay, 0);
    let y1 = tap_index(ay, 1);
    let wy0 = raw_weight(ay, 0);
    let wy1 = raw_weight(ay, 1);
    var xa = -1;
    var xb = -1;
    var ca = vec4<f32>(0.0);
    var cb = vec4<f32>(0.0);
    for (var ox = start; ox < stop; ox++) {
        let ax = axis_at(W_AXIS, ox);
        let x0 = tap_index(ax, 0);
        let x1 = tap_index(ax, 1);
        var c0: vec4<f32>;
        if (x0 == xb) {
            c0 = cb;
        } else if (x0 == xa) {
            c0 = ca;
        } else {
            c0 = wy0 * load_x(n, c4, y0, x0) + wy1 * load_x(n, c4, y1, x0);
        }
        var c1: vec4<f32>;
        if (x1 == x0) {
            c1 = c0;
        } else if (x1 == xb) {
            c1 = cb;
        } else {
            c1 = wy0 * load_x(n, c4, y0, x1) + wy1 * load_x(n, c4, y1, x1);
        }
        xa = x0;
        ca = c0;
        xb = x1;
        cb = c1;
        store_y(n, c4, oy, ox, raw_weight(ax, 0) * c0 + raw_weight(ax, 1) * c1);
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let c4s = p(36u); let oh = p(37u); let ow = p(38u);
    var rest = index;
    let start = (rest % p(1u)) * p(2u); rest /= p(1u);
    let oy = rest % oh; rest /= oh;
    let c4 = rest % c4s;
    let n = rest / c4s;
    let ay = axis_at(H_AXIS, oy);
    let stop = min(start + p(2u), ow);
    if (!NEAREST && p(7u) != 0) {
        bilinear_row(n, c4, oy, start, stop, ay);
        return;
    }
    let h_first = p(6u) != 0;
    let extrapolation = vec4<f32>(pf(3u));
    for (var ox = start; ox < stop; ox++) {
        let ax = axis_at(W_AXIS, ox);
        // Extrapolated positions: the value, weighed by the axis applied after the extrapolated one.
        var later_outside = ax.outside;
        var earlier_outside = ay.outside;
        var later_sum = ax.sum;
        if (!h_first) {
            later_outside = ay.outside;
            earlier_outside = ax.outside;
            later_sum = ay.sum;
        }
        var v: vec4<f32>;
        if (later_outside) {
            v = extrapolation;
        } else if (earlier_outside) {
            v = extrapolation * later_sum;
        } else {
            v = resampled(n, c4, ay, ax);
        }
        store_y(n, c4, oy, ox, v);
    }
}
