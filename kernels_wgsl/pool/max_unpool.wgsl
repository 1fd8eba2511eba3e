// MaxUnpool in two dispatches of this kernel: mode 0 zeroes the output (4 elements per
// invocation), mode 1 scatters y[indices[i]] = x[i] (4 input elements per invocation), skipping
// indices outside [0, output size) and reporting them to the host (report_bad, check 0), which
// raises the numpy backend's InputError. Indices from MaxPool are distinct or point at equal
// values, so the order of colliding writes does not matter for them.
// params: 0 mode, 1 elements (output in mode 0, input in mode 1), 2 output size, 63 status id.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> indices: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let base = linear_id(gid, nwg, WG) * 4u;
    let count = pu(1u);
    let scatter = p(0u) != 0;
    var bad = false;  // reported once, after the loop
    var bad_value = 0;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= count) {
            break;
        }
        if (!scatter) {
            y[i] = 0.0;
            continue;
        }
        let dst = indices[i];
        if (dst >= 0 && dst < p(2u)) {
            y[dst] = x[i];
        } else if (!bad) {
            bad = true;
            bad_value = dst;
        }
    }
    if (bad) {
        report_bad(0u, bad_value);
    }
}

{{REPORT_BAD}}
