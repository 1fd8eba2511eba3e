// y = f(x) element-wise; f is the kind's WGSL expression in v (with alpha, beta), set by the loader.
// The result type TO is T, or u32 (bool) for predicates (IsNaN, IsInf).
// params: 0 = element count, 1 = alpha, 2 = beta (f32 bits for float tensors, i32/u32 for integer ones).
// 4 elements per invocation.
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{TO}}>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

fn apply(v: {{T}}, alpha: {{S}}, beta: {{S}}) -> {{TO}} {
    return {{EXPR}};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let alpha = {{READ}}(1u);
    let beta = {{READ}}(2u);
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i < n) {
            y[i] = apply(x[i], alpha, beta);
        }
    }
}
