// Conv 2-D on NC4HW4 feature maps, one group, any strides / dilations / pads: 4 output slices (16
// channels) x 8 output pixels along W per invocation, so each loaded input pixel serves 16 output
// channels (the one-slice conv_nc4hw4.wgsl serves 4); per input slice and tap 16 w + 8 x loads for
// 512 FMAs. Weights are packed [tap][slice quad][input slice][16 vec4s: the 4 slices' 4x4
// matrices, column j = input lane j], zero-padded to whole quads; bias, residual and the fused
// activation {{ACT}} per lane in the epilogue. conv_paths.py picks it over the one-slice kernel
// when its cost estimate is lower (wide convs; not when padding channels to 16 wastes much).
// params: 0 = invocations, 1 = pixel blocks along W, 2 = output slice quads, 3 = input slices,
// 4..5 = kernel H W, 6..7 = strides, 8..9 = dilations, 10..11 = pads (top, left), 12 = has bias,
// 13 = alpha, 14 = beta (f32 bits), 15 = has residual, 16..20 x dims, 21..25 y dims, 26..30 r dims.
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

// include: conv/conv_epilogue.wgsl

fn weights(i: i32) -> mat4x4<{{FLOAT}}> {
    return mat4x4<{{FLOAT}}>(w[i], w[i + 1], w[i + 2], w[i + 3]);
}

// One pixel's results for the 4 output slices from o0, unless it is past the row's end.
fn put(n: i32, o0: i32, oy: i32, ox: i32, a: vec4<{{ACC}}>, b: vec4<{{ACC}}>, c: vec4<{{ACC}}>, d: vec4<{{ACC}}>) {
    if (ox < p(24u)) {
        store(n, o0, oy, ox, a);
        store(n, o0 + 1, oy, ox, b);
        store(n, o0 + 2, oy, ox, c);
        store(n, o0 + 3, oy, ox, d);
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let h = p(18u); let wd = p(19u); let oh = p(23u);
    let kh = p(4u); let kw = p(5u);
    let quads = p(2u); let c4s = p(3u);
    var rest = index;
    let ox0 = (rest % p(1u)) * 8; rest /= p(1u);
    let oy = rest % oh; rest /= oh;
    let o4 = rest % quads;
    let n = rest / quads;
    let sx = p(7u); let dx = p(9u);
    let la = vec4<i32>(ox0 * sx - p(11u)) + vec4<i32>(0, 1, 2, 3) * sx;  // first tap's columns, pixels 0-3
    let lb = la + vec4<i32>(4 * sx);  // pixels 4-7
    let zero = vec4<{{FLOAT}}>(0.0);
    let none = vec4<{{ACC}}>(0.0);
    var a0 = none; var a1 = none; var a2 = none; var a3 = none; var a4 = none; var a5 = none; var a6 = none; var a7 = none;
    var b0 = none; var b1 = none; var b2 = none; var b3 = none; var b4 = none; var b5 = none; var b6 = none; var b7 = none;
    var c0 = none; var c1 = none; var c2 = none; var c3 = none; var c4 = none; var c5 = none; var c6 = none; var c7 = none;
    var d0 = none; var d1 = none; var d2 = none; var d3 = none; var d4 = none; var d5 = none; var d6 = none; var d7 = none;
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
            var ui = ((ty * kw + tx) * quads + o4) * c4s * 16;
            for (var k = 0; k < c4s; k++) {
                let w0 = weights(ui); let w1 = weights(ui + 4); let w2 = weights(ui + 8); let w3 = weights(ui + 12);
                let x0 = select(zero, load_x(n, k, iy, ca.x), ma.x); let x1 = select(zero, load_x(n, k, iy, ca.y), ma.y);
                let x2 = select(zero, load_x(n, k, iy, ca.z), ma.z); let x3 = select(zero, load_x(n, k, iy, ca.w), ma.w);
                let x4 = select(zero, load_x(n, k, iy, cb.x), mb.x); let x5 = select(zero, load_x(n, k, iy, cb.y), mb.y);
                let x6 = select(zero, load_x(n, k, iy, cb.z), mb.z); let x7 = select(zero, load_x(n, k, iy, cb.w), mb.w);
                a0 += vec4<{{ACC}}>(w0 * x0); b0 += vec4<{{ACC}}>(w1 * x0); c0 += vec4<{{ACC}}>(w2 * x0); d0 += vec4<{{ACC}}>(w3 * x0);
                a1 += vec4<{{ACC}}>(w0 * x1); b1 += vec4<{{ACC}}>(w1 * x1); c1 += vec4<{{ACC}}>(w2 * x1); d1 += vec4<{{ACC}}>(w3 * x1);
                a2 += vec4<{{ACC}}>(w0 * x2); b2 += vec4<{{ACC}}>(w1 * x2); c2 += vec4<{{ACC}}>(w2 * x2); d2 += vec4<{{ACC}}>(w3 * x2);
                a3 += vec4<{{ACC}}>(w0 * x3); b3 += vec4<{{ACC}}>(w1 * x3); c3 += vec4<{{ACC}}>(w2 * x3); d3 += vec4<{{ACC}}>(w3 * x3);
                a4 += vec4<{{ACC}}>(w0 * x4); b4 += vec4<{{ACC}}>(w1 * x4); c4 += vec4<{{ACC}}>(w2 * x4); d4 += vec4<{{ACC}}>(w3 * x4);
                a5 += vec4<{{ACC}}>(w0 * x5); b5 += vec4<{{ACC}}>(w1 * x5); c5 += vec4<{{ACC}}>(w2 * x5); d5 += vec4<{{ACC}}>(w3 * x5);
                a6 += vec4<{{ACC}}>(w0 * x6); b6 += vec4<{{ACC}}>(w1 * x6); c6 += vec4<{{ACC}}>(w2 * x6); d6 += vec4<{{ACC}}>(w3 * x6);
                a7 += vec4<{{ACC}}>(w0 * x7); b7 += vec4<{{ACC}}>(w1 * x7); c7 += vec4<{{ACC}}>(w2 * x7); d7 += vec4<{{ACC}}>(w3 * x7);
                ui += 16;
            }
        }
    }
    let o0 = o4 * 4;
    put(n, o0, oy, ox0 + 0, a0, b0, c0, d0);
    put(n, o0, oy, ox0 + 1, a1, b1, c1, d1);
    put(n, o0, oy, ox0 + 2, a2, b2, c2, d2);
    put(n, o0, oy, ox0 + 3, a3, b3, c3, d3);
    put(n, o0, oy, ox0 + 4, a4, b4, c4, d4);
    put(n, o0, oy, ox0 + 5, a5, b5, c5, d5);
    put(n, o0, oy, ox0 + 6, a6, b6, c6, d6);
    put(n, o0, oy, ox0 + 7, a7, b7, c7, d7);
}
