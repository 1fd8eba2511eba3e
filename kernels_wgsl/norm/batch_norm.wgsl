// Inference BatchNorm: y = x * a + (bias - mean * a), a = scale / sqrt(var + epsilon), with the
// parameters read per element (a few loads; cheaper than a second dispatch to fold them first).
// The parameter index of element i is (i % period) / divisor: period = C * inner, divisor = inner
// for (C,) parameters, 1 for per-activation (C, D1, ...) ones. 4 elements per invocation.
// params: 0 element count, 1 period, 2 divisor, 3 epsilon.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> mean: array<f32>;
@group(0) @binding(4) var<storage, read_write> variance: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let period = pu(1u);
    let divisor = pu(2u);
    let epsilon = pf(3u);
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        let j = (i % period) / divisor;
        let a = scale[j] / sqrt(variance[j] + epsilon);
        y[i] = x[i] * a + (bias[j] - mean[j] * a);
    }
}
