// The depthwise stage and pointwise products shared by dwpw_nc4hw4.wgsl and dwpw_expand_nc4hw4.wgsl
// (included by both), for a block of ROWS x COLS output pixels (rows x columns; ROWS is 1 or 2) at
// stride STRIDE: a depthwise 3x3 conv, dilation 1, bias and activation {{DW_ACT}}, one input slice
// at a time, then that slice's results times 4x4 pointwise weight blocks.
// The block's per-pixel lists are text parameters written out by conv_dwpw.block_text: {{ROW}} an
// input row's taps, {{MAC_ROW}} one kernel row applied to them, {{SUMS}} the block's rows in order,
// {{MAC}} a pointwise matrix applied to every pixel. (Written as loops of constant trip count, the
// 2 x 4 kernels ran as fast but compiled 2.5x slower on lavapipe: 450-560 ms against 180-230 ms.)
// Weights: depthwise [c4][ky][kx] -> vec4 over the slice's channels (as depthwise3x3_nc4hw4.wgsl).
// FLOAT is the arithmetic type of the taps, weights and products; sums run in ACC.
const ROWS = {{ROWS}};
const COLS = {{COLS}};
const STRIDE = {{STRIDE}};
const PIXELS = ROWS * COLS;
const IN_COLS = (COLS - 1) * STRIDE + 3;  // the input columns a block reads

// The op's project slices (1 to 8) in a kernel specialised for them, so that the sums of slices
// past them are neither compiled nor kept live (on lavapipe they spill from registers); 0: read
// from the params, one kernel for every op (quicker for the driver to have generated first).
override PROJECT_SLICES: i32 = 0;

// Whether project slice k exists (o4s: the params' count).
fn has_slice(k: i32, o4s: i32) -> bool {
    if (PROJECT_SLICES > 0) {
        return k < PROJECT_SLICES;
    }
    return k < o4s;
}

fn act_dw(v: f32, alpha: f32, beta: f32) -> f32 {
    return {{DW_ACT}};
}

// Input pixel (n, c4, iy, ix), or zeros in the padding.
fn tap(n: i32, c4: i32, iy: i32, ix: i32) -> vec4<{{FLOAT}}> {
    let inside = iy >= 0 && iy < p(18u) && ix >= 0 && ix < p(19u);
    return select(vec4<{{FLOAT}}>(0.0), load_x(n, c4, clamp(iy, 0, p(18u) - 1), clamp(ix, 0, p(19u) - 1)), inside);
}

fn kernel_row(i: i32) -> array<vec4<{{FLOAT}}>, 3> {
    return array<vec4<{{FLOAT}}>, 3>(vec4<{{FLOAT}}>(wd[i]), vec4<{{FLOAT}}>(wd[i + 1]), vec4<{{FLOAT}}>(wd[i + 2]));
}

// The IN_COLS input pixels of one row of the block, from (iy, ix).
fn row(n: i32, c4: i32, iy: i32, ix: i32) -> array<vec4<{{FLOAT}}>, IN_COLS> {
    return array<vec4<{{FLOAT}}>, IN_COLS>({{ROW}});
}

// acc (a row of COLS sums) plus the kernel row k applied to the input row x (column c of the
// output reads x[c * STRIDE .. c * STRIDE + 2]).
fn mac_row(acc: array<vec4<{{FLOAT}}>, COLS>, x: array<vec4<{{FLOAT}}>, IN_COLS>,
           k: array<vec4<{{FLOAT}}>, 3>) -> array<vec4<{{FLOAT}}>, COLS> {
    return array<vec4<{{FLOAT}}>, COLS>({{MAC_ROW}});
}

// Slice k's depthwise results (bias, activation) of the block whose input window starts at (iy, ix),
// pixel i at block row i / COLS, column i % COLS. Output row r reads input rows r * STRIDE ..
// r * STRIDE + 2: a second row shares the first's last rows, loaded once.
fn dw(n: i32, k: i32, iy: i32, ix: i32) -> array<vec4<{{FLOAT}}>, PIXELS> {
    let k0 = kernel_row(k * 9);
    let k1 = kernel_row(k * 9 + 3);
    let k2 = kernel_row(k * 9 + 6);
    var none: array<vec4<{{FLOAT}}>, COLS>;
    let x1 = row(n, k, iy + 1, ix);
    let x2 = row(n, k, iy + 2, ix);
    let top = mac_row(mac_row(mac_row(none, row(n, k, iy, ix), k0), x1, k1), x2, k2);
    var bottom: array<vec4<{{FLOAT}}>, COLS>;
    if (ROWS == 2) {
        let x3 = row(n, k, iy + 3, ix);
        if (STRIDE == 1) {
            bottom = mac_row(mac_row(mac_row(none, x1, k0), x2, k1), x3, k2);
        } else {
            bottom = mac_row(mac_row(mac_row(none, x2, k0), x3, k1), row(n, k, iy + 4, ix), k2);
        }
    }
    let sums = array<vec4<{{FLOAT}}>, PIXELS>({{SUMS}});
    let b = bias[k];
    let alpha = pf(8u);
    let beta = pf(9u);
    var out: array<vec4<{{FLOAT}}>, PIXELS>;
    for (var i = 0; i < PIXELS; i++) {
        let v = vec4<f32>(sums[i]) + b;
        out[i] = vec4<{{FLOAT}}>(vec4<f32>(act_dw(v.x, alpha, beta), act_dw(v.y, alpha, beta),
                                           act_dw(v.z, alpha, beta), act_dw(v.w, alpha, beta)));
    }
    return out;
}

fn mac_pixel(acc: vec4<{{ACC}}>, m: mat4x4<{{FLOAT}}>, d: vec4<{{FLOAT}}>) -> vec4<{{ACC}}> {
    return acc + vec4<{{ACC}}>(m * d);
}

// acc (one output slice's sums of the block's pixels) plus the 4x4 pointwise matrix at wp[i] times d.
fn mac(acc: array<vec4<{{ACC}}>, PIXELS>, i: i32, d: array<vec4<{{FLOAT}}>, PIXELS>) -> array<vec4<{{ACC}}>, PIXELS> {
    let m = mat4x4<{{FLOAT}}>(vec4<{{FLOAT}}>(wp[i]), vec4<{{FLOAT}}>(wp[i + 1]), vec4<{{FLOAT}}>(wp[i + 2]),
                              vec4<{{FLOAT}}>(wp[i + 3]));
    return array<vec4<{{ACC}}>, PIXELS>({{MAC}});
}

// The sums of the block's pixels for each project slice (at most 8): over the c4s input slices,
// the slice's depthwise results times the 4x4 pointwise blocks of wp, [input slice][project
// slice][4 columns] from wp[0].
struct ProjectSums {
    a0: array<vec4<{{ACC}}>, PIXELS>, a1: array<vec4<{{ACC}}>, PIXELS>,
    a2: array<vec4<{{ACC}}>, PIXELS>, a3: array<vec4<{{ACC}}>, PIXELS>,
    a4: array<vec4<{{ACC}}>, PIXELS>, a5: array<vec4<{{ACC}}>, PIXELS>,
    a6: array<vec4<{{ACC}}>, PIXELS>, a7: array<vec4<{{ACC}}>, PIXELS>,
}

fn project_sums(n: i32, iy: i32, ix: i32, c4s: i32, o4s: i32) -> ProjectSums {
    var s: ProjectSums;
    var wi = 0;
    for (var k = 0; k < c4s; k++) {
        let d = dw(n, k, iy, ix);
        s.a0 = mac(s.a0, wi, d);
        if (has_slice(1, o4s)) { s.a1 = mac(s.a1, wi + 4, d); }
        if (has_slice(2, o4s)) { s.a2 = mac(s.a2, wi + 8, d); }
        if (has_slice(3, o4s)) { s.a3 = mac(s.a3, wi + 12, d); }
        if (has_slice(4, o4s)) { s.a4 = mac(s.a4, wi + 16, d); }
        if (has_slice(5, o4s)) { s.a5 = mac(s.a5, wi + 20, d); }
        if (has_slice(6, o4s)) { s.a6 = mac(s.a6, wi + 24, d); }
        if (has_slice(7, o4s)) { s.a7 = mac(s.a7, wi + 28, d); }
        wi += o4s * 4;
    }
    return s;
}
