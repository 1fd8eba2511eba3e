// Conv 2-D on NC4HW4 feature maps, one group, any kernel / strides / dilations / pads, as an
// implicit GEMM tiled in workgroup memory, for real GPUs: a workgroup of 64 invocations (WG must
// be 64) computes a tile of 64 output pixels (numbered over N, H, W) x 16 output slices (64
// channels). Its K steps are (tap, 4 input slices): per step the workgroup stages the 64 pixels'
// input vec4s (the im2col rows, gathered on the fly, zero outside the input) and the step's 16 x 4
// weight matrices in workgroup memory, each invocation staging 4 of each, consecutive invocations
// on consecutive pixels and weights (coalesced loads). Each invocation fetches its share of the
// next step into registers while the current step's products run, and computes 4 pixels (16
// apart) x 4 output slices (4 apart): per input slice 4 + 16 vec4 reads of workgroup memory for 64
// multiply-adds of vec4s (broadcast reads of the weights: a warp's invocations share 2 slices).
// Weights are packed [tap][block of 16 output slices][chunk of 4 input slices][input slice]
// [output slice][4 columns], each column a vec4 over the slice's output channels (conv_paths.py
// pack_blocks; zero-padded to whole blocks and chunks); bias, residual and the fused activation
// {{ACT}} per lane in the epilogue.
// params: 0 = workgroups (pixel tiles x slice blocks), 1 = pixel tiles, 2 = input chunks, 3 = input
// slices, 4..5 = kernel H W, 6..7 = strides, 8..9 = dilations, 10..11 = pads (top, left), 12 = has
// bias, 13 = alpha, 14 = beta (f32 bits), 15 = has residual, 16..20 x dims, 21..25 y dims, 26..30
// r dims.
{{DECL_X}}
{{W_DECL}}
@group(0) @binding(2) var<storage, read_write> bias: array<vec4<f32>>;
{{DECL_Y}}
{{DECL_R}}
@group(0) @binding(5) var<uniform> params: Params;
override WG: u32 = 64u;

const PIXELS = 64;  // output pixels of a tile; one staged per invocation
const STAGED = 256;  // vec4s of each staged operand per K step: 4 input slices x 64 pixels, 4 x 16 x 4 weights
var<workgroup> x_tile: array<vec4<{{FLOAT}}>, STAGED>;  // [input slice][pixel]
var<workgroup> w_tile: array<vec4<{{FLOAT}}>, STAGED>;  // [input slice][output slice][column]

// include: conv/conv_epilogue.wgsl

// The input vec4 of input slice c4 at (iy, ix) of image n, zero outside the input (or where the
// staged pixel is past the output: `inside` false).
fn fetch_x(n: i32, c4: i32, iy: i32, ix: i32, inside: bool) -> vec4<{{FLOAT}}> {
    if (inside && c4 < p(3u) && iy >= 0 && iy < p(18u) && ix >= 0 && ix < p(19u)) {
        return load_x(n, c4, iy, ix);
    }
    return vec4<{{FLOAT}}>(0.0);
}

fn weights(i: i32) -> mat4x4<{{FLOAT}}> {
    return mat4x4<{{FLOAT}}>(w_tile[i], w_tile[i + 1], w_tile[i + 2], w_tile[i + 3]);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let group = i32(wid.x + wid.y * nwg.x);
    if (group >= p(0u)) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let tiles = p(1u);
    let tile = group % tiles;
    let block = group / tiles;
    let l = i32(local);
    let oh = p(23u); let ow = p(24u);
    let total = p(21u) * oh * ow;
    // The pixel this invocation stages, and its first tap's input coordinates.
    let staged = tile * PIXELS + l;
    let inside = staged < total;
    let sn = staged / (oh * ow);
    let iy0 = (staged / ow) % oh * p(6u) - p(10u);
    let ix0 = staged % ow * p(7u) - p(11u);
    let kw = p(5u);
    let chunks = p(2u);
    let steps = p(4u) * kw * chunks;
    let weights_per_tap = (p(0u) / tiles) * chunks * STAGED;
    let w0 = block * chunks * STAGED + l;
    let pg = l % 16;  // this invocation's pixels: pg + 16 j of the tile
    let sg = l / 16;  // and output slices: sg + 4 i of the block
    let zero = vec4<f32>(0.0);
    var a00 = zero; var a01 = zero; var a02 = zero; var a03 = zero;  // a<pixel j><slice i>
    var a10 = zero; var a11 = zero; var a12 = zero; var a13 = zero;
    var a20 = zero; var a21 = zero; var a22 = zero; var a23 = zero;
    var a30 = zero; var a31 = zero; var a32 = zero; var a33 = zero;
    // Step 0's share (tap 0, input slices 0..3), then each step's next share while it runs.
    var nx0 = fetch_x(sn, 0, iy0, ix0, inside); var nx1 = fetch_x(sn, 1, iy0, ix0, inside);
    var nx2 = fetch_x(sn, 2, iy0, ix0, inside); var nx3 = fetch_x(sn, 3, iy0, ix0, inside);
    var nw0 = w[w0]; var nw1 = w[w0 + 64]; var nw2 = w[w0 + 128]; var nw3 = w[w0 + 192];
    for (var s = 0; s < steps; s++) {
        x_tile[l] = nx0; x_tile[l + 64] = nx1; x_tile[l + 128] = nx2; x_tile[l + 192] = nx3;
        w_tile[l] = nw0; w_tile[l + 64] = nw1; w_tile[l + 128] = nw2; w_tile[l + 192] = nw3;
        workgroupBarrier();
        let t = s + 1;
        if (t < steps) {
            let tap = t / chunks;
            let c0 = (t % chunks) * 4;
            let iy = iy0 + (tap / kw) * p(8u);
            let ix = ix0 + (tap % kw) * p(9u);
            nx0 = fetch_x(sn, c0, iy, ix, inside); nx1 = fetch_x(sn, c0 + 1, iy, ix, inside);
            nx2 = fetch_x(sn, c0 + 2, iy, ix, inside); nx3 = fetch_x(sn, c0 + 3, iy, ix, inside);
            let wi = tap * weights_per_tap + w0 + (t % chunks) * STAGED;
            nw0 = w[wi]; nw1 = w[wi + 64]; nw2 = w[wi + 128]; nw3 = w[wi + 192];
        }
        for (var k = 0; k < 4; k++) {
            let x0 = vec4<f32>(x_tile[k * PIXELS + pg]); let x1 = vec4<f32>(x_tile[k * PIXELS + pg + 16]);
            let x2 = vec4<f32>(x_tile[k * PIXELS + pg + 32]); let x3 = vec4<f32>(x_tile[k * PIXELS + pg + 48]);
            let m0 = mat4x4<f32>(weights((k * 16 + sg) * 4)); let m1 = mat4x4<f32>(weights((k * 16 + sg + 4) * 4));
            let m2 = mat4x4<f32>(weights((k * 16 + sg + 8) * 4)); let m3 = mat4x4<f32>(weights((k * 16 + sg + 12) * 4));
            a00 += m0 * x0; a01 += m1 * x0; a02 += m2 * x0; a03 += m3 * x0;
            a10 += m0 * x1; a11 += m1 * x1; a12 += m2 * x1; a13 += m3 * x1;
            a20 += m0 * x2; a21 += m1 * x2; a22 += m2 * x2; a23 += m3 * x2;
            a30 += m0 * x3; a31 += m1 * x3; a32 += m2 * x3; a33 += m3 * x3;
        }
        workgroupBarrier();
    }
    let o0 = block * 16 + sg;
    for (var j = 0; j < 4; j++) {
        let pixel = tile * PIXELS + pg + 16 * j;
        if (pixel < total) {
            let n = pixel / (oh * ow);
            let oy = (pixel / ow) % oh;
            let ox = pixel % ow;
            var r0 = a00; var r1 = a01; var r2 = a02; var r3 = a03;
            if (j == 1) { r0 = a10; r1 = a11; r2 = a12; r3 = a13; }
            if (j == 2) { r0 = a20; r1 = a21; r2 = a22; r3 = a23; }
            if (j == 3) { r0 = a30; r1 = a31; r2 = a32; r3 = a33; }
            store(n, o0, oy, ox, r0);
            store(n, o0 + 4, oy, ox, r1);
            store(n, o0 + 8, oy, ox, r2);
            store(n, o0 + 12, oy, ox, r3);
        }
    }
}
