// LSTM / GRU / RNN recurrence, one dispatch per time step (the variant for software adapters,
// where a barrier-free shader runs much faster than recurrence.wgsl's workgroup loop): invocation
// (direction, batch row, hidden unit) computes every gate of its unit for step s. The previous h
// is read from Y at the previously processed time (initial_h at step 0), the LSTM cell state is
// updated in place in Y_c (each unit touches its own), Y_h is written at a sequence's last step.
// GRU without linear_before_reset runs two dispatches per step: z into Y[t] and r * h into Y_h
// (scratch), then the candidate; a last dispatch copies Y_h from Y. Inputs, outputs and params
// as recurrence.wgsl (a bad sequence length is reported and clamped); 50 step s, 51 mode (0 step,
// 1 GRU candidate, 2 GRU Y_h from Y).
@group(0) @binding(0) var<storage, read_write> xw: array<f32>;
@group(0) @binding(1) var<storage, read_write> rw: array<f32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> lens: array<i32>;
@group(0) @binding(4) var<storage, read_write> h0: array<f32>;
@group(0) @binding(5) var<storage, read_write> c0: array<f32>;
@group(0) @binding(6) var<storage, read_write> peep: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;
@group(0) @binding(8) var<storage, read_write> y_h: array<f32>;
@group(0) @binding(9) var<storage, read_write> y_c: array<f32>;
@group(0) @binding(10) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(11) var<uniform> params: Params;
// include: rnn/shared.wgsl
override WG: u32 = 64u;

// Element `at` of the state source: 0 initial_h, 1 Y, 2 Y_h (GRU's r * h).
fn state(src: u32, at: u32) -> f32 {
    switch src {
        case 0u: { return h0[at]; }
        case 1u: { return y[at]; }
        default: { return y_h[at]; }
    }
}

// sum_k state[base + k] * R[gate row, k] for `count` gates whose rows start at r0, gstride apart.
fn recurrent(src: u32, base: u32, r0: u32, gstride: u32, count: u32) -> vec4<f32> {
    let size = pu(2u);
    let sk = pu(27u);
    var acc = vec4<f32>();
    for (var k = 0u; k < size; k++) {
        let v = state(src, base + k);
        let r = r0 + k * sk;
        var row = vec4<f32>(rw[r], 0.0, 0.0, 0.0);
        if (count > 1u) { row.y = rw[r + gstride]; }
        if (count > 2u) { row.z = rw[r + 2u * gstride]; }
        if (count > 3u) { row.w = rw[r + 3u * gstride]; }
        acc += v * row;
    }
    return acc;
}

// Input projection of gate g plus Wb (and Rb where it adds outside the GRU reset).
fn gate_x(xo: u32, bo: u32, g: u32, j: u32, with_rb: bool) -> f32 {
    let size = pu(2u);
    var v = xw[xo + g * size + j];
    if (p(5u) != 0) {
        v += bias[bo + g * size + j];
        if (with_rb) {
            v += bias[bo + (pu(28u) + g) * size + j];
        }
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let steps = pu(0u);
    let batch = pu(1u);
    let size = pu(2u);
    let direction = pu(4u);
    let index = linear_id(gid, nwg, WG);
    if (index >= select(1u, 2u, direction == 2u) * batch * size) {
        return;
    }
    let j = index % size;
    let n = (index / size) % batch;
    let d = index / (size * batch);
    let reverse = direction == 1u || d == 1u;
    let len = sequence_length(n, steps);
    let s = pu(50u);
    let mode = p(51u);
    let so = d * pu(23u) + n * pu(24u);
    let yo = d * pu(20u) + n * pu(21u);
    let yt = pu(22u);
    if (mode == 2) {  // GRU Y_h: the last valid step's h, zeros for an empty sequence
        if (p(11u) != 0) {
            y_h[so + j] = select(0.0, y[yo + select(len - 1u, 0u, reverse) * yt + j], len > 0u);
        }
        return;
    }
    if (s >= len) {
        if (mode == 0) {
            if (p(10u) != 0) {
                y[yo + s * yt + j] = 0.0;  // past the sequence's end (either direction)
            }
            if (s == 0u) {  // an empty sequence: zero states (as onnxruntime)
                if (p(11u) != 0 && !(p(3u) == 1 && p(13u) == 0)) { y_h[so + j] = 0.0; }
                if (p(12u) != 0) { y_c[so + j] = 0.0; }
            }
        }
        return;
    }
    let t = select(s, len - 1u - s, reverse);
    // The previous h: initial_h (or zeros) at step 0, else Y at the previously processed time.
    let src = select(1u, 0u, s == 0u);
    let base = select(yo + select(t - 1u, t + 1u, reverse) * yt, so, s == 0u);
    let has_prev = s > 0u || p(7u) != 0;
    let xo = d * pu(17u) + n * pu(18u) + t * pu(19u);
    let bo = d * 2u * pu(28u) * size;
    let rs = pu(26u);
    let r0 = d * pu(25u) + j * rs;
    let gstride = size * rs;
    let cell = p(3u);
    var h = 0.0;
    if (mode == 1) {  // GRU candidate: g(x_h + (r * h) R_h^T + Rb_h + Wb_h)
        let acc = recurrent(2u, so, r0 + 2u * gstride, 0u, 1u);
        let z = y[yo + t * yt + j];
        let h_prev = select(0.0, state(src, base + j), has_prev);
        h = (1.0 - z) * activate(1u, d, gate_x(xo, bo, 2u, j, true) + acc.x) + z * h_prev;
    } else {
        let count = array<u32, 3>(1u, select(2u, 3u, p(13u) != 0), 4u)[cell];
        var acc = vec4<f32>();
        if (has_prev) {
            acc = recurrent(src, base, r0, gstride, count);
        }
        let h_prev = select(0.0, state(src, base + j), has_prev);
        if (cell == 0) {
            h = activate(0u, d, gate_x(xo, bo, 0u, j, true) + acc.x);
        } else if (cell == 2) {  // gates i, o, f, c
            var c_prev = 0.0;
            if (s > 0u) {
                c_prev = y_c[so + j];
            } else if (p(8u) != 0) {
                c_prev = c0[so + j];
            }
            var peeps = vec3<f32>();
            if (p(9u) != 0) {
                let po = d * 3u * size + j;
                peeps = vec3<f32>(peep[po], peep[po + size], peep[po + 2u * size]);
            }
            let i = activate(0u, d, gate_x(xo, bo, 0u, j, true) + acc.x + peeps.x * c_prev);
            var f = 1.0 - i;
            if (p(14u) == 0) {
                f = activate(0u, d, gate_x(xo, bo, 2u, j, true) + acc.z + peeps.z * c_prev);
            }
            let c = f * c_prev + i * activate(1u, d, gate_x(xo, bo, 3u, j, true) + acc.w);
            let o = activate(0u, d, gate_x(xo, bo, 1u, j, true) + acc.y + peeps.y * c);
            y_c[so + j] = c;
            h = o * activate(2u, d, c);
        } else {  // GRU gates z, r (, h)
            let z = activate(0u, d, gate_x(xo, bo, 0u, j, true) + acc.x);
            let r = activate(0u, d, gate_x(xo, bo, 1u, j, true) + acc.y);
            if (p(13u) == 0) {
                y[yo + t * yt + j] = z;  // for the candidate dispatch, which overwrites it with h
                y_h[so + j] = r * h_prev;
                return;
            }
            let rb = select(0.0, bias[bo + (pu(28u) + 2u) * size + j], p(5u) != 0);
            h = (1.0 - z) * activate(1u, d, gate_x(xo, bo, 2u, j, false) + r * (acc.z + rb)) + z * h_prev;
        }
    }
    y[yo + t * yt + j] = h;
    if (s + 1u == len && p(11u) != 0 && mode == 0) {
        y_h[so + j] = h;
    }
}

{{REPORT_BAD}}
