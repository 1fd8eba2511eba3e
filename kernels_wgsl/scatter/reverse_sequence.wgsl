// ReverseSequence: in batch entry b the first lens[b] steps along the time axis are reversed, the
// rest copied; per element, from the time and batch coordinates. A length outside [0, steps]
// gives zeros for its batch entry and is reported to the host (report_bad, check 0), which
// raises the numpy backend's InputError (lengths known at resize are checked by the shape
// function).
// params: 0 = element count, 1 = time steps, 2 = time stride, 3 = batch size, 4 = batch stride,
// 63 = status id.
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> lens: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let steps = p(1u);
    let time_stride = p(2u);
    let base = linear_id(gid, nwg, WG) * 4u;
    // Branch-free in the loop, one report after it (a store in a branch costs lavapipe time
    // even when never taken).
    var bad = false;
    var bad_value = 0;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            break;
        }
        let t = i32((i / u32(time_stride)) % u32(steps));
        let len = lens[(i / pu(4u)) % pu(3u)];
        let ok = len >= 0 && len <= steps;
        let src = select(t, select(t, len - 1 - t, t < len), ok);  // a bad length reads in place
        y[i] = select(0u, x[i32(i) + (src - t) * time_stride], ok);
        if (!ok) {
            bad = true;
            bad_value = len;
        }
    }
    if (bad) {
        report_bad(0u, bad_value);
    }
}

{{REPORT_BAD}}
