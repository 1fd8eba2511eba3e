// Shared helpers appended to every kernel by the loader (backends/wgpu/loader.py).

// Parameters (shapes, strides, scalars) travel in a uniform block of 64 ints; p(i) reads one.
struct Params { v: array<vec4<i32>, 16> }

fn p(i: u32) -> i32 {
    return params.v[i / 4u][i % 4u];
}

fn pf(i: u32) -> f32 {
    return bitcast<f32>(p(i));
}

// Linear invocation index over a 2-D dispatch grid (65535 workgroups per dimension limit).
fn linear_id(gid: vec3<u32>, nwg: vec3<u32>, wg: u32) -> u32 {
    return gid.x + gid.y * nwg.x * wg;
}
