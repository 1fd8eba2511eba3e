// ConvDwPw on NC4HW4 feature maps: a depthwise 3x3 conv (dilation 1, stride 1 or 2; bias, fused
// activation {{DW_ACT}}) and the 1x1 conv that reads it (bias, residual, fused activation {{ACT}})
// in one pass, the depthwise result never leaving registers:
//   y = act(W_pw * dw_act(dw(x) + b_dw) + b_pw + r).
// Each invocation computes every output slice (at most 8: C_out <= 32) of a block of ROWS x COLS
// output pixels (text parameters; backends/wgpu/conv_dwpw.py picks the block from the output's
// size). Per input slice k it computes the block's depthwise results of slice k (dwpw_stage.wgsl),
// then adds W_pw[:, k] times them into the output sums: 4 weight vec4s (a 4x4 matrix) per output
// slice, shared by the block's pixels. Output slices past the output's are skipped by branches
// every invocation takes alike. (Measured on lavapipe: splitting the output slices among
// invocations for small images, each computing the depthwise results again, took 1.6x longer than
// 2 x 4 blocks: the weights' index then differs between lanes, and uniform loads become gathers.
// Smaller pixel blocks are what spreads a small image over the lanes.)
// Weights: depthwise [c4][ky][kx] -> vec4 over the slice's channels (as depthwise3x3_nc4hw4.wgsl);
// pointwise [k][o][4 columns: input lane j] -> vec4 over output slice o's channels, zero padded.
// bias: the depthwise slices' biases, then the output slices' (zeros where a stage has none).
// params: 0 = invocations, 1 = column blocks (of COLS), 3 = input slices, 4 = output slices,
// 6..7 = pads (top, left), 8..9 = depthwise alpha, beta, 10..11 = alpha, beta
// (f32 bits), 12 = row blocks (of ROWS), 16..20 x dims, 21..25 y dims, 26..30 r dims (N, C4, H, W, C).
// FLOAT is the arithmetic type of the depthwise taps, weights and sums and of the pointwise
// products; the pointwise sums run in ACC (as in gemm1x1_nc4hw4.wgsl: 16-bit products of one
// slice, added into 32-bit sums under precision fp16-arith). Biases and activations are 32-bit.
// No type names in comments: the loader enables 16-bit floats wherever their name appears.
// include: conv/dwpw_stage.wgsl
{{DECL_X}}
{{WD_DECL}}
{{WP_DECL}}
@group(0) @binding(3) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(6) var<uniform> params: Params;
override WG: u32 = 64u;
// Whether the op adds a residual: a constant, so that without one the residual loads are not
// compiled at all (on lavapipe they were a third of the expand kernel's compile time).
override RESIDUAL: bool = false;

// include: conv/activation.wgsl

// Bias, residual, activation and store of output slice o's pixels (the block from (oy, ox)),
// those that exist.
fn put(n: i32, o: i32, oy: i32, ox: i32, acc: array<vec4<{{ACC}}>, PIXELS>) {
    if (o >= p(4u)) {
        return;
    }
    let b = bias[p(3u) + o];
    let alpha = pf(10u);
    let beta = pf(11u);
    for (var i = 0; i < PIXELS; i++) {
        let y = oy + i / COLS;
        let x = ox + i % COLS;
        if (y < p(23u) && x < p(24u)) {
            var v = vec4<f32>(acc[i]) + b;
            if (RESIDUAL) {
                v += vec4<f32>(load_r(n, o, y, x));
            }
            let out = act4(v, alpha, beta);
            store_y(n, o, y, x, vec4<{{FLOAT}}>(out));
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let blocks = p(1u);
    let rows = p(12u);
    var rest = index;
    let ox = (rest % blocks) * COLS; rest /= blocks;
    let oy = (rest % rows) * ROWS;
    let n = rest / rows;
    let iy = oy * STRIDE - p(6u);
    let ix = ox * STRIDE - p(7u);
    let c4s = p(3u);
    let o4s = p(4u);
    let sums = project_sums(n, iy, ix, c4s, o4s);
    put(n, 0, oy, ox, sums.a0);
    if (has_slice(1, o4s)) { put(n, 1, oy, ox, sums.a1); }
    if (has_slice(2, o4s)) { put(n, 2, oy, ox, sums.a2); }
    if (has_slice(3, o4s)) { put(n, 3, oy, ox, sums.a3); }
    if (has_slice(4, o4s)) { put(n, 4, oy, ox, sums.a4); }
    if (has_slice(5, o4s)) { put(n, 5, oy, ox, sums.a5); }
    if (has_slice(6, o4s)) { put(n, 6, oy, ox, sums.a6); }
    if (has_slice(7, o4s)) { put(n, 7, oy, ox, sums.a7); }
}
