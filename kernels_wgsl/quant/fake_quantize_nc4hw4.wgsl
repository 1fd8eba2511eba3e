// FakeQuantize on NC4HW4 feature maps, per tensor or per channel (axis 1): see fake_quantize.wgsl.
// One vec4 (4 channels of one pixel) per invocation; padding lanes read channel C - 1's parameters
// and are zeroed by the store.
// params: 0 = vec4 blocks, 1 = per channel, 2 = has zero point, 3 = qmin (f32 bits), 4..8 x dims,
// 9..13 y dims (N, C4, H, W, C), 14 = qmax (f32 bits).
{{DECL_X}}
@group(0) @binding(1) var<storage, read_write> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> zero: array<f32>;
{{DECL_Y}}
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
    let i = i32(linear_id(gid, nwg, WG));
    if (i >= p(0u)) {
        return;
    }
    let c4s = p(5u);
    let h = p(6u);
    let w = p(7u);
    let xx = i % w;
    let yy = (i / w) % h;
    let c4 = (i / (w * h)) % c4s;
    let n = i / (w * h * c4s);
    let lo = pf(3u);
    let hi = pf(14u);
    let last = p(8u) - 1;
    let v = load_x(n, c4, yy, xx);
    var out = vec4<f32>(0.0);
    for (var lane = 0; lane < 4; lane++) {
        let j = select(0, min(c4 * 4 + lane, last), p(1u) != 0);
        let s = scale[j];
        var z = 0.0;
        if (p(2u) != 0) {
            z = zero[j];
        }
        out[lane] = fake_quantize(v[lane], s, z, lo, hi);
    }
    store_y(n, c4, yy, xx, out);
}
