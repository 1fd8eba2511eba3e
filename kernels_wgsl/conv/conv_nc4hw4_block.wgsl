// The blocks of one output slice x 8 pixels along W of the direct NC4HW4 conv kernels
// (conv_nc4hw4.wgsl, conv_slide_nc4hw4.wgsl; included by both): the block an invocation computes
// and its stores (bias, then conv/finish.wgsl). params as conv_nc4hw4.wgsl; ACC and FLOAT as in
// those kernels.
// include: conv/finish.wgsl

struct Block {
    n: i32,    // batch
    oc4: i32,  // output slice
    oy: i32,   // output row, pixels ox0..ox0 + 7
    ox0: i32,
    ic0: i32,  // first input slice of oc4's group
}

// Invocation `index`'s block: pixel block fastest (neighbouring invocations read neighbouring
// input), then rows, slices, batch.
fn block(index: i32) -> Block {
    let oc4s = p(22u); let oh = p(23u);
    var rest = index;
    let ox0 = (rest % p(1u)) * 8; rest /= p(1u);
    let oy = rest % oh; rest /= oh;
    let oc4 = rest % oc4s;
    return Block(rest / oc4s, oc4, oy, ox0, (oc4 / p(2u)) * p(3u));
}

// Bias, residual, activation and store of output pixel (n, oc4, oy, ox) unless it is past the
// row's end.
fn put(n: i32, oc4: i32, oy: i32, ox: i32, acc: vec4<{{ACC}}>, b: vec4<f32>) {
    if (ox < p(24u)) {
        store_y(n, oc4, oy, ox, vec4<{{FLOAT}}>(finish(n, oc4, oy, ox, vec4<f32>(acc) + b)));
    }
}

// The block's outputs from its 8 pixels' sums.
fn put_block(o: Block, acc: array<vec4<{{ACC}}>, 8>) {
    var b = vec4<f32>(0.0);
    if (p(12u) != 0) {
        b = bias[o.oc4];
    }
    put(o.n, o.oc4, o.oy, o.ox0, acc[0], b); put(o.n, o.oc4, o.oy, o.ox0 + 1, acc[1], b);
    put(o.n, o.oc4, o.oy, o.ox0 + 2, acc[2], b); put(o.n, o.oc4, o.oy, o.ox0 + 3, acc[3], b);
    put(o.n, o.oc4, o.oy, o.ox0 + 4, acc[4], b); put(o.n, o.oc4, o.oy, o.ox0 + 5, acc[5], b);
    put(o.n, o.oc4, o.oy, o.ox0 + 6, acc[6], b); put(o.n, o.oc4, o.oy, o.ox0 + 7, acc[7], b);
}
