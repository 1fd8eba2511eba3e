// LSTM / GRU / RNN recurrence over precomputed input projections xw (engine/ops/rnn.py), in one
// dispatch: one workgroup per (direction, batch row) loops over the time steps; invocation l owns
// hidden units l, l + WG, ...; the hidden state lives in workgroup memory (two buffers swapped
// every step, so one barrier per step separates its readers from its writers). GRU without
// linear_before_reset needs r * h of every unit before any candidate: a second phase and barrier.
// Absent optional tensors are bound to stand-ins and never touched (flags). A sequence length
// outside [0, T] is reported to the host (report_bad, check = batch row), which raises the numpy
// backend's InputError; the kernel runs on with it clamped.
// params: 0 T, 1 N, 2 H, 3 cell (0 RNN, 1 GRU, 2 LSTM), 4 direction (0 fwd, 1 rev, 2 bidi),
// 5 has B, 6 has lens, 7 has h0, 8 has c0, 9 has P, 10 write Y, 11 write Y_h, 12 write Y_c,
// 13 linear_before_reset, 14 input_forget, 15 has clip, 16 clip, 17..19 xw strides (dir, n, t),
// 20..22 Y strides (dir, n, t), 23..24 state strides (dir, n), 25..27 R strides (dir, row, k),
// 28 gates, 32..37 activation ids (dir 0 f g h, dir 1 f g h), 38..43 alphas, 44..49 betas, 63 status id.
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

const MAXH: u32 = 512u;  // units per state array (backends/wgpu/rnn.py refuses larger H)
const RH: u32 = 1024u;  // r * h of the GRU candidate
const OWN: u32 = 1536u;  // c (LSTM) or z (GRU) of each unit: only its owner touches it
// [0, MAXH) and [MAXH, 2 MAXH): h before even / odd steps, then RH and OWN.
var<workgroup> mem: array<f32, 2048>;

fn r4(at: u32, sk: u32) -> vec4<f32> {
    return vec4<f32>(rw[at], rw[at + sk], rw[at + 2u * sk], rw[at + 3u * sk]);
}

// sum_k mem[src + k] * R[gate row, k] for `count` gates whose rows start at r0, gstride apart.
fn recurrent(src: u32, r0: u32, gstride: u32, count: u32) -> vec4<f32> {
    let size = pu(2u);
    let sk = pu(27u);
    var acc = vec4<f32>();
    var k = 0u;
    for (; k + 4u <= size; k += 4u) {
        let v = vec4<f32>(mem[src + k], mem[src + k + 1u], mem[src + k + 2u], mem[src + k + 3u]);
        let r = r0 + k * sk;
        acc.x += dot(v, r4(r, sk));
        if (count > 1u) { acc.y += dot(v, r4(r + gstride, sk)); }
        if (count > 2u) { acc.z += dot(v, r4(r + 2u * gstride, sk)); }
        if (count > 3u) { acc.w += dot(v, r4(r + 3u * gstride, sk)); }
    }
    for (; k < size; k++) {
        let r = r0 + k * sk;
        var row = vec4<f32>(rw[r], 0.0, 0.0, 0.0);
        for (var g = 1u; g < count; g++) {
            row[g] = rw[r + g * gstride];
        }
        acc += mem[src + k] * row;
    }
    return acc;
}

struct Row {
    d: u32,  // direction
    xo: u32,  // xw offset of (d, n, t = 0)
    yo: u32,  // Y offset of (d, n, t = 0)
    so: u32,  // state offset of (d, n)
    bo: u32,  // bias offset of direction d
    ro: u32,  // R offset of direction d
}

// Input projection of gate g, unit j at time t, with Wb (and Rb where it adds outside the reset).
fn gate_x(row: Row, t: u32, g: u32, j: u32, with_rb: bool) -> f32 {
    let size = pu(2u);
    var v = xw[row.xo + t * pu(19u) + g * size + j];
    if (p(5u) != 0) {
        v += bias[row.bo + g * size + j];
        if (with_rb) {
            v += bias[row.bo + (pu(28u) + g) * size + j];
        }
    }
    return v;
}

fn r_bias(row: Row, g: u32, j: u32) -> f32 {
    let size = pu(2u);
    return select(0.0, bias[row.bo + (pu(28u) + g) * size + j], p(5u) != 0);
}

fn emit(row: Row, t: u32, j: u32, value: f32, next: u32) {
    mem[next + j] = value;
    if (p(10u) != 0) {
        y[row.yo + t * pu(22u) + j] = value;
    }
}

// One step of unit j: reads h from mem[cur ..], writes the new h to mem[next ..] (except GRU
// without linear_before_reset, which leaves z and r * h for candidate_step).
fn cell_step(row: Row, t: u32, j: u32, cur: u32, next: u32) {
    let size = pu(2u);
    let rs = pu(26u);
    let r0 = row.ro + j * rs;
    let gstride = size * rs;
    let cell = p(3u);
    if (cell == 0) {
        let acc = recurrent(cur, r0, gstride, 1u);
        emit(row, t, j, activate(0u, row.d, gate_x(row, t, 0u, j, true) + acc.x), next);
    } else if (cell == 2) {
        let acc = recurrent(cur, r0, gstride, 4u);  // gates i, o, f, c
        let c_prev = mem[OWN + j];
        var peeps = vec3<f32>();
        if (p(9u) != 0) {
            let po = row.d * 3u * size + j;
            peeps = vec3<f32>(peep[po], peep[po + size], peep[po + 2u * size]);
        }
        let i = activate(0u, row.d, gate_x(row, t, 0u, j, true) + acc.x + peeps.x * c_prev);
        var f = 1.0 - i;
        if (p(14u) == 0) {
            f = activate(0u, row.d, gate_x(row, t, 2u, j, true) + acc.z + peeps.z * c_prev);
        }
        let c = f * c_prev + i * activate(1u, row.d, gate_x(row, t, 3u, j, true) + acc.w);
        let o = activate(0u, row.d, gate_x(row, t, 1u, j, true) + acc.y + peeps.y * c);
        mem[OWN + j] = c;
        emit(row, t, j, o * activate(2u, row.d, c), next);
    } else {
        let linear = p(13u) != 0;
        let acc = recurrent(cur, r0, gstride, select(2u, 3u, linear));  // gates z, r (, h)
        let z = activate(0u, row.d, gate_x(row, t, 0u, j, true) + acc.x);
        let r = activate(0u, row.d, gate_x(row, t, 1u, j, true) + acc.y);
        let h_prev = mem[cur + j];
        if (linear) {
            let candidate = activate(1u, row.d, gate_x(row, t, 2u, j, false) + r * (acc.z + r_bias(row, 2u, j)));
            emit(row, t, j, (1.0 - z) * candidate + z * h_prev, next);
        } else {
            mem[OWN + j] = z;
            mem[RH + j] = r * h_prev;
        }
    }
}

// GRU candidate without linear_before_reset: g(x_h + (r * h) R_h^T + Rb_h + Wb_h).
fn candidate_step(row: Row, t: u32, j: u32, cur: u32, next: u32) {
    let size = pu(2u);
    let rs = pu(26u);
    let acc = recurrent(RH, row.ro + (2u * size + j) * rs, 0u, 1u);
    let candidate = activate(1u, row.d, gate_x(row, t, 2u, j, true) + acc.x);
    let z = mem[OWN + j];
    emit(row, t, j, (1.0 - z) * candidate + z * mem[cur + j], next);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let steps = pu(0u);
    let batch = pu(1u);
    let size = pu(2u);
    let direction = pu(4u);
    let group = wid.x + wid.y * nwg.x;
    if (group >= select(1u, 2u, direction == 2u) * batch) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let d = group / batch;
    let n = group % batch;
    let reverse = direction == 1u || d == 1u;
    let len = sequence_length(n, steps);
    let so = d * pu(23u) + n * pu(24u);
    let row = Row(d, d * pu(17u) + n * pu(18u), d * pu(20u) + n * pu(21u), so,
                  d * 2u * pu(28u) * size, d * pu(25u));
    for (var j = lid; j < size; j += WG) {
        mem[j] = select(0.0, h0[so + j], p(7u) != 0);
        mem[OWN + j] = select(0.0, c0[so + j], p(8u) != 0);
    }
    workgroupBarrier();
    let two_phase = p(3u) == 1 && p(13u) == 0;
    for (var s = 0u; s < steps; s++) {
        let cur = (s & 1u) * MAXH;
        let next = MAXH - cur;
        let live = s < len;
        let t = select(s, len - 1u - s, reverse);
        for (var j = lid; j < size; j += WG) {
            if (live) {
                cell_step(row, t, j, cur, next);
            } else if (p(10u) != 0) {
                y[row.yo + s * pu(22u) + j] = 0.0;  // past the sequence's end (either direction)
            }
        }
        workgroupBarrier();
        if (two_phase) {
            if (live) {
                for (var j = lid; j < size; j += WG) {
                    candidate_step(row, t, j, cur, next);
                }
            }
            workgroupBarrier();
        }
    }
    let last = (len & 1u) * MAXH;
    for (var j = lid; j < size; j += WG) {
        if (p(11u) != 0) {
            y_h[so + j] = select(0.0, mem[last + j], len > 0u);
        }
        if (p(12u) != 0) {
            y_c[so + j] = select(0.0, mem[OWN + j], len > 0u);
        }
    }
}

{{REPORT_BAD}}
