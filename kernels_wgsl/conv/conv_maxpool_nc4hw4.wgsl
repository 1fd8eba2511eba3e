// ConvMaxPool on NC4HW4 feature maps (x, y, z through generated accessors, buffer or texture): a
// 2-D conv (any strides, dilations, pads, groups; bias, fused activation {{ACT}}) and the max
// pooling of its output in one pass, y = maxpool(act(conv(x) + b)); z, when the op keeps it, is
// the conv output itself (store_z does nothing otherwise).
// (Stem convs, one group and one input slice, under windows that tile the conv output run
// conv_stem_maxpool_nc4hw4.wgsl, weights as literals: backends/wgpu/conv_pool.stem_pool_block.)
// Each invocation computes SLICES output slices (up to 4, sharing their input loads; 1 where
// neighbouring slices read different input slices, e.g. depthwise) x p(23) <= 4 pooled pixels of
// one pooled row. It walks the conv rows of the pooled windows one at a time: per row, 8 conv
// outputs along W per slice (the columns of the p(23) windows: p(23) is chosen so they fit), as
// conv4_nc4hw4.wgsl (or, where the W stride equals the W dilation, conv_slide_nc4hw4.wgsl)
// computes them, then bias and activation, the optional store to z, and the max into each pooled
// pixel whose window holds them. Conv rows and columns outside the conv output take no part
// (MaxPool pads with -inf), so nothing is padded. Overlapping windows compute the conv outputs
// they share again in each invocation; for windows as large as their strides (2x2 / 2) every conv
// output is computed once. With z, the grid covers every conv output (such windows tile it; cells
// past the pooled output store z only).
// Weights: [tap][output slice][input slice k of its range][4 columns: input lane j] -> vec4 over
// the output slice's channels (zero outside the slice's group and past the channels); output slice
// o reads input slices lo(o) .. lo(o) + p(5) - 1, lo(o) = min((4 o / mg) * cg / 4, C4_in - p(5)).
// DEPTHWISE: [tap][slice] -> vec4 over the slice's channels, multiplied lane by lane.
// params: 0 = invocations, 1 = pooled column blocks (of p(23)), 2 = pooled rows (cells), 3 = slice
// groups (of SLICES), 4 = weight vec4s per output slice and tap (4 p(5), 1 for DEPTHWISE), 5 = input
// slices per output slice, 6..7 = kernel H W, 8..9 = strides, 10..11 = dilations, 12..13 = pads
// (top, left), 14 = has bias, 15 = alpha, 16 = beta (f32 bits), 17..18 = pool kernel H W,
// 19..20 = pool strides, 21..22 = pool pads (top, left), 23 = pooled pixels per invocation,
// 24 = stores z, 25 = input channels per group (cg), 26 = output channels per group (mg), 27 = -inf
// (f32 bits), 28..32 x dims, 33..37 y dims, 38..42 z dims (the conv output's: N, C4, H, W, C).
// FLOAT is the multiply type of inputs and weights: 32-bit floats, or 16-bit ones for precision
// fp16-arith; the sums run in ACC (32-bit: each slice's 4 products added into 32-bit sums, as in
// conv4_nc4hw4.wgsl). Bias, activation and the pooled maxima are 32-bit. No type names in
// comments: the loader enables 16-bit floats wherever their name appears.
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_Z}}
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;
// Output slices per invocation (1 to 4), whether neighbouring W taps share loaded columns (the W
// stride equals the W dilation), and depthwise weights: fixed by the op's weights and attributes,
// so a resize compiles nothing; constants, so the unused slices' sums take no registers (on
// lavapipe, a 4-slice kernel running 2 slices took 1.3x the time of one built for 2).
override SLICES: i32 = 4;
override SLIDE: bool = false;
override DEPTHWISE: bool = false;

// include: conv/activation.wgsl

fn weights(i: i32) -> mat4x4<{{FLOAT}}> {
    return mat4x4<{{FLOAT}}>(vec4<{{FLOAT}}>(w[i]), vec4<{{FLOAT}}>(w[i + 1]), vec4<{{FLOAT}}>(w[i + 2]),
                             vec4<{{FLOAT}}>(w[i + 3]));
}

// acc (one slice's sums of the row's 8 conv outputs) plus m times the 8 input pixels.
fn mac(acc: array<vec4<{{ACC}}>, 8>, m: mat4x4<{{FLOAT}}>, x: array<vec4<{{FLOAT}}>, 8>) -> array<vec4<{{ACC}}>, 8> {
    return array<vec4<{{ACC}}>, 8>(acc[0] + vec4<{{ACC}}>(m * x[0]), acc[1] + vec4<{{ACC}}>(m * x[1]),
                                   acc[2] + vec4<{{ACC}}>(m * x[2]), acc[3] + vec4<{{ACC}}>(m * x[3]),
                                   acc[4] + vec4<{{ACC}}>(m * x[4]), acc[5] + vec4<{{ACC}}>(m * x[5]),
                                   acc[6] + vec4<{{ACC}}>(m * x[6]), acc[7] + vec4<{{ACC}}>(m * x[7]));
}

// Bias and activation of slice o's 8 conv outputs of conv row cy from column cx0, their store to z
// (those inside the conv output), and the max of each pooled pixel j's window (columns j * stride
// .. j * stride + kernel - 1 of the 8) into pooled[j]. Columns outside the conv output take no part.
fn fold(n: i32, o: i32, cy: i32, cx0: i32, acc: array<vec4<{{ACC}}>, 8>, pooled: array<vec4<f32>, 4>)
        -> array<vec4<f32>, 4> {
    var b = vec4<f32>(0.0);
    if (p(14u) != 0) {
        b = bias[o];
    }
    let alpha = pf(15u);
    let beta = pf(16u);
    let lowest = vec4<f32>(pf(27u));
    let width = p(41u);
    let keep = p(24u) != 0;
    var v: array<vec4<f32>, 8>;
    for (var i = 0; i < 8; i++) {
        let s = vec4<f32>(acc[i]) + b;
        let out = act4(s, alpha, beta);
        let col = cx0 + i;
        let inside = col >= 0 && col < width;
        if (keep && inside) {
            store_z(n, o, cy, col, vec4<{{FLOAT}}>(out));
        }
        v[i] = select(lowest, out, inside);
    }
    let k = p(18u);
    let stride = p(20u);
    var m = pooled;
    for (var j = 0; j < 4; j++) {
        let first = j * stride;
        for (var i = 0; i < 8; i++) {
            if (i >= first && i < first + k) {
                m[j] = max(m[j], v[i]);
            }
        }
    }
    return m;
}

// Store slice o's pooled pixels (pooled row py, from column px0) that exist.
fn put(n: i32, o: i32, py: i32, px0: i32, m: array<vec4<f32>, 4>) {
    if (py >= p(35u)) {
        return;
    }
    for (var j = 0; j < 4; j++) {
        if (j < p(23u) && px0 + j < p(36u)) {
            store_y(n, o, py, px0 + j, vec4<{{FLOAT}}>(m[j]));
        }
    }
}

// The sums of the invocation's output slices (those past SLICES are never touched).
struct Sums {
    s0: array<vec4<{{ACC}}>, 8>,
    s1: array<vec4<{{ACC}}>, 8>,
    s2: array<vec4<{{ACC}}>, 8>,
    s3: array<vec4<{{ACC}}>, 8>,
}

// Depthwise: acc plus the slice's per-channel weights k times the 8 input pixels.
fn scale(acc: array<vec4<{{ACC}}>, 8>, k: vec4<{{FLOAT}}>, x: array<vec4<{{FLOAT}}>, 8>) -> array<vec4<{{ACC}}>, 8> {
    return array<vec4<{{ACC}}>, 8>(acc[0] + vec4<{{ACC}}>(k * x[0]), acc[1] + vec4<{{ACC}}>(k * x[1]),
                                   acc[2] + vec4<{{ACC}}>(k * x[2]), acc[3] + vec4<{{ACC}}>(k * x[3]),
                                   acc[4] + vec4<{{ACC}}>(k * x[4]), acc[5] + vec4<{{ACC}}>(k * x[5]),
                                   acc[6] + vec4<{{ACC}}>(k * x[6]), acc[7] + vec4<{{ACC}}>(k * x[7]));
}

// One input slice's 8 pixels xs times the weights of each of the `slices` output slices
// (4x4 matrices at wi, ws vec4s apart).
fn accumulate(sums: Sums, slices: i32, wi: i32, ws: i32, xs: array<vec4<{{FLOAT}}>, 8>) -> Sums {
    var out = sums;
    if (DEPTHWISE) {
        out.s0 = scale(out.s0, vec4<{{FLOAT}}>(w[wi]), xs);
        return out;
    }
    out.s0 = mac(out.s0, weights(wi), xs);
    if (SLICES > 1 && slices > 1) { out.s1 = mac(out.s1, weights(wi + ws), xs); }
    if (SLICES > 2 && slices > 2) { out.s2 = mac(out.s2, weights(wi + 2 * ws), xs); }
    if (SLICES > 3 && slices > 3) { out.s3 = mac(out.s3, weights(wi + 3 * ws), xs); }
    return out;
}

// Input pixel (n, c4, iy, col), or zeros where col is outside the row (padding).
fn tap(n: i32, c4: i32, iy: i32, col: i32) -> vec4<{{FLOAT}}> {
    let wd = p(31u);
    return select(vec4<{{FLOAT}}>(0.0), load_x(n, c4, iy, clamp(col, 0, wd - 1)), col >= 0 && col < wd);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(30u); let wd = p(31u);
    let o4s = p(34u);
    let kh = p(6u); let kw = p(7u);
    // Pooled column block fastest (neighbouring invocations read neighbouring input), then pooled
    // rows, slice groups, batch.
    var rest = index;
    let px0 = (rest % p(1u)) * p(23u); rest /= p(1u);
    let py = rest % p(2u); rest /= p(2u);
    let group = rest % p(3u);
    let n = rest / p(3u);
    let o0 = group * SLICES;
    let slices = min(SLICES, o4s - o0);
    let count = p(5u);
    let lo = min(((4 * o0) / p(26u)) * p(25u) / 4, p(29u) - count);
    let cx0 = px0 * p(20u) - p(22u);  // first conv column of the 8
    let cy0 = py * p(19u) - p(21u);  // first conv row of the windows
    let sy = p(8u); let sx = p(9u); let dy = p(10u); let dx = p(11u);
    let c0 = cx0 * sx - p(13u);  // input column of conv output 0 at W tap 0
    let la = vec4<i32>(c0) + vec4<i32>(0, 1, 2, 3) * sx;  // outputs 0-3
    let lb = la + vec4<i32>(4 * sx);  // outputs 4-7
    let ws = p(4u);  // vec4s from one output slice's weights to the next
    let zero = vec4<{{FLOAT}}>(0.0);
    let none = vec4<{{ACC}}>(0.0);
    let empty = array<vec4<{{ACC}}>, 8>(none, none, none, none, none, none, none, none);
    let lowest = vec4<f32>(pf(27u));
    let start = array<vec4<f32>, 4>(lowest, lowest, lowest, lowest);
    var m0 = start; var m1 = start; var m2 = start; var m3 = start;
    for (var r = 0; r < p(17u); r++) {
        let cy = cy0 + r;
        if (cy < 0 || cy >= p(40u)) {
            continue;
        }
        var sums = Sums(empty, empty, empty, empty);
        for (var ty = 0; ty < kh; ty++) {
            let iy = cy * sy - p(12u) + ty * dy;
            if (iy < 0 || iy >= h) {
                continue;
            }
            if (SLIDE) {
                // Output i reads column c0 + (i + tx) * sx at W tap tx: each tap shifts the 8
                // loaded columns by one and loads one more.
                var wrow = (ty * kw * o4s + o0) * ws;
                for (var k = lo; k < lo + count; k++) {
                    var xs = array<vec4<{{FLOAT}}>, 8>(tap(n, k, iy, c0), tap(n, k, iy, c0 + sx),
                        tap(n, k, iy, c0 + 2 * sx), tap(n, k, iy, c0 + 3 * sx), tap(n, k, iy, c0 + 4 * sx),
                        tap(n, k, iy, c0 + 5 * sx), tap(n, k, iy, c0 + 6 * sx), tap(n, k, iy, c0 + 7 * sx));
                    var wi = wrow;
                    for (var tx = 0; tx < kw; tx++) {
                        if (tx > 0) {
                            xs = array<vec4<{{FLOAT}}>, 8>(xs[1], xs[2], xs[3], xs[4], xs[5], xs[6], xs[7],
                                                           tap(n, k, iy, c0 + (7 + tx) * sx));
                        }
                        sums = accumulate(sums, slices, wi, ws, xs);
                        wi += o4s * ws;
                    }
                    wrow += 4;
                }
            } else {
                for (var tx = 0; tx < kw; tx++) {
                    let ia = la + vec4<i32>(tx * dx);
                    let ib = lb + vec4<i32>(tx * dx);
                    let ma = (ia >= vec4<i32>(0)) & (ia < vec4<i32>(wd));
                    let mb = (ib >= vec4<i32>(0)) & (ib < vec4<i32>(wd));
                    let ca = clamp(ia, vec4<i32>(0), vec4<i32>(wd - 1));
                    let cb = clamp(ib, vec4<i32>(0), vec4<i32>(wd - 1));
                    var wi = ((ty * kw + tx) * o4s + o0) * ws;
                    for (var k = lo; k < lo + count; k++) {
                        let xs = array<vec4<{{FLOAT}}>, 8>(
                            select(zero, load_x(n, k, iy, ca.x), ma.x), select(zero, load_x(n, k, iy, ca.y), ma.y),
                            select(zero, load_x(n, k, iy, ca.z), ma.z), select(zero, load_x(n, k, iy, ca.w), ma.w),
                            select(zero, load_x(n, k, iy, cb.x), mb.x), select(zero, load_x(n, k, iy, cb.y), mb.y),
                            select(zero, load_x(n, k, iy, cb.z), mb.z), select(zero, load_x(n, k, iy, cb.w), mb.w));
                        sums = accumulate(sums, slices, wi, ws, xs);
                        wi += 4;
                    }
                }
            }
        }
        m0 = fold(n, o0, cy, cx0, sums.s0, m0);
        if (SLICES > 1 && slices > 1) { m1 = fold(n, o0 + 1, cy, cx0, sums.s1, m1); }
        if (SLICES > 2 && slices > 2) { m2 = fold(n, o0 + 2, cy, cx0, sums.s2, m2); }
        if (SLICES > 3 && slices > 3) { m3 = fold(n, o0 + 3, cy, cx0, sums.s3, m3); }
    }
    put(n, o0, py, px0, m0);
    if (SLICES > 1 && slices > 1) { put(n, o0 + 1, py, px0, m1); }
    if (SLICES > 2 && slices > 2) { put(n, o0 + 2, py, px0, m2); }
    if (SLICES > 3 && slices > 3) { put(n, o0 + 3, py, px0, m3); }
}
