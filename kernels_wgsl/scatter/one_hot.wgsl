// OneHot: out[o, d, x] = values[1] (on) where the index at (o, x) equals d, values[0] (off)
// elsewhere; the output is viewed as (outer, depth, inner), inner = indices elements after the
// axis. Computed per element: no table. Negative indices count from the end; indices still
// outside [0, depth) give all off, as ONNX defines. {{TO_INT}} turns index v into an i32.
// params: 0 = output count, 1 = inner, 2 = depth.
@group(0) @binding(0) var<storage, read_write> indices: array<{{TI}}>;
@group(0) @binding(1) var<storage, read_write> values: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = pu(0u);
    let inner = pu(1u);
    let depth = p(2u);
    let off = values[0];
    let on = values[1];
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        let rows = i / inner;
        let d = i32(rows % u32(depth));
        let v = indices[(rows / u32(depth)) * inner + i % inner];
        var index = {{TO_INT}};
        if (index < 0) {
            index += depth;
        }
        out[i] = select(off, on, index == d);
    }
}
