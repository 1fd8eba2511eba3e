// The MatMul kernels' epilogue (included by matmul_blocked, matmul_subgroup and matmul_tiled): each
// product element at row m, column n, scaled by alpha, plus beta times the bias C, plus the
// residual R, through the activation, stored where the params' Y strides put it; with SPLIT > 1
// (split_y) column n goes to output n / width (y, y1 or y2) at column n % width.
// Outputs of a split product (1: Y alone, y1 and y2 are Y again).
const SPLIT = {{SPLIT}};

fn act(v: {{T}}, alpha: {{T}}, beta: {{T}}) -> {{T}} {
    return {{ACT}};
}

fn epilogue(m: i32, n: i32, product: {{T}}, out_base: i32, co: i32) {
    var v = {{READ}}(6u) * product;
    if (p(30u) != 0) {
        v += {{READ}}(7u) * c[co + m * p(28u) + n * p(29u)];
    }
    let part = select(0, n / p(42u), SPLIT > 1);  // the division only when split
    let o = out_base + m * p(40u) + (n - part * p(42u)) * p(41u);
    if (p(35u) != 0) {  // the residual has Y's shape: read where Y goes
        v += res[o];
    }
    let value = act(v, {{READ}}(31u), {{READ}}(32u));
    if (part == 0) {
        y[o] = value;
    } else if (part == 1) {
        y1[o] = value;
    } else {
        y2[o] = value;
    }
}

// 4 columns of one row from n0; rows past M and columns past N are not stored.
fn store4(m: i32, n0: i32, acc: vec4<{{T}}>, out_base: i32, co: i32) {
    let n_size = p(1u);
    if (m >= p(0u)) {
        return;
    }
    for (var j = 0; j < 4; j++) {
        let n = n0 + j;
        if (n >= n_size) {
            return;
        }
        epilogue(m, n, acc[j], out_base, co);
    }
}
