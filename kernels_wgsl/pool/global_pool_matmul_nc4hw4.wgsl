// GlobalPoolMatMul on an NC4HW4 feature map x (generated accessor: buffer, texture or a linear
// tensor read a slice at a time): y[n, k] = act(alpha * sum_c pool(x[n, c]) * W[k, c] + beta * b[k]),
// pool the average ({{COMBINE}} a + v) or the maximum ({{COMBINE}} max(a, v)) over the plane.
// One invocation per (n, block of 4 outputs k): for every input slice c4 it pools the slice's
// H x W pixels (4 pixels of a row per iteration into 4 accumulators: pooled, shared with
// global_pool_nc4hw4.wgsl in pool/global_pool_plane.wgsl), then multiplies the pooled vec4 by the
// 4x4 block of weights. Each of the ceil(K / 4) blocks of a batch item pools x again, so this runs
// small heads only (backends/wgpu/pool_matmul.py).
// Weights: [output block k4][input slice c4][4 columns: input lane j] -> vec4 over the block's 4
// outputs (zero past C and K). Bias: a vec4 per output block (zero past K, or without bias).
// params: 0 = invocations (N * K4), 1 = K4, 2 = K, 3 = average, 4 = has bias, 5 = alpha,
// 6 = beta, 7 = activation alpha, 8 = activation beta (f32 bits), 10..14 x dims (N, C4, H, W, C).
// y is the linear (N, K) output.
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;
// include: pool/global_pool_plane.wgsl
override WG: u32 = 64u;

fn act(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{ACT}};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let k4s = p(1u);
    let k4 = index % k4s;
    let n = index / k4s;
    let c4s = p(11u); let h = p(12u); let wd = p(13u);
    let average = p(3u) != 0;
    var acc = vec4<f32>(0.0);
    var wi = k4 * c4s * 4;
    for (var c4 = 0; c4 < c4s; c4++) {
        let v = pooled(n, c4, h, wd, average);
        acc += mat4x4<f32>(vec4<f32>(w[wi]), vec4<f32>(w[wi + 1]), vec4<f32>(w[wi + 2]), vec4<f32>(w[wi + 3])) * v;
        wi += 4;
    }
    var b = vec4<f32>(0.0);
    if (p(4u) != 0) {
        b = bias[k4];
    }
    let s = pf(5u) * acc + pf(6u) * b;
    let alpha = pf(7u);
    let beta = pf(8u);
    let k = p(2u);
    let row = n * k;
    for (var j = 0; j < 4; j++) {
        let column = k4 * 4 + j;
        if (column < k) {
            y[row + column] = act(s[j], alpha, beta);
        }
    }
}
