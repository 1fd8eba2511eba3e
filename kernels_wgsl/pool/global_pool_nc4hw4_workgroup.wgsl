// Global max / average pooling on NC4HW4 feature maps as global_pool_nc4hw4.wgsl (same params,
// accessors and COMBINE), with a workgroup per (n, slice) for real GPUs: one invocation per slice
// leaves a small network's head to a few invocations, each a chain of loads over the whole plane.
// Invocation t folds pixels t, t + WG, ... (neighbouring invocations read neighbouring pixels),
// then the partials are combined in a tree in workgroup memory.
{{DECL_X}}
{{DECL_Y}}
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

var<workgroup> partials: array<vec4<f32>, 256>;

fn combine(a: vec4<f32>, v: vec4<f32>) -> vec4<f32> {
    return {{COMBINE}};
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(wid.x + wid.y * nwg.x);
    if (index >= p(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let c4s = p(5u); let h = p(6u); let wd = p(7u);
    let c4 = index % c4s;
    let n = index / c4s;
    let average = p(1u) != 0;
    let pixels = h * wd;
    // Start from the plane's first pixel (a neutral start for max would need -inf); zero for the average.
    var a = select(load_x(n, c4, 0, 0), vec4<f32>(0.0), average);
    for (var i = i32(local); i < pixels; i += i32(WG)) {
        a = combine(a, load_x(n, c4, i / wd, i % wd));
    }
    partials[local] = a;
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        workgroupBarrier();
        if (local < stride && local + stride < WG) {
            partials[local] = combine(partials[local], partials[local + stride]);
        }
    }
    workgroupBarrier();
    if (local == 0u) {
        let result = partials[0];
        store_y(n, c4, 0, 0, select(result, result / f32(pixels), average));
    }
}
