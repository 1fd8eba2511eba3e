// Conv 2-D on NC4HW4 feature maps where the W stride equals the W dilation (e.g. 3x3 stride 1;
// used for kernels wider than 1): the 8 output pixels of a block read, for W tap t, input columns
// c0 + (k + t) * stride, k = 0..7, so moving to the next tap shifts the 8 loaded vec4s by one and
// loads one new column. Otherwise as conv_nc4hw4.wgsl: one output slice (4 channels) x 8 pixels
// along W per invocation, weights [oc4][ky][kx][ic] as vec4 over the slice's output channels,
// optional bias and residual, fused activation {{ACT}} per lane.
// params: as conv_nc4hw4.wgsl.
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

// include: conv/conv_nc4hw4_block.wgsl
// include: conv/row_tap.wgsl

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
    let sx = p(7u);
    let c0 = o.ox0 * sx - p(11u);  // input column of pixel 0 at tap 0
    let wtap = cg4 * 4;  // vec4s from one W tap to the next
    let zero = vec4<f32>(0.0);

    var a0 = zero; var a1 = zero; var a2 = zero; var a3 = zero;
    var a4 = zero; var a5 = zero; var a6 = zero; var a7 = zero;
    for (var ty = 0; ty < kh; ty++) {
        let iy = oy * p(6u) - p(10u) + ty * p(8u);
        if (iy < 0 || iy >= h) {
            continue;
        }
        var wrow = (oc4 * kh + ty) * kw * wtap;
        for (var c = ic0; c < ic0 + cg4; c++) {
            var x0 = tap(n, c, iy, c0, wd); var x1 = tap(n, c, iy, c0 + sx, wd);
            var x2 = tap(n, c, iy, c0 + 2 * sx, wd); var x3 = tap(n, c, iy, c0 + 3 * sx, wd);
            var x4 = tap(n, c, iy, c0 + 4 * sx, wd); var x5 = tap(n, c, iy, c0 + 5 * sx, wd);
            var x6 = tap(n, c, iy, c0 + 6 * sx, wd); var x7 = tap(n, c, iy, c0 + 7 * sx, wd);
            var wi = wrow;
            for (var tx = 0; tx < kw; tx++) {
                if (tx > 0) {
                    x0 = x1; x1 = x2; x2 = x3; x3 = x4; x4 = x5; x5 = x6; x6 = x7;
                    x7 = tap(n, c, iy, c0 + (7 + tx) * sx, wd);
                }
                let m = mat4x4<f32>(w[wi], w[wi + 1], w[wi + 2], w[wi + 3]);
                a0 += m * x0; a1 += m * x1; a2 += m * x2; a3 += m * x3;
                a4 += m * x4; a5 += m * x5; a6 += m * x6; a7 += m * x7;
                wi += wtap;
            }
            wrow += 4;
        }
    }

    put_block(o, array<vec4<f32>, 8>(a0, a1, a2, a3, a4, a5, a6, a7));
}
