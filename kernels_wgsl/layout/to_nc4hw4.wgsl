// Linear NCHW f32 -> NC4HW4 (buffer or texture, by the generated store_y accessor).
// params: 0 = vec4 blocks (N * C4 * H * W), 4..8 = N, C4, H, W, C of the tensor.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
{{DECL}}
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = i32(linear_id(gid, nwg, WG));
    if (i >= p(0u)) {
        return;
    }
    let c4s = p(5u);
    let h = p(6u);
    let w = p(7u);
    let c = p(8u);
    let xx = i % w;
    let yy = (i / w) % h;
    let c4 = (i / (w * h)) % c4s;
    let n = i / (w * h * c4s);
    var v = vec4<f32>(0.0);
    for (var k = 0; k < 4; k++) {
        let ch = c4 * 4 + k;
        if (ch < c) {
            v[k] = x[((n * c + ch) * h + yy) * w + xx];
        }
    }
    store_y(n, c4, yy, xx, v);
}
