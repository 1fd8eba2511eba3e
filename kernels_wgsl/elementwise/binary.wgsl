// c = a op b with numpy broadcasting (rank <= 6, right-aligned; broadcast dims have stride 0).
// params: 0 = element count, 1 = same-shape fast path flag, 8..13 = output shape,
// 16..21 = a strides, 24..29 = b strides.
@group(0) @binding(0) var<storage, read_write> a: array<{{TA}}>;
@group(0) @binding(1) var<storage, read_write> b: array<{{TA}}>;
@group(0) @binding(2) var<storage, read_write> c: array<{{TO}}>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

fn apply(x: {{TA}}, y: {{TA}}) -> {{TO}} {
    return {{EXPR}};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = u32(p(0u));
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i >= n) {
            return;
        }
        if (p(1u) == 1) {
            c[i] = apply(a[i], b[i]);
        } else {
            c[i] = apply(a[strided_offset(i, 8u, 16u)], b[strided_offset(i, 8u, 24u)]);
        }
    }
}

