// result = program(x0, x1, ...): a fused chain of element-wise steps (backends/wgpu/fused.py generates
// the program and the declarations from the op's steps), every input broadcast to the result's shape.
// params: 0 = element count, 1 = rank r of the merged axes (0..6), 2..7 = their sizes,
// 8 + 6j .. 13 + 6j = input j's strides over them (0 on broadcast axes). 4 elements per invocation.
{{DECLS}}
override WG: u32 = 64u;

{{PROGRAM}}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let rank = p(1u);
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        // The coordinates of element i, dotted with each input's strides.
        {{OFFSETS}}
        var rest = i;
        for (var d = rank - 1; d >= 0; d--) {
            let size = u32(p(2u + u32(d)));
            let coord = i32(rest % size);
            rest = rest / size;
            {{ACCUMULATE}}
        }
        result[i] = program({{LOADS}});
    }
}
