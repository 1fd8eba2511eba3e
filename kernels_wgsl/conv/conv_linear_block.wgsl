// The 8 output channels x 8 pixels blocks of the blocked linear-layout conv kernels (conv.wgsl,
// conv_slide.wgsl; included by both): the block an invocation computes and where its input and
// weights start, its sums, their 64 multiply-adds per input channel and tap, and their stores
// (conv/conv_linear_store.wgsl). params as conv.wgsl; x, w as conv/conv_linear_io.wgsl.
// include: conv/conv_linear_store.wgsl

struct Block {
    n: i32,       // batch
    g: i32,       // group
    m0: i32,      // first output channel in the group (8 from it)
    oz: i32,      // output row (oz, oy), pixels ox0..ox0 + 7
    oy: i32,
    ox0: i32,
    x: i32,       // index in x of the block's first input channel (batch n, group g)
    w: i32,       // index in w of channel m0's first weight; w1..w7 of channels 1..7 from it
    w1: i32, w2: i32, w3: i32, w4: i32, w5: i32, w6: i32, w7: i32,
    taps: i32,    // from one input channel to the next in w and in x
    plane: i32,
}

// Invocation `index`'s block. Pixel block fastest (neighbouring invocations read neighbouring
// input), then rows, then channel blocks (all groups), then batch. Channels past the group's end
// reuse the last one's weights (their results are not stored), so every load stays in bounds.
fn block(index: u32) -> Block {
    let cin = p(2u); let cout = p(3u); let cg = p(4u); let mg = p(5u);
    let d = p(8u); let h = p(9u); let wd = p(10u);
    let od = p(12u); let oh = p(13u);
    let kd = p(16u); let kh = p(17u); let kw = p(18u);
    var rest = i32(index);
    let ox0 = (rest % p(7u)) * 8; rest /= p(7u);
    let oy = rest % oh; rest /= oh;
    let oz = rest % od; rest /= od;
    let blocks = p(6u);
    let g = (rest % (blocks * (cout / mg))) / blocks;
    let m0 = (rest % blocks) * 8;
    let n = rest / (blocks * (cout / mg));
    let taps = kd * kh * kw;
    let plane = d * h * wd;
    let stride = cg * taps;  // weights of one output channel
    let last = mg - 1 - m0;
    return Block(n, g, m0, oz, oy, ox0, (n * cin + g * cg) * plane, (g * mg + m0) * stride,
                 min(1, last) * stride, min(2, last) * stride, min(3, last) * stride, min(4, last) * stride,
                 min(5, last) * stride, min(6, last) * stride, min(7, last) * stride, taps, plane);
}

// a[j]: pixels 0-3 and b[j]: pixels 4-7 of the block's channel j.
struct Sums {
    a: array<vec4<f32>, 8>,
    b: array<vec4<f32>, 8>,
}

// One input channel at one tap: xa, xb its values at the block's pixels 0-3 and 4-7, wi the index
// in w of channel 0's weight: 8 weight loads for 64 multiply-adds.
fn fma8(s: ptr<function, Sums>, xa: vec4<f32>, xb: vec4<f32>, wi: i32, o: Block) {
    let v0 = w[wi]; (*s).a[0] += xa * v0; (*s).b[0] += xb * v0;
    let v1 = w[wi + o.w1]; (*s).a[1] += xa * v1; (*s).b[1] += xb * v1;
    let v2 = w[wi + o.w2]; (*s).a[2] += xa * v2; (*s).b[2] += xb * v2;
    let v3 = w[wi + o.w3]; (*s).a[3] += xa * v3; (*s).b[3] += xb * v3;
    let v4 = w[wi + o.w4]; (*s).a[4] += xa * v4; (*s).b[4] += xb * v4;
    let v5 = w[wi + o.w5]; (*s).a[5] += xa * v5; (*s).b[5] += xb * v5;
    let v6 = w[wi + o.w6]; (*s).a[6] += xa * v6; (*s).b[6] += xb * v6;
    let v7 = w[wi + o.w7]; (*s).a[7] += xa * v7; (*s).b[7] += xb * v7;
}

// The block's outputs: the channels inside the group, the pixels inside the row (store).
fn store_block(s: Sums, o: Block) {
    let cout = p(3u); let mg = p(5u);
    let od = p(12u); let oh = p(13u); let ow = p(14u);
    let oc = o.g * mg + o.m0;
    let count = mg - o.m0;  // channels of this block inside the group
    let out = (o.n * cout + oc) * od * oh * ow + (o.oz * oh + o.oy) * ow + o.ox0;
    let cols = ow - o.ox0;
    store(s.a[0], out, oc, 0, count, cols); store(s.b[0], out + 4, oc, 0, count, cols - 4);
    store(s.a[1], out, oc, 1, count, cols); store(s.b[1], out + 4, oc, 1, count, cols - 4);
    store(s.a[2], out, oc, 2, count, cols); store(s.b[2], out + 4, oc, 2, count, cols - 4);
    store(s.a[3], out, oc, 3, count, cols); store(s.b[3], out + 4, oc, 3, count, cols - 4);
    store(s.a[4], out, oc, 4, count, cols); store(s.b[4], out + 4, oc, 4, count, cols - 4);
    store(s.a[5], out, oc, 5, count, cols); store(s.b[5], out + 4, oc, 5, count, cols - 4);
    store(s.a[6], out, oc, 6, count, cols); store(s.b[6], out + 4, oc, 6, count, cols - 4);
    store(s.a[7], out, oc, 7, count, cols); store(s.b[7], out + 4, oc, 7, count, cols - 4);
}
