// Global max / average pooling on NC4HW4 feature maps (generated accessors, buffer or texture):
// one invocation per (n, slice) reduces the plane, 4 pixels of a row per iteration into 4
// independent accumulators; {{COMBINE}} folds v into a (max or sum). The output (N, C, 1, 1) is
// NC4HW4 too. Pixels past the row's end read the row's last pixel again (harmless for max) and
// count as zero for the average.
// params: 0 = invocations (N * C4), 1 = divide by the plane size (average), 4..8 x dims,
// 9..13 y dims (N, C4, H, W, C).
{{DECL_X}}
{{DECL_Y}}
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

fn combine(a: vec4<f32>, v: vec4<f32>) -> vec4<f32> {
    return {{COMBINE}};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let c4s = p(5u); let h = p(6u); let wd = p(7u);
    let c4 = index % c4s;
    let n = index / c4s;
    let average = p(1u) != 0;
    // Start from the first pixel (a neutral start value would need -inf for max).
    var a0 = load_x(n, c4, 0, 0);
    if (average) {
        a0 = vec4<f32>(0.0);
    }
    var a1 = a0; var a2 = a0; var a3 = a0;
    let zero = vec4<f32>(0.0);
    for (var iy = 0; iy < h; iy++) {
        for (var ix = 0; ix < wd; ix += 4) {
            let v0 = load_x(n, c4, iy, ix);
            let v1 = load_x(n, c4, iy, min(ix + 1, wd - 1));
            let v2 = load_x(n, c4, iy, min(ix + 2, wd - 1));
            let v3 = load_x(n, c4, iy, min(ix + 3, wd - 1));
            a0 = combine(a0, v0);
            a1 = combine(a1, select(v1, zero, average && ix + 1 >= wd));
            a2 = combine(a2, select(v2, zero, average && ix + 2 >= wd));
            a3 = combine(a3, select(v3, zero, average && ix + 3 >= wd));
        }
    }
    var result = combine(combine(a0, a1), combine(a2, a3));
    if (average) {
        result = result / f32(h * wd);
    }
    store_y(n, c4, 0, 0, result);
}
