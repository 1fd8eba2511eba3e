// Softmax / LogSoftmax / Hardmax as softmax.wgsl (same params and KIND) for contiguous rows of
// whole vec4s (inner size 1, length a multiple of 4): one invocation per row reads and writes it a
// vec4 at a time, a quarter of softmax.wgsl's loads (on lavapipe each load is a loop over the SIMD
// lanes, whatever its width). The maximum (a NaN wins) and its first index, the sum of
// exp(x - max) in 4 lanes, then the write.
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

// 0 = softmax, 1 = logsoftmax, 2 = hardmax (one-hot of the first maximum).
const KIND: u32 = {{KIND}}u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = linear_id(gid, nwg, WG);
    if (r >= pu(0u)) {
        return;
    }
    let quads = pu(1u) / 4u;
    let base = r * quads;
    var best = x[base].x;
    var arg = 0u;
    for (var q = 0u; q < quads; q++) {
        let v = x[base + q];
        for (var c = 0u; c < 4u; c++) {  // a constant trip count: unrolled by the compiler
            if (!is_nan_f32(best) && (v[c] > best || is_nan_f32(v[c]))) {
                best = v[c];
                arg = 4u * q + c;
            }
        }
    }
    var total = 0.0;
    if (KIND != 2u) {
        var part = vec4<f32>();
        for (var q = 0u; q < quads; q++) {
            part += exp(x[base + q] - best);
        }
        total = part.x + part.y + part.z + part.w;
    }
    let log_total = log(total);
    for (var q = 0u; q < quads; q++) {
        let v = x[base + q];
        if (KIND == 0u) {
            y[base + q] = exp(v - best) / total;
        } else if (KIND == 1u) {
            y[base + q] = (v - best) - log_total;
        } else {
            y[base + q] = select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<u32>(4u * q) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(arg));
        }
    }
}
