// c = a op b on NC4HW4 feature maps with broadcasting over N, C, H, W (a size-1 dim repeats; an
// operand with one channel is splatted over the lanes). One vec4 per invocation. FLOAT is the
// arithmetic type: 32-bit floats, or 16-bit ones for precision fp16-arith (the accessors typed so).
// params: 0 = vec4 blocks of c, 1 = a splats its channel, 2 = b splats its channel,
// 4..8 a dims, 9..13 b dims, 14..18 c dims (N, C4, H, W, C).
{{DECL_A}}
{{DECL_B}}
{{DECL_C}}
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

fn apply(x: {{FLOAT}}, y: {{FLOAT}}) -> {{FLOAT}} {
    return {{EXPR}};
}

// Coordinates of operand dims at slot s for output position (n, c4, y, x): size-1 dims repeat.
fn clamp_coord(s: u32, n: i32, c4: i32, y: i32, x: i32) -> vec4<i32> {
    return vec4<i32>(select(n, 0, p(s) == 1), select(c4, 0, p(s + 1u) == 1), select(y, 0, p(s + 2u) == 1),
                     select(x, 0, p(s + 3u) == 1));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = i32(linear_id(gid, nwg, WG));
    if (i >= p(0u)) {
        return;
    }
    let c4s = p(15u);
    let h = p(16u);
    let w = p(17u);
    let xx = i % w;
    let yy = (i / w) % h;
    let c4 = (i / (w * h)) % c4s;
    let n = i / (w * h * c4s);
    let ca = clamp_coord(4u, n, c4, yy, xx);
    let cb = clamp_coord(9u, n, c4, yy, xx);
    var va = load_a(ca.x, ca.y, ca.z, ca.w);
    var vb = load_b(cb.x, cb.y, cb.z, cb.w);
    if (p(1u) == 1) {
        va = vec4<{{FLOAT}}>(va.x);
    }
    if (p(2u) == 1) {
        vb = vec4<{{FLOAT}}>(vb.x);
    }
    store_c(n, c4, yy, xx, vec4<{{FLOAT}}>(apply(va.x, vb.x), apply(va.y, vb.y), apply(va.z, vb.z), apply(va.w, vb.w)));
}

