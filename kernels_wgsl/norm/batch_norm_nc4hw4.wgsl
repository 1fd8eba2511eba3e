// Inference BatchNorm on NC4HW4 feature maps (generated accessors, buffer or texture):
// y = x * a + (bias - mean * a), a = scale / sqrt(var + epsilon), per channel. The parameters are
// repacked as vec4 slices (zero padding lanes; padding lanes of y are masked by the store), read
// and folded once per invocation of 4 pixels along W.
// params: 0 = invocations, 1 = pixel blocks along W, 2 = epsilon (f32 bits), 4..8 x dims,
// 9..13 y dims (N, C4, H, W, C).
{{DECL_X}}
@group(0) @binding(1) var<storage, read_write> scale: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> mean: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> variance: array<vec4<f32>>;
{{DECL_Y}}
@group(0) @binding(6) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let c4s = p(5u); let h = p(6u); let wd = p(7u);
    var rest = index;
    let x0 = (rest % p(1u)) * 4; rest /= p(1u);
    let iy = rest % h; rest /= h;
    let c4 = rest % c4s;
    let n = rest / c4s;
    let a = scale[c4] / sqrt(variance[c4] + vec4<f32>(pf(2u)));
    let shift = bias[c4] - mean[c4] * a;
    for (var k = 0; k < 4; k++) {
        let ix = x0 + k;
        if (ix < wd) {
            store_y(n, c4, iy, ix, load_x(n, c4, iy, ix) * a + shift);
        }
    }
}
