// What the LSTM / GRU / RNN kernels share (included by recurrence.wgsl and step.wgsl): the gate
// activations by id (params 32..49, clip 15..16) and a batch row's checked sequence length.

fn activate(which: u32, dir: u32, x_in: f32) -> f32 {
    let slot = dir * 3u + which;
    let a = pf(38u + slot);
    let b = pf(44u + slot);
    // clip bounds the inputs of the gate activations (f, g), not the LSTM output's h(c).
    let x = select(x_in, clamp(x_in, -pf(16u), pf(16u)), p(15u) != 0 && which < 2u);
    switch p(32u + slot) {
        case 0: {  // Sigmoid, from exp of a non-positive number only
            let e = exp(-abs(x));
            return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
        }
        case 1: { return wg_tanh(x); }
        case 2: { return max(x, 0.0); }  // Relu
        case 3: { return clamp(a * x + b, 0.0, 1.0); }  // HardSigmoid
        case 4: { return a * x + b; }  // Affine
        case 5: { return select(a * x, x, x >= 0.0); }  // LeakyRelu
        case 6: { return select(0.0, x, x > a); }  // ThresholdedRelu
        case 7: { return a * wg_tanh(b * x); }  // ScaledTanh
        case 8: { return select(a * (exp(min(x, 0.0)) - 1.0), x, x >= 0.0); }  // Elu
        case 9: { return x / (1.0 + abs(x)); }  // Softsign
        default: { return max(x, 0.0) + wg_log1p(exp(-abs(x))); }  // Softplus
    }
}

// Batch row n's sequence length: T without lens; a length outside [0, T] is reported to the host
// (report_bad, check = batch row) and clamped.
fn sequence_length(n: u32, steps: u32) -> u32 {
    var len = steps;
    if (p(6u) != 0) {
        let given = lens[n];
        if (given < 0 || given > i32(steps)) {
            report_bad(n, given);  // the host raises; the clamped length keeps every access in bounds
        }
        len = u32(clamp(given, 0, i32(steps)));
    }
    return len;
}
