// y = cast(x) between the GPU element types (f32, i32, u32 for bool); {{EXPR}} converts v.
// params: 0 = element count.
@group(0) @binding(0) var<storage, read_write> x: array<{{TI}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{TO}}>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i < n) {
            let v = x[i];
            y[i] = {{EXPR}};
        }
    }
}
