// Global max / average pooling: one invocation per (n, c) plane, reducing its spatial extent with
// 4 independent accumulators; {{COMBINE}} folds v into a (max or sum).
// params: 0 = planes (N * C), 1 = plane size, 2 = divide by the plane size (average).
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

fn combine(a: vec4<f32>, v: vec4<f32>) -> vec4<f32> {
    return {{COMBINE}};
}

fn combine1(a: f32, v: f32) -> f32 {
    return {{COMBINE}};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let plane = linear_id(gid, nwg, WG);
    if (plane >= pu(0u)) {
        return;
    }
    let size = pu(1u);
    let base = plane * size;
    let full = size / 4u * 4u;
    // Start from the first element (a neutral start value would need -inf for max).
    var acc = vec4<f32>(x[base]);
    if (p(2u) != 0) {
        acc = vec4<f32>(0.0);
    }
    for (var i = 0u; i < full; i += 4u) {
        let at = base + i;
        acc = combine(acc, vec4<f32>(x[at], x[at + 1u], x[at + 2u], x[at + 3u]));
    }
    var result = combine1(combine1(acc.x, acc.y), combine1(acc.z, acc.w));
    for (var i = full; i < size; i++) {
        result = combine1(result, x[base + i]);
    }
    if (p(2u) != 0) {
        result = result / f32(size);
    }
    y[plane] = result;
}
