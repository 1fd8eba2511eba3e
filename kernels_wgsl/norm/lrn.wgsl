// LRN across channels: y = x / (bias + alpha / size * sum of x^2 over the channel window
// [c - lo, c + hi] clipped to [0, C)) ^ beta. Each invocation computes 4 consecutive spatial
// elements of one (n, c) plane (vec4 arithmetic, one pass over the window's channels).
// params: 0 invocations, 1 C, 2 S (spatial elements per plane), 3 blocks of 4 per plane,
// 4 lo, 5 hi, 6 alpha / size, 7 beta, 8 bias.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

// 4 elements of the plane starting at `start`, lanes past the plane's end read its last element.
fn load4(plane: u32, s0: u32, spatial: u32) -> vec4<f32> {
    let base = plane * spatial;
    let last = spatial - 1u;
    return vec4<f32>(x[base + s0], x[base + min(s0 + 1u, last)], x[base + min(s0 + 2u, last)],
                     x[base + min(s0 + 3u, last)]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = linear_id(gid, nwg, WG);
    if (index >= pu(0u)) {
        return;
    }
    let channels = p(1u);
    let spatial = pu(2u);
    let blocks = pu(3u);
    let s0 = (index % blocks) * 4u;
    let plane = index / blocks;
    let c = i32(plane % u32(channels));
    let first_plane = plane - u32(c);  // plane of channel 0 of this sample
    let lo = max(0, c - p(4u));
    let hi = min(channels - 1, c + p(5u));
    var sum = vec4<f32>();
    for (var k = lo; k <= hi; k++) {
        let v = load4(first_plane + u32(k), s0, spatial);
        sum += v * v;
    }
    let v = load4(plane, s0, spatial);
    let out = v / pow(vec4<f32>(pf(8u)) + pf(6u) * sum, vec4<f32>(pf(7u)));
    let base = plane * spatial + s0;
    for (var k = 0u; k < min(4u, spatial - s0); k++) {
        y[base + k] = out[k];
    }
}
