// Conv 2-D on NC4HW4 feature maps for one group and few input slices (an RGB network's stem),
// specialised to the conv: every invocation computes STEM_PIXELS (4) output pixels along W x all
// output slices (in groups of up to STEM_SLICES, 8; a group's sums are slices x pixels vec4s),
// its taps, input slices and output slices unrolled in its text (conv_paths.stem_text: WEIGHTS,
// TAPS) with the weights and bias written there as constants. On SIMD-across-invocations CPUs
// (llvmpipe) a weight read from a buffer costs ~10x the lane-wide multiply-add it feeds even at a
// constant index (a computed index ~16x); a constant costs nothing and products with zero weights
// (padding lanes) fold away, so the input loads bound the kernel: each input column is loaded
// once per tap row and shared by the pixels whose taps read it (where the W stride is a multiple
// of the W dilation). On GPUs the constants are immediates. Residual and the fused activation
// {{ACT}} (per lane) in the epilogue.
// params: 0 = invocations, 1 = pixel blocks along W, 4..5 = kernel H W, 6..7 = strides,
// 8..9 = dilations, 10..11 = pads (top, left), 13 = alpha, 14 = beta (f32 bits), 15 = has residual,
// 16..20 x dims, 21..25 y dims, 26..30 r dims (the other NC4HW4 conv kernels' slots).
// FLOAT is the multiply type of inputs and weights: 32-bit floats, or 16-bit ones for precision
// fp16-arith (constants and accessors typed so); ACC the type the sums run in (conv_paths.py). The
// epilogue is 32-bit, its result stored in the FLOAT type. No type names in comments: the loader
// enables 16-bit floats wherever their name appears.
// include: conv/stem_tap.wgsl
// include: conv/finish.wgsl
{{DECL_X}}
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

{{WEIGHTS}}

// Residual, activation and store of output pixel (n, oc4, oy, ox) (`sums`: its sums plus the
// bias), unless it is past the row's end.
fn put(n: i32, oc4: i32, oy: i32, ox: i32, sums: vec4<f32>) {
    if (ox >= p(24u)) {
        return;
    }
    store_y(n, oc4, oy, ox, vec4<{{FLOAT}}>(finish(n, oc4, oy, ox, sums)));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let oh = p(23u);
    // Pixel block fastest (neighbouring invocations read neighbouring input), then rows, batch.
    let ox0 = (index % p(1u)) * {{PIXELS}};
    let rest = index / p(1u);
    let oy = rest % oh;
    let n = rest / oh;
    let sx = p(7u); let dy = p(8u); let dx = p(9u);
    let iy0 = oy * p(6u) - p(10u);  // input row of tap row 0
    let cx0 = ox0 * sx - p(11u);  // input column of pixel 0 at tap column 0
{{TAPS}}
}
