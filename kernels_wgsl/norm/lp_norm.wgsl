// LpNorm: y = x / ||x||_p along one axis (p 1 or 2), a zero norm giving 0. One invocation per
// row: the L elements x[outer, :, inner] (stride = inner); consecutive invocations take
// consecutive inner positions, so their loads are neighbours.
// params: 0 rows (outer * inner), 1 L, 2 inner, 3 p.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = linear_id(gid, nwg, WG);
    if (row >= pu(0u)) {
        return;
    }
    let size = pu(1u);
    let inner = pu(2u);
    let base = (row / inner) * size * inner + row % inner;
    let l1 = p(3u) == 1;
    var sum = 0.0;
    for (var j = 0u; j < size; j++) {
        let v = x[base + j * inner];
        sum += select(v * v, abs(v), l1);
    }
    let norm = select(sqrt(sum), sum, l1);
    let scale = select(1.0 / norm, 0.0, norm == 0.0);
    for (var j = 0u; j < size; j++) {
        y[base + j * inner] = x[base + j * inner] * scale;
    }
}
