// ConvMaxPool on NC4HW4 feature maps for one group and one input slice (an RGB network's stem
// followed by a max pool whose windows tile the conv output: pool kernel = pool strides),
// specialised to the op as conv_stem_nc4hw4.wgsl is to its conv: y = maxpool(act(conv(x) + b)),
// z (when the op keeps it) the conv output itself. Each invocation computes {{POOLED}} pooled
// pixels of one pooled row: the conv outputs of their windows (pool kernel H rows x {{POOLED}}
// x pool kernel W columns) for all output slices, with taps, input rows and columns and output
// slices unrolled in its text (conv_paths.stem_text: WEIGHTS, TAPS) and the weights and bias
// written there as constants; each input row and column is loaded once per group of output slices
// and shared by the conv outputs that read it (where the stride is a multiple of the dilation).
// Then per conv output the fused activation {{ACT}} and the store to z (conv_out), and the max of
// each window into its pooled pixel (pool_put). Conv outputs outside the conv output take no part
// (MaxPool pads with -inf): windows at the edges may be partial (pool pads, ceil_mode). With z the
// grid covers every conv output (cells past the pooled output store z only).
// params: 0 = invocations, 1 = pooled column blocks (of {{POOLED}}), 2 = pooled rows (cells),
// 4..5 = kernel H W, 6..7 = strides, 8..9 = dilations, 10..11 = pads (top, left), 13 = alpha,
// 14 = beta (f32 bits), 15 = -inf (f32 bits), 16..20 x dims, 21..25 y dims, 26..30 dims of the
// conv output (z), 31..32 = pool kernel H W (= its strides), 33..34 = pool pads (top, left).
// FLOAT is the multiply type of inputs and weights: 32-bit floats, or 16-bit ones for precision
// fp16-arith (constants and accessors typed so); the sums run in 32 bits, as do the epilogue and
// the maxima, stored in the FLOAT type. No type names in comments: the loader enables 16-bit
// floats wherever their name appears.
// include: conv/stem_tap.wgsl
{{DECL_X}}
{{DECL_Y}}
{{DECL_Z}}
@group(0) @binding({{PARAMS_BINDING}}) var<uniform> params: Params;
override WG: u32 = 64u;

{{WEIGHTS}}

// Conv output (n, oc4, cy, cx) from `sums` (its sums plus the bias): the activation, its store to
// z where the op keeps it; -inf (no part in the max) outside the conv output.
fn conv_out(n: i32, oc4: i32, cy: i32, cx: i32, sums: vec4<f32>) -> vec4<f32> {
    let alpha = pf(13u);
    let beta = pf(14u);
    let out = act4(sums, alpha, beta);
    let inside = cy >= 0 && cy < p(28u) && cx >= 0 && cx < p(29u);
    if (inside) {
        store_z(n, oc4, cy, cx, vec4<{{FLOAT}}>(out));
    }
    return select(vec4<f32>(pf(15u)), out, inside);
}

// Store pooled pixel (n, oc4, py, px) unless it is past the pooled output (a cell for z only).
fn pool_put(n: i32, oc4: i32, py: i32, px: i32, m: vec4<f32>) {
    if (py < p(23u) && px < p(24u)) {
        store_y(n, oc4, py, px, vec4<{{FLOAT}}>(m));
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    // Pooled column block fastest (neighbouring invocations read neighbouring input), then pooled
    // rows, batch.
    let px0 = (index % p(1u)) * {{POOLED}};
    let rest = index / p(1u);
    let py = rest % p(2u);
    let n = rest / p(2u);
    let oy0 = py * p(31u) - p(33u);  // conv row of the windows' first row
    let ox0 = px0 * p(32u) - p(34u);  // conv column of the first window's first column
    let sy = p(6u); let sx = p(7u); let dy = p(8u); let dx = p(9u);
    let iy0 = oy0 * sy - p(10u);  // input row of conv row oy0 at tap row 0
    let cx0 = ox0 * sx - p(11u);  // input column of conv column ox0 at tap column 0
{{TAPS}}
}
