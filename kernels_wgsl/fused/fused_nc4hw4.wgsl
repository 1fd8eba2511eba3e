// y = program(x0, x1, ...) on an NC4HW4 feature map y, one vec4 (4 channels of one pixel) per
// invocation (backends/wgpu/fused.py generates the program and the declarations). Feature-map
// inputs with y's channels are read through NC4HW4 accessors (size-1 N, H, W repeat); the others
// (per-channel vectors, scalars, other broadcasts) linearly, lane by lane, with strides.
// params: 0 = vec4 blocks of y, 4..8 = y dims (N, C4, H, W, C), 9 + 5j .. 13 + 5j = input j:
// its dims (accessor inputs) or its strides over (N, C, H, W) (linear inputs).
{{DECLS}}
override WG: u32 = 64u;

{{PROGRAM}}

// Coordinates of an accessor input's dims at slot s for output position (n, c4, y, x): size-1
// N, H, W repeat.
fn repeat_coord(s: u32, n: i32, c4: i32, y: i32, x: i32) -> vec4<i32> {
    return vec4<i32>(select(n, 0, p(s) == 1), c4, select(y, 0, p(s + 2u) == 1), select(x, 0, p(s + 3u) == 1));
}

// Offset of channel c of a linear input at slot s; padding lanes read the last channel (their
// results are masked when stored).
fn linear_offset(s: u32, n: i32, c: i32, y: i32, x: i32) -> i32 {
    return n * p(s) + min(c, p(8u) - 1) * p(s + 1u) + y * p(s + 2u) + x * p(s + 3u);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = i32(linear_id(gid, nwg, WG));
    if (i >= p(0u)) {
        return;
    }
    let c4s = p(5u);
    let h = p(6u);
    let w = p(7u);
    let xx = i % w;
    let yy = (i / w) % h;
    let c4 = (i / (w * h)) % c4s;
    let n = i / (w * h * c4s);
    {{LOADS}}
    var r: vec4<f32>;
    for (var lane = 0; lane < 4; lane++) {
        let c = c4 * 4 + lane;
        r[lane] = program({{LANE_ARGS}});
    }
    store_y(n, c4, yy, xx, r);
}
