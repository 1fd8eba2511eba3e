// GridSample of X (N, C, [D,] H, W) at grid (N, [Do,] Ho, Wo, r) positions (x along W, y along H,
// z along D; r = 2 or 3 coordinates). Invocation id = ((n * channel_blocks + block) * positions +
// position): one output position and 4 channels, which share its coordinates, taps and weights.
// As the ONNX reference: coordinates are f32; nearest rounds half to even before the padding mode
// moves a coordinate inside; taps outside the image read 0 (zeros), the edge (border) or their
// mirror image (reflection); interpolation runs along x first, then y, then z.
// params: 0 = invocations, 1 = C, 2 = D (1 for 2-D), 3 = H, 4 = W, 5 = output positions,
// 6 = channel blocks, 7 = align_corners, 8 = padding (0 zeros, 1 border, 2 reflection), 9 = r.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> grid: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

const TAPS: u32 = {{TAPS}}u;  // taps per axis: 1 nearest, 2 linear, 4 cubic
const MODE: u32 = {{MODE}}u;  // 0 nearest, 1 linear, 2 cubic

// Per axis (0 = x, 1 = y, 2 = z): tap indices (already inside the image), weights, and whether the tap
// reads the image (false: a zeros-padding tap outside it).
var<private> tap_index: array<array<i32, 4>, 3>;
var<private> tap_weight: array<array<f32, 4>, 3>;
var<private> tap_valid: array<array<bool, 4>, 3>;

// Mirror a coordinate into [lo, hi], folding at the nearer edge as often as needed.
fn reflect_f32(v: f32, lo: f32, hi: f32) -> f32 {
    let span = hi - lo;
    if (span <= 0.0) {
        return lo;
    }
    var dx = v - hi;
    if (v < lo) {
        dx = lo - v;
    }
    let flips = floor(dx / span);
    let rest = dx - flips * span;
    let even = (u32(flips) & 1u) == 0u;
    if (v < lo) {
        return select(hi - rest, lo + rest, even);
    }
    return select(lo + rest, hi - rest, even);
}

// The pixel an integer tap position reads under reflection: mirror about -0.5 and len - 0.5
// (or 0 and len - 1 with align_corners), with the period of the mirrored pattern.
fn reflect_index(i: i32, len: i32, align: bool) -> i32 {
    if (align) {
        if (len == 1) {
            return 0;
        }
        let m = wg_mod_i32(i, 2 * (len - 1));
        return select(m, 2 * (len - 1) - m, m > len - 1);
    }
    let m = wg_mod_i32(i, 2 * len);
    return select(m, 2 * len - 1 - m, m >= len);
}

fn cubic_near(s: f32) -> f32 {
    return (1.25 * s - 2.25) * s * s + 1.0;  // a = -0.75: (a + 2) s^3 - (a + 3) s^2 + 1
}

fn cubic_far(s: f32) -> f32 {
    return ((-0.75 * s + 3.75) * s - 6.0) * s + 3.0;  // a s^3 - 5a s^2 + 8a s - 4a
}

fn setup_axis(axis: u32, g: f32, len: i32) {
    let align = p(7u) != 0;
    let padding = p(8u);
    let lenf = f32(len);
    var lo = -0.5;
    var hi = lenf - 0.5;
    var v = ((g + 1.0) * lenf - 1.0) / 2.0;
    if (align) {
        lo = 0.0;
        hi = lenf - 1.0;
        v = (g + 1.0) / 2.0 * (lenf - 1.0);
    }
    if (MODE == 0u) {
        v = round(v);  // half to even, as numpy's rint
    }
    if (v < lo || v > hi) {
        if (padding == 1 && MODE != 2u) {  // cubic clamps its taps only (PyTorch, onnxruntime)
            v = clamp(v, 0.0, lenf - 1.0);
        } else if (padding == 2) {
            v = reflect_f32(v, lo, hi);
        }
    }
    let base = floor(v);
    let t = v - base;
    // Clamped before the conversion: out-of-range float -> int conversions differ between drivers.
    let start = i32(clamp(select(base, trunc(v), MODE == 0u), -8.0, lenf + 8.0)) - select(0, 1, MODE == 2u);
    for (var j = 0u; j < TAPS; j++) {
        let i = start + i32(j);
        var w = 1.0;
        if (MODE == 1u) {
            w = select(1.0 - t, t, j == 1u);
        } else if (MODE == 2u) {
            let s = abs(f32(i32(j) - 1) - t);  // distance from the tap: t + 1, t, 1 - t, 2 - t
            w = select(cubic_near(s), cubic_far(s), j == 0u || j == 3u);
        }
        tap_weight[axis][j] = w;
        tap_valid[axis][j] = padding != 0 || (i >= 0 && i < len);
        if (padding == 2) {
            tap_index[axis][j] = reflect_index(i, len, align);
        } else {
            tap_index[axis][j] = clamp(i, 0, len - 1);
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = linear_id(gid, nwg, WG);
    if (id >= u32(p(0u))) {
        return;
    }
    let channels = u32(p(1u));
    let depth = p(2u);
    let height = p(3u);
    let width = p(4u);
    let positions = u32(p(5u));
    let blocks = u32(p(6u));
    let r = u32(p(9u));
    let pos = id % positions;
    let block = (id / positions) % blocks;
    let n = id / (positions * blocks);
    let at = (n * positions + pos) * r;
    setup_axis(0u, grid[at], width);
    setup_axis(1u, grid[at + 1u], height);
    var z_taps = 1u;  // 2-D: one z tap at 0 of weight 1
    tap_index[2][0] = 0;
    tap_weight[2][0] = 1.0;
    tap_valid[2][0] = true;
    if (r == 3u) {
        setup_axis(2u, grid[at + 2u], depth);
        z_taps = TAPS;
    }
    let plane = u32(height * width);
    for (var cc = 0u; cc < 4u; cc++) {
        let c = block * 4u + cc;
        if (c >= channels) {
            return;
        }
        let volume = (n * channels + c) * u32(depth) * plane;
        var acc = 0.0;
        for (var tz = 0u; tz < z_taps; tz++) {
            let image = volume + u32(tap_index[2][tz]) * plane;
            var area = 0.0;
            for (var ty = 0u; ty < TAPS; ty++) {
                let row = image + u32(tap_index[1][ty] * width);
                var line = 0.0;
                for (var tx = 0u; tx < TAPS; tx++) {
                    if (tap_valid[2][tz] && tap_valid[1][ty] && tap_valid[0][tx]) {
                        line += tap_weight[0][tx] * x[row + u32(tap_index[0][tx])];
                    }
                }
                area += tap_weight[1][ty] * line;
            }
            acc += tap_weight[2][tz] * area;
        }
        y[(n * channels + c) * positions + pos] = acc;
    }
}
