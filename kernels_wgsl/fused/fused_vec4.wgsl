// fused.wgsl (same params and program) a vec4 at a time, where the result's innermost merged axis
// is whole vec4s and each input is contiguous along it (read as vec4s) or broadcast along it (one
// element, splat): a quarter of the loads, stores and offset arithmetic (on lavapipe each load is a
// loop over the SIMD lanes, whatever its width). The program still runs lane by lane.
{{DECLS}}
override WG: u32 = 64u;

{{PROGRAM}}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg, WG) * 4u;  // the group's first element
    if (i >= u32(p(0u))) {
        return;
    }
    let rank = p(1u);
    {{OFFSETS}}
    var rest = i;
    for (var d = rank - 1; d >= 0; d--) {
        let size = u32(p(2u + u32(d)));
        let coord = i32(rest % size);
        rest = rest / size;
        {{ACCUMULATE}}
    }
    {{LOADS}}
    result[i / 4u] = vec4<f32>({{LANES}});
}
