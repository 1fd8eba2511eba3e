// FakeQuantize on linear tensors: y = (clamp(round(x / s) + z, qmin, qmax) - z) * s, round half to
// even (WGSL's round). s and z are per tensor, per axis or per block: the element at (outer, a, r),
// a its index along the axis, reads parameter outer * p(4) + (a / block) * p(5) + r * p(6).
// params: 0 = element count, 1 = inner size (after the axis), 2 = axis length, 3 = block size,
// 4..6 = parameter strides (outer, block, inner), 7 = has zero point, 8 = qmin, 9 = qmax (f32 bits).
// 4 elements per invocation. Without a zero point, `zero` is bound to the scale and never read.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> zero: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

fn fake_quantize(v: f32, s: f32, z: f32, lo: f32, hi: f32) -> f32 {
    let q = round(v / s) + z;
    // NaN saturates to the low end, as the numpy backend (a bit test: compilers may fold q != q).
    let nan = (bitcast<u32>(q) & 0x7fffffffu) > 0x7f800000u;
    return (select(clamp(q, lo, hi), lo, nan) - z) * s;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let inner = pu(1u);
    let length = pu(2u);
    let block = pu(3u);
    let lo = pf(8u);
    let hi = pf(9u);
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        let r = i % inner;
        let a = (i / inner) % length;
        let outer = i / (inner * length);
        let j = outer * pu(4u) + (a / block) * pu(5u) + r * pu(6u);
        let s = scale[j];
        var z = 0.0;
        if (p(7u) != 0) {
            z = zero[j];
        }
        y[i] = fake_quantize(x[i], s, z, lo, hi);
    }
}
