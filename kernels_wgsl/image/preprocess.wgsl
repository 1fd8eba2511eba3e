// Image preprocessing (wgnn.image): uint8 channels-last images -> float32 model input, 4 neighbouring
// output pixels of one row per invocation. Per pixel: sampling position from the tabulated terms
// (one f32 addition, as the numpy twin does), nearest or bilinear filtering with a replicate or
// constant-0 border, colour conversion and normalisation folded into out = G . v + bias, then a
// strided store (NCHW, NHWC or NC4HW4 with zero padding lanes).
// The images arrive as bytes packed 4 per u32 word (little-endian), N * H * W * C bytes padded to 4.
// params: 0 = invocations (N * out_h * ceil(out_w / 4)), 2 = in H, 3 = in W, 4 = in C,
// 5 = out H, 6 = out W, 7 = flags (1 = nearest, 2 = constant border), 8 = lanes written per pixel,
// 12..15 = output strides of n, channel, y, x (elements), 16..31 = G (4 x 4, f32, row = lane),
// 32..35 = bias (f32).
// table: [sx term per column (out W), sy term per column (out W), sx term per row (out H),
// sy term per row (out H)]; for nearest it already holds the + 0.5 of floor(s + 0.5).
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> table: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

fn byte_at(i: u32) -> f32 {
    return f32((src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu);
}

// Channels 0..3 of source pixel (ix, iy) of image n (channels past C read 0); outside the image the
// edge pixel (replicate) or 0 (constant).
fn texel(n: u32, ix: i32, iy: i32) -> vec4<f32> {
    let h = p(2u);
    let w = p(3u);
    let c = pu(4u);
    let inside = ix >= 0 && ix < w && iy >= 0 && iy < h;
    var v = vec4<f32>(0.0);
    if (!inside && (pu(7u) & 2u) != 0u) {
        return v;
    }
    let x = u32(clamp(ix, 0, w - 1));
    let y = u32(clamp(iy, 0, h - 1));
    let base = ((n * u32(h) + y) * u32(w) + x) * c;
    for (var j = 0u; j < 4u; j++) {
        if (j < c) {
            v[j] = byte_at(base + j);
        }
    }
    return v;
}

// floor(s) as an index, clamped to just outside the image (the result does not change, and the
// conversion to i32 stays in range for far-outside positions).
fn pixel_index(s: f32, size: i32) -> i32 {
    return i32(clamp(floor(s), -2.0, f32(size + 1)));
}

fn sample(n: u32, sx: f32, sy: f32) -> vec4<f32> {
    let x0 = pixel_index(sx, p(3u));
    let y0 = pixel_index(sy, p(2u));
    if ((pu(7u) & 1u) != 0u) {
        return texel(n, x0, y0);
    }
    let fx = sx - floor(sx);
    let fy = sy - floor(sy);
    let top = texel(n, x0, y0) * (1.0 - fx) + texel(n, x0 + 1, y0) * fx;
    let bottom = texel(n, x0, y0 + 1) * (1.0 - fx) + texel(n, x0 + 1, y0 + 1) * fx;
    return top * (1.0 - fy) + bottom * fy;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = linear_id(gid, nwg, WG);
    if (id >= pu(0u)) {
        return;
    }
    let oh = pu(5u);
    let ow = pu(6u);
    let blocks = (ow + 3u) / 4u;
    let row = id / blocks;
    let oy = row % oh;
    let n = row / oh;
    let row_sx = table[2u * ow + oy];
    let row_sy = table[2u * ow + oh + oy];
    let lanes = pu(8u);
    for (var k = 0u; k < 4u; k++) {
        let ox = (id % blocks) * 4u + k;
        if (ox >= ow) {
            return;
        }
        let v = sample(n, table[ox] + row_sx, table[ow + ox] + row_sy);
        let base = n * pu(12u) + oy * pu(14u) + ox * pu(15u);
        for (var lane = 0u; lane < 4u; lane++) {
            if (lane < lanes) {
                let g = vec4<f32>(pf(16u + 4u * lane), pf(17u + 4u * lane), pf(18u + 4u * lane), pf(19u + 4u * lane));
                dst[base + lane * pu(13u)] = dot(g, v) + pf(32u + lane);
            }
        }
    }
}
