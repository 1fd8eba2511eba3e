// Shared helpers appended to every kernel by the loader (backends/wgpu/loader.py).

// Parameters (shapes, strides, scalars) travel in a uniform block of 64 ints; p(i) reads one.
struct Params { v: array<vec4<i32>, 16> }

fn p(i: u32) -> i32 {
    return params.v[i / 4u][i % 4u];
}

fn pu(i: u32) -> u32 {
    return bitcast<u32>(p(i));
}

fn pf(i: u32) -> f32 {
    return bitcast<f32>(p(i));
}

fn is_nan_f32(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Linear invocation index over a 2-D dispatch grid (65535 workgroups per dimension limit).
fn linear_id(gid: vec3<u32>, nwg: vec3<u32>, wg: u32) -> u32 {
    return gid.x + gid.y * nwg.x * wg;
}

// erf for f32: a series near 0, a Chebyshev fit of erfc elsewhere (Numerical Recipes 6.2,
// fractional error < 1.2e-7), matching the numpy backend's formula.
fn wg_erf(x: f32) -> f32 {
    let a = abs(x);
    if (a < 0.5) {
        let x2 = x * x;
        var term = x;
        var sum = 0.0;
        for (var n = 0u; n < 6u; n++) {
            sum += term / f32(2u * n + 1u);
            term = -term * x2 / f32(n + 1u);
        }
        return sum * 1.1283791670955126;
    }
    let t = 1.0 / (1.0 + 0.5 * a);
    let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return sign(x) * (1.0 - t * exp(-a * a + poly));
}

// tanh that stays finite for large |x| on every driver, and keeps its relative precision near 0
// (drivers that compute it from exp(2x) - 1 lose it there).
fn wg_tanh(x: f32) -> f32 {
    return select(tanh(clamp(x, -15.0, 15.0)), x * (1.0 - x * x / 3.0), abs(x) < 0.05);
}

// pow with ONNX/numpy results for negative bases and integral exponents.
fn wg_pow(a: f32, b: f32) -> f32 {
    if (a < 0.0 && b == floor(b)) {
        let m = pow(-a, b);
        return select(m, -m, (i32(b) & 1) == 1);
    }
    return pow(a, b);
}

// Truncated integer remainder (sign of the dividend) computed on magnitudes: GLSL leaves % on
// negative operands undefined, and wgpu's GL backend passes it through.
fn wg_rem_i32(x: i32, y: i32) -> i32 {
    let r = i32(u32(abs(x)) % u32(abs(y)));
    return select(r, -r, x < 0);
}

// log(1 + t) without losing t when it is tiny (WGSL has no log1p).
fn wg_log1p(t: f32) -> f32 {
    return select(log(1.0 + t), t * (1.0 - 0.5 * t), abs(t) < 1e-4);
}

// fmod(x, y) exact (the remainder of floats is always representable), as C/numpy: long division
// of the integer significands, 8 bits per step. The float formula x - y * trunc(x / y) is wrong
// once x / y passes 2^24 or rounds up to the next integer.
fn wg_fmod_exact(x: f32, y: f32) -> f32 {
    let ax = bitcast<u32>(x) & 0x7fffffffu;
    let ay = bitcast<u32>(y) & 0x7fffffffu;
    if (ax >= 0x7f800000u || ay > 0x7f800000u || ay == 0u) {
        return bitcast<f32>(0x7fc00000u | ax);  // NaN, built at run time (WGSL rejects constant NaNs)
    }
    if (ax < ay || ay == 0x7f800000u) {
        return x;
    }
    // |v| = m * 2^(e - 150) with the implicit bit in m; subnormals (e = 0) scale as e = 1.
    let ex = max(ax >> 23u, 1u);
    let ey = max(ay >> 23u, 1u);
    let mx = (ax & 0x7fffffu) | select(0u, 0x800000u, ax >= 0x800000u);
    let my = (ay & 0x7fffffu) | select(0u, 0x800000u, ay >= 0x800000u);
    var r = mx % my;
    var d = ex - ey;
    while (d > 0u) {
        let k = min(d, 8u);
        r = (r << k) % my;  // r < my < 2^24: 8 more bits fit in 32
        d -= k;
    }
    let magnitude = ldexp(f32(r), i32(ey) - 150);
    return bitcast<f32>(bitcast<u32>(magnitude) | (bitcast<u32>(x) & 0x80000000u));
}

// ONNX Mod (fmod = 0) on floats: the remainder with the divisor's sign, as numpy's mod.
fn wg_mod_exact(x: f32, y: f32) -> f32 {
    let r = wg_fmod_exact(x, y);
    if (r == 0.0) {
        return bitcast<f32>(bitcast<u32>(y) & 0x80000000u);  // a zero takes the divisor's sign
    }
    return select(r, r + y, (r < 0.0) != (y < 0.0));
}

// Integer modulo with the sign of the divisor (ONNX Mod, fmod=0).
fn wg_mod_i32(x: i32, y: i32) -> i32 {
    let r = wg_rem_i32(x, y);
    return select(r, r + y, r != 0 && ((r < 0) != (y < 0)));
}

// Decompose a linear index of a rank-6 (right-aligned) shape into coordinates, dotted with strides.
// shape starts at params slot s, strides at slot t.
fn strided_offset(index: u32, s: u32, t: u32) -> i32 {
    var rest = index;
    var offset = 0;
    for (var d = 5; d >= 0; d--) {
        let size = u32(p(s + u32(d)));
        let coord = rest % size;
        rest = rest / size;
        offset += i32(coord) * p(t + u32(d));
    }
    return offset;
}

// NC4HW4 keeps padding lanes (channels >= c) zero.
fn nc4hw4_mask(v: vec4<f32>, c4: i32, c: i32) -> vec4<f32> {
    let lanes = vec4<i32>(c4 * 4) + vec4<i32>(0, 1, 2, 3);
    return select(vec4<f32>(0.0), v, lanes < vec4<i32>(c));
}
