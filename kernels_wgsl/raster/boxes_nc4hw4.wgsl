// A raster plan of translated boxes on NC4HW4 feature maps (Concat along any axis, constant Pad,
// Slice with step 1: backends/wgpu/raster.py recognises them from the regions): output element
// (n, c, y, x) takes source part k's element (n, c, y, x) - t_k where that lies inside the part's
// source, else the fill value. Parts cover disjoint output boxes. Each invocation writes one output
// slice (4 channels) for a row segment of up to p(2) pixels along W; a lane's channel may come
// from any part at any channel offset (not only multiples of 4): per part, the source slices
// holding the 4 channels (one, or two when the offset is not a multiple of 4) are loaded and their
// lanes shifted into place, then selected per lane.
// params: 0 = invocations, 1 = segments per row, 2 = segment length, 3 = fill (f32 bits), 4 = parts,
// 5..9 = y dims (N, C4, H, W, C), then per part k from slot 10 + 9 k: its source's dims (N, C4, H,
// W, C), then t = (n, c, y, x).
{{DECLS}}
@group(0) @binding({{PARAMS_BINDING}}) var<uniform> params: Params;
override WG: u32 = 64u;

// Source slice c4 of part k at (n, y, x).
fn load_part(k: i32, n: i32, c4: i32, y: i32, x: i32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    switch k {
{{CASES}}
        default: {}
    }
    return v;
}

// Lanes 4 r .. 4 r + 3 of the 8 lanes (a, b), for r = 0..3.
fn shifted(a: vec4<f32>, b: vec4<f32>, r: i32) -> vec4<f32> {
    if (r == 0) {
        return a;
    }
    if (r == 1) {
        return vec4<f32>(a.yzw, b.x);
    }
    if (r == 2) {
        return vec4<f32>(a.zw, b.xy);
    }
    return vec4<f32>(a.w, b.xyz);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let c4s = p(6u); let oh = p(7u); let ow = p(8u);
    var rest = index;
    let start = (rest % p(1u)) * p(2u); rest /= p(1u);
    let oy = rest % oh; rest /= oh;
    let c4 = rest % c4s;
    let n = rest / c4s;
    let lanes = vec4<i32>(0, 1, 2, 3);
    let fill = vec4<f32>(pf(3u));
    let stop = min(start + p(2u), ow);
    for (var ox = start; ox < stop; ox++) {
        var v = fill;
        for (var k = 0; k < p(4u); k++) {
            let s = 10u + 9u * u32(k);
            let sn = n - p(s + 5u);
            let sy = oy - p(s + 7u);
            let sx = ox - p(s + 8u);
            if (sn < 0 || sn >= p(s) || sy < 0 || sy >= p(s + 2u) || sx < 0 || sx >= p(s + 3u)) {
                continue;
            }
            // Source channels sc0 .. sc0 + 3 for the 4 lanes; those within [0, C) are this part's.
            let sc0 = c4 * 4 - p(s + 6u);
            let channels = p(s + 4u);
            if (sc0 + 3 < 0 || sc0 >= channels) {
                continue;
            }
            let first = (sc0 + 4) / 4 - 1;  // floor(sc0 / 4) with a non-negative division (sc0 >= -3)
            let r = sc0 - first * 4;
            var a = vec4<f32>(0.0);
            var b = vec4<f32>(0.0);
            if (first >= 0) {
                a = load_part(k, sn, first, sy, sx);
            }
            if (r != 0 && first + 1 < p(s + 1u)) {
                b = load_part(k, sn, first + 1, sy, sx);
            }
            let lane_channels = vec4<i32>(sc0) + lanes;
            v = select(v, shifted(a, b, r), (lane_channels >= vec4<i32>(0)) & (lane_channels < vec4<i32>(channels)));
        }
        store_y(n, c4, oy, ox, v);
    }
}
