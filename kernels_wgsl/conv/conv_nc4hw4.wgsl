// Conv 2-D on NC4HW4 feature maps (x, y through generated accessors, buffer or texture), groups
// whose channel counts are multiples of 4 (or one group), optional bias, fused activation {{ACT}}
// (a WGSL expression of v, alpha, beta, applied per lane), optional residual.
// Each invocation computes one output slice (4 output channels) x 8 output pixels along W (on
// lavapipe 1.4-1.7x faster than 4 pixels: the weight loads are shared by twice the pixels). Weights
// are repacked at prepare as vec4 over the slice's 4 output channels, [oc4][ky][kx][ic] with ic
// the group's input channel (padded to whole slices, zero weights): per input slice and tap, the
// 4 weight vec4s form a matrix m (column j = input lane j), and acc += m * x is 16 FMAs per pixel.
// Taps are outside the input-slice loop, so bounds checks stay out of the innermost loop.
// params: 0 = invocations, 1 = pixel blocks along W, 2 = output slices per group, 3 = input slices
// per group, 4..5 = kernel H W, 6..7 = strides, 8..9 = dilations, 10..11 = pads (top, left),
// 12 = has bias, 13 = alpha, 14 = beta (f32 bits), 15 = has residual (r, of y's shape, added before
// the activation), 16..20 x dims, 21..25 y dims, 26..30 r dims (N, C4, H, W, C).
// FLOAT is the multiply type of inputs and weights: 32-bit floats, or 16-bit ones for precision
// fp16-arith (weights packed so, accessors typed so); ACC the type the sums run in (conv_paths.py:
// 32-bit for these long sums). The epilogue is 32-bit, its result stored in the FLOAT type. No
// type names in comments: the loader enables 16-bit floats wherever their name appears.
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/conv_nc4hw4_block.wgsl

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(18u); let wd = p(19u);
    let kh = p(4u); let kw = p(5u);
    let o = block(index);
    let n = o.n; let oc4 = o.oc4; let oy = o.oy; let ic0 = o.ic0; let cg4 = p(3u);
    let sx = p(7u); let dx = p(9u);
    let la = vec4<i32>(o.ox0 * sx - p(11u)) + vec4<i32>(0, 1, 2, 3) * sx;  // first tap's columns, pixels 0-3
    let lb = la + vec4<i32>(4 * sx);  // pixels 4-7
    let zero = vec4<{{FLOAT}}>(0.0);
    let none = vec4<{{ACC}}>(0.0);

    var a0 = none; var a1 = none; var a2 = none; var a3 = none;
    var a4 = none; var a5 = none; var a6 = none; var a7 = none;
    for (var ty = 0; ty < kh; ty++) {
        let iy = oy * p(6u) - p(10u) + ty * p(8u);
        if (iy < 0 || iy >= h) {
            continue;
        }
        for (var tx = 0; tx < kw; tx++) {
            let ia = la + vec4<i32>(tx * dx);
            let ib = lb + vec4<i32>(tx * dx);
            let ma = (ia >= vec4<i32>(0)) & (ia < vec4<i32>(wd));
            let mb = (ib >= vec4<i32>(0)) & (ib < vec4<i32>(wd));
            let ca = clamp(ia, vec4<i32>(0), vec4<i32>(wd - 1));
            let cb = clamp(ib, vec4<i32>(0), vec4<i32>(wd - 1));
            var wi = ((oc4 * kh + ty) * kw + tx) * cg4 * 4;
            for (var c = ic0; c < ic0 + cg4; c++) {
                let m = mat4x4<{{FLOAT}}>(w[wi], w[wi + 1], w[wi + 2], w[wi + 3]);
                a0 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, ca.x), ma.x));
                a1 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, ca.y), ma.y));
                a2 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, ca.z), ma.z));
                a3 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, ca.w), ma.w));
                a4 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, cb.x), mb.x));
                a5 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, cb.y), mb.y));
                a6 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, cb.z), mb.z));
                a7 += vec4<{{ACC}}>(m * select(zero, load_x(n, c, iy, cb.w), mb.w));
                wi += 4;
            }
        }
    }

    put_block(o, array<vec4<{{ACC}}>, 8>(a0, a1, a2, a3, a4, a5, a6, a7));
}
