// Depthwise Conv 2-D (group = C_in = C_out) on NC4HW4 feature maps (generated accessors, buffer or
// texture), optional bias and residual, fused activation {{ACT}} (per lane). Each invocation computes
// one slice (4 channels, one vec4 per pixel) over a row segment of p(2) output pixels, 4 at a time:
// the index arithmetic is paid once per segment. Weights are repacked [c4][ky][kx] -> vec4 over
// the slice's channels. Where the W stride equals the W dilation (3x3 stride 1), each W tap
// reuses the previous tap's columns shifted by one and loads one new column.
// params: 0 = invocations, 1 = segments per row, 2 = segment length (a multiple of 4),
// 4..5 = kernel H W, 6..7 = strides, 8..9 = dilations, 10..11 = pads (top, left), 12 = has bias,
// 13 = alpha, 14 = beta (f32 bits), 15 = has residual, 16..20 x dims, 21..25 y dims,
// 26..30 r dims (N, C4, H, W, C).
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/finish.wgsl
// include: conv/row_tap.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(18u); let wd = p(19u);
    let c4s = p(22u); let oh = p(23u); let ow = p(24u);
    let kh = p(4u); let kw = p(5u);
    var rest = index;
    let start = (rest % p(1u)) * p(2u); rest /= p(1u);
    let oy = rest % oh; rest /= oh;
    let c4 = rest % c4s;
    let n = rest / c4s;
    let sx = p(7u); let dx = p(9u);
    let slide = sx == dx;
    var b = vec4<f32>(0.0);
    if (p(12u) != 0) {
        b = bias[c4];
    }
    let stop = min(start + p(2u), ow);
    for (var ox0 = start; ox0 < stop; ox0 += 4) {
        let c0 = ox0 * sx - p(11u);  // column of pixel 0 at tap 0
        var a0 = vec4<f32>(0.0); var a1 = vec4<f32>(0.0); var a2 = vec4<f32>(0.0); var a3 = vec4<f32>(0.0);
        var wi = c4 * kh * kw;
        for (var ty = 0; ty < kh; ty++) {
            let iy = oy * p(6u) - p(10u) + ty * p(8u);
            if (iy < 0 || iy >= h) {
                wi += kw;
                continue;
            }
            if (slide) {
                var x0 = tap(n, c4, iy, c0, wd);
                var x1 = tap(n, c4, iy, c0 + sx, wd);
                var x2 = tap(n, c4, iy, c0 + 2 * sx, wd);
                var x3 = tap(n, c4, iy, c0 + 3 * sx, wd);
                for (var tx = 0; tx < kw; tx++) {
                    let v = w[wi];
                    a0 += x0 * v; a1 += x1 * v; a2 += x2 * v; a3 += x3 * v;
                    x0 = x1; x1 = x2; x2 = x3;
                    x3 = tap(n, c4, iy, c0 + (4 + tx) * sx, wd);
                    wi += 1;
                }
                continue;
            }
            for (var tx = 0; tx < kw; tx++) {
                let v = w[wi];
                let col = c0 + tx * dx;
                a0 += tap(n, c4, iy, col, wd) * v;
                a1 += tap(n, c4, iy, col + sx, wd) * v;
                a2 += tap(n, c4, iy, col + 2 * sx, wd) * v;
                a3 += tap(n, c4, iy, col + 3 * sx, wd) * v;
                wi += 1;
            }
        }
        store_y(n, c4, oy, ox0, finish(n, c4, oy, ox0, a0 + b));
        if (ox0 + 1 < stop) {
            store_y(n, c4, oy, ox0 + 1, finish(n, c4, oy, ox0 + 1, a1 + b));
        }
        if (ox0 + 2 < stop) {
            store_y(n, c4, oy, ox0 + 2, finish(n, c4, oy, ox0 + 2, a2 + b));
        }
        if (ox0 + 3 < stop) {
            store_y(n, c4, oy, ox0 + 3, finish(n, c4, oy, ox0 + 3, a3 + b));
        }
    }
}
