// The ArgMax / ArgMin kernels' comparison (included by arg_reduce.wgsl and
// arg_reduce_workgroup.wgsl): an invocation's running best element, its NaN flag and index, and
// consider(), which takes element i of a walk in increasing i where it beats the best: ties keep
// the first index, or the last with select_last_index; a NaN counts as the extreme (numpy's
// argmax / argmin), so the first NaN (or the last) wins.
var<private> best: {{T}};
var<private> best_nan: bool;
var<private> best_index: u32;

fn nan_of(v: {{T}}) -> bool {
    return {{IS_NAN}};
}

fn consider(v: {{T}}, i: u32, last: bool) {
    let v_nan = nan_of(v);
    var take = false;
    if (best_nan) {
        take = last && v_nan;
    } else {
        take = v_nan || v {{BETTER}} best || (last && v == best);
    }
    if (take) {
        best = v;
        best_nan = v_nan;
        best_index = i;
    }
}
