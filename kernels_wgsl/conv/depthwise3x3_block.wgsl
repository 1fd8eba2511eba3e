// The block, weights, input taps and stores of the 4 x 4 block depthwise 3x3 kernels
// (depthwise3x3_nc4hw4.wgsl, depthwise3x3s2_nc4hw4.wgsl; included by both): column and row blocks
// at params 1 and 2, has bias at 12, x's dims at 16..20, y's at 21..25, the epilogue as
// conv/finish.wgsl. FLOAT as in those kernels.
// include: conv/finish.wgsl

// The block invocation `index` computes: batch n, slice c4, top-left output pixel (oy, ox).
struct Block {
    n: i32,
    c4: i32,
    oy: i32,
    ox: i32,
}

fn block_at(index: i32) -> Block {
    let c4s = p(22u);
    var rest = index;
    let ox = (rest % p(1u)) * 4; rest /= p(1u);
    let oy = (rest % p(2u)) * 4; rest /= p(2u);
    return Block(rest / c4s, rest % c4s, oy, ox);
}

// Row r of slice c4's kernel (weights [c4][ky][kx], each a vec4 over the slice's channels).
fn kernel_row(c4: i32, r: i32) -> array<vec4<{{FLOAT}}>, 3> {
    let wi = c4 * 9 + r * 3;
    return array<vec4<{{FLOAT}}>, 3>(w[wi], w[wi + 1], w[wi + 2]);
}

// The slice's bias, or zeros without one.
fn slice_bias(c4: i32) -> vec4<f32> {
    if (p(12u) != 0) {
        return bias[c4];
    }
    return vec4<f32>(0.0);
}

// Input pixel (n, c4, iy, ix), or zeros in the padding.
fn tap(n: i32, c4: i32, iy: i32, ix: i32) -> vec4<{{FLOAT}}> {
    let inside = iy >= 0 && iy < p(18u) && ix >= 0 && ix < p(19u);
    return select(vec4<{{FLOAT}}>(0.0), load_x(n, c4, clamp(iy, 0, p(18u) - 1), clamp(ix, 0, p(19u) - 1)), inside);
}

// Bias, residual, activation and store of output pixel (n, c4, oy, ox) when it is inside.
fn put(n: i32, c4: i32, oy: i32, ox: i32, acc: vec4<{{FLOAT}}>, b: vec4<f32>) {
    if (oy < p(23u) && ox < p(24u)) {
        store_y(n, c4, oy, ox, vec4<{{FLOAT}}>(finish(n, c4, oy, ox, vec4<f32>(acc) + b)));
    }
}

fn put_row(n: i32, c4: i32, oy: i32, ox: i32, acc: array<vec4<{{FLOAT}}>, 4>, b: vec4<f32>) {
    put(n, c4, oy, ox, acc[0], b);
    put(n, c4, oy, ox + 1, acc[1], b);
    put(n, c4, oy, ox + 2, acc[2], b);
    put(n, c4, oy, ox + 3, acc[3], b);
}
