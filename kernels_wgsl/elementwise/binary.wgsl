// c = a op b with numpy broadcasting (rank <= 6, right-aligned; broadcast dims have stride 0).
// params: 0 = element count, 1 = same-shape fast path flag, 8..13 = output shape,
// 16..21 = a strides, 24..29 = b strides.
@group(0) @binding(0) var<storage, read_write> a: array<{{TA}}>;
@group(0) @binding(1) var<storage, read_write> b: array<{{TA}}>;
@group(0) @binding(2) var<storage, read_write> c: array<{{TO}}>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

fn apply(x: {{TA}}, y: {{TA}}) -> {{TO}} {
    return {{EXPR}};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        if (p(1u) == 1) {
            c[i] = apply(a[i], b[i]);
        } else {
            c[i] = apply(a[strided_offset(i, 8u, 16u)], b[strided_offset(i, 8u, 24u)]);
        }
    }
}

// fmod(x, y) exact (the remainder of floats is always representable), as C/numpy: long division
// of the integer significands, 8 bits per step. The float formula x - y * trunc(x / y) is wrong
// once x / y passes 2^24 or rounds up to the next integer. Also in binary_nc4hw4.wgsl.
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
