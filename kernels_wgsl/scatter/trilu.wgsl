// Trilu: y = x where col - row {{CMP}} k in the last two dims (>= keeps the upper triangle,
// <= the lower), 0 elsewhere. k is {{K}}: a param when known at resize (clamped by the host to
// [-rows - 1, cols + 1]), else read from its tensor (an int64 narrowed to i32 at upload).
// params: 0 = element count, 1 = columns, 2 = rows, 3 = k when known at resize.
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
{{K_BINDING}}
@group(0) @binding({{PARAMS}}) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let cols = pu(1u);
    let rows = pu(2u);
    let k = {{K}};
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var j = 0u; j < 4u; j++) {
        let i = base + j;
        if (i < n) {
            let diagonal = i32(i % cols) - i32((i / cols) % rows);
            y[i] = select({{T}}(0), x[i], diagonal {{CMP}} k);
        }
    }
}
