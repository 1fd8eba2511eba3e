// Resize's source positions and cubic filter, shared by resize.wgsl and resize_nc4hw4.wgsl
// (included by both): x = A * y + B of an axis's params slots in 64-bit fixed point (40 fractional
// bits), computed with integer arithmetic so every device gets the numpy backend's indices.

// a * b as a 64-bit (lo, hi) pair, from 16-bit halves (WGSL has no wide multiply).
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// A * out_pos + B of the axis at slot s (A lo, A hi, B lo, B hi at s + 2 .. s + 5), as a 64-bit
// two's complement (lo, hi) pair.
fn source_position(s: u32, out_pos: u32) -> vec2<u32> {
    let prod = mul_wide(pu(s + 2u), out_pos);
    let lo = prod.x + pu(s + 4u);
    let hi = prod.y + pu(s + 3u) * out_pos + pu(s + 5u) + select(0u, 1u, lo < prod.x);
    return vec2<u32>(lo, hi);
}

fn cubic(t: f32, a: f32) -> f32 {
    let s = abs(t);
    if (s <= 1.0) {
        return ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0;
    }
    if (s < 2.0) {
        return ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a;
    }
    return 0.0;
}
