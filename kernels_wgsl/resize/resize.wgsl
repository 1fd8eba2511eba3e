// Resize: each output element gathers (nearest) or filters (linear, cubic, antialiased) its source
// elements over up to 4 resampled axes, taps of every axis combined (the weights are separable).
// An invocation computes 4 neighbours along the last dim, sharing the work of the other axes.
// Source coordinates are affine in the output position y: x = A * y + B, with A and B 64-bit fixed
// point numbers (40 fractional bits), so integer arithmetic gives the same index on every device
// and the host can check it against the numpy backend's (backends/wgpu/resize.py); for nearest,
// B also holds the rounding. source_position and cubic: resize/resample.wgsl.
// tf_crop_and_resize: positions outside [inside_lo, inside_hi] take the extrapolation value (times
// the weight sums of the axes the numpy backend applies after it, to match it exactly).
// params: 0 = output count, 1 = unit axes (4 - resampled axes), 2 = extrapolation value (32-bit
// word), 3 = cubic a, 4 = flags (1 = exclude_outside, 2 = antialias), 5..10 = output shape,
// 11..16 = input strides (rank 6, right-aligned), then 11 slots per axis from 17: the unit axes
// (outermost in the tap loops, where they cost least), then the resampled ones in the numpy
// backend's order: dim, in_len, A lo, A hi, B lo, B hi, inside_lo, inside_hi, taps, first tap,
// filter stretch.
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<uniform> params: Params;
// include: resize/resample.wgsl
override WG: u32 = 64u;

const NEAREST: bool = {{NEAREST}};
const AXES: u32 = 17u;
const SLOTS: u32 = 11u;

// State of each resampled axis k (application order) at the element being computed. Unused axes
// stay unit axes: one tap at offset 0 of weight 1 (kernel(0) = 1), never outside.
var<private> len: array<i32, 4>;
var<private> pos: array<i32, 4>;
var<private> stride: array<i32, 4>;
var<private> floor_x: array<i32, 4>;
var<private> frac_x: array<f32, 4>;
var<private> outside: array<bool, 4>;
var<private> excluded: array<bool, 4>;  // nearest: the index is past an edge and exclude_outside is set
var<private> taps: array<u32, 4>;
var<private> first: array<i32, 4>;
var<private> stretch: array<f32, 4>;
var<private> factor: array<f32, 4>;
var<private> sums: array<f32, 4>;  // the axis's weights summed (1, or 0 when all are excluded)

// floor of a fixed point position (arithmetic shift: negative positions floor down).
fn position_floor(fixed: vec2<u32>) -> i32 {
    return bitcast<i32>(fixed.y) >> 8u;
}

// The fractional part (40 bits) of a fixed point position, in [0, 1].
fn position_frac(fixed: vec2<u32>) -> f32 {
    return f32(fixed.y & 0xffu) * 0.00390625 + f32(fixed.x) * 9.094947017729282e-13;  // 2^-8, 2^-40
}

fn raw_weight(k: u32, j: u32) -> f32 {
    let t = (f32(first[k] + i32(j)) - frac_x[k]) * stretch[k];
    return {{KERNEL}};
}

fn tap_inside(k: u32, j: u32) -> bool {
    let index = floor_x[k] + first[k] + i32(j);
    return index >= 0 && index < len[k];
}

fn weight(k: u32, j: u32) -> f32 {
    return select(0.0, raw_weight(k, j) * factor[k], (pu(4u) & 1u) == 0u || tap_inside(k, j));
}

// Element offset of tap j of axis k, relative to the output position (edges replicate).
fn tap_offset(k: u32, j: u32) -> i32 {
    return (clamp(floor_x[k] + first[k] + i32(j), 0, len[k] - 1) - pos[k]) * stride[k];
}

fn unit_axis(k: u32) {
    len[k] = 1;
    pos[k] = 0;
    stride[k] = 0;
    floor_x[k] = 0;
    frac_x[k] = 0.0;
    outside[k] = false;
    excluded[k] = false;
    taps[k] = 1u;
    first[k] = 0;
    stretch[k] = 1.0;
    factor[k] = 1.0;
    sums[k] = 1.0;
}

// Axis k at output position y along its dim.
fn setup_axis(k: u32, y: u32) {
    let s = AXES + k * SLOTS;
    let fixed = source_position(s, y);
    len[k] = p(s + 1u);
    pos[k] = i32(y);
    stride[k] = p(11u + u32(p(s)));
    floor_x[k] = position_floor(fixed);
    outside[k] = i32(y) < p(s + 6u) || i32(y) > p(s + 7u);
    excluded[k] = (pu(4u) & 1u) != 0u && (floor_x[k] < 0 || floor_x[k] >= len[k]);
    if (NEAREST) {
        return;
    }
    frac_x[k] = position_frac(fixed);
    taps[k] = u32(p(s + 8u));
    first[k] = p(s + 9u);
    stretch[k] = pf(s + 10u);
    // Antialias normalises the weights to sum 1; exclude_outside drops taps past the edges and
    // renormalises (a sum of 0 stays 0), in the numpy backend's order.
    if ((pu(4u) & 3u) == 0u) {
        return;  // linear and cubic weights already sum to 1: factor and sums stay 1
    }
    var total = 0.0;
    var inside = 0.0;
    for (var j = 0u; j < taps[k]; j++) {
        let w = raw_weight(k, j);
        total += w;
        inside += select(0.0, w, tap_inside(k, j));
    }
    factor[k] = select(1.0, 1.0 / total, (pu(4u) & 2u) != 0u);
    sums[k] = total * factor[k];
    if ((pu(4u) & 1u) != 0u) {
        let kept = inside * factor[k];
        factor[k] = factor[k] / select(kept, 1.0, kept == 0.0);
        sums[k] = inside * factor[k];
    }
}

// The last axis (application order) whose position is extrapolated, or -1.
fn last_outside() -> i32 {
    var last = -1;
    for (var k = 0; k < 4; k++) {
        if (outside[k]) {
            last = k;
        }
    }
    return last;
}

fn nearest_value(base: i32) -> {{T}} {
    let extrapolated = last_outside();
    var at = base;
    var zeroed = false;  // weight 0 from exclude_outside (on an axis applied after the extrapolated one)
    for (var k = 0; k < 4; k++) {
        at += (clamp(floor_x[k], 0, len[k] - 1) - pos[k]) * stride[k];
        zeroed = zeroed || (excluded[k] && k > extrapolated);
    }
    var v: {{T}};
    if (extrapolated >= 0) {
        v = bitcast<{{T}}>(p(2u));
    } else {
        v = x[at];
    }
    return select(v, v * {{ZERO}}, zeroed);
}

fn filtered_value(base: i32) -> {{T}} {
    let extrapolated = last_outside();
    if (extrapolated >= 0) {
        var v = bitcast<f32>(p(2u));
        for (var k = extrapolated + 1; k < 4; k++) {
            v *= sums[k];
        }
        return {{T}}(v);
    }
    var acc = 0.0;
    for (var j0 = 0u; j0 < taps[0]; j0++) {
        let w0 = weight(0u, j0);
        let at0 = base + tap_offset(0u, j0);
        for (var j1 = 0u; j1 < taps[1]; j1++) {
            let w1 = w0 * weight(1u, j1);
            let at1 = at0 + tap_offset(1u, j1);
            for (var j2 = 0u; j2 < taps[2]; j2++) {
                let w2 = w1 * weight(2u, j2);
                let at2 = at1 + tap_offset(2u, j2);
                for (var j3 = 0u; j3 < taps[3]; j3++) {
                    acc += w2 * weight(3u, j3) * f32(x[at2 + tap_offset(3u, j3)]);
                }
            }
        }
    }
    return {{T}}(acc);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let width = u32(p(10u));
    let blocks = (width + 3u) / 4u;
    let id = linear_id(gid, nwg, WG);
    if (id >= u32(p(0u)) / width * blocks) {
        return;
    }
    let row = id / blocks;
    let col0 = (id % blocks) * 4u;
    // The row's coordinates in dims 0..4; base = its offset in the input (resampled dims included
    // at their output position: tap offsets are relative to it).
    var coord: array<u32, 6>;
    var rest = row;
    var base = 0;
    for (var d = 4; d >= 0; d--) {
        let size = u32(p(5u + u32(d)));
        coord[d] = rest % size;
        rest = rest / size;
        base += i32(coord[d]) * p(11u + u32(d));
    }
    let units = u32(p(1u));
    for (var k = 0u; k < 4u; k++) {
        unit_axis(k);
        if (k >= units && p(AXES + k * SLOTS) != 5) {
            setup_axis(k, coord[p(AXES + k * SLOTS)]);
        }
    }
    for (var c = 0u; c < 4u; c++) {
        let col = col0 + c;
        if (col >= width) {
            return;
        }
        for (var k = 0u; k < 4u; k++) {  // constant bounds: the compiler can unroll and keep state in registers
            if (k >= units && p(AXES + k * SLOTS) == 5) {
                setup_axis(k, col);
            }
        }
        let at = base + i32(col) * p(16u);
        if (NEAREST) {
            y[row * width + col] = nearest_value(at);
        } else {
            y[row * width + col] = filtered_value(at);
        }
    }
}
