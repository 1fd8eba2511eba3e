// Tree reductions across the WG (<= 256) invocations of a workgroup, for kernels that give a row
// (or an output) a whole workgroup: every invocation passes its partial and gets the workgroup's.
// They hold barriers, so call them from uniform control flow only.
var<workgroup> tree_value: array<f32, 256>;
var<workgroup> tree_index: array<u32, 256>;

fn workgroup_sum(local: u32, value: f32) -> f32 {
    tree_value[local] = value;
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        workgroupBarrier();
        if (local < stride && local + stride < WG) {
            tree_value[local] += tree_value[local + stride];
        }
    }
    workgroupBarrier();
    let total = tree_value[0];
    workgroupBarrier();  // every invocation has read the total before the tree is written again
    return total;
}

// The largest value and its index; a NaN beats any number, and of equals the lower index wins
// (numpy's argmax: the first maximum, or the first NaN). No element: index 0xffffffff.
struct Top {
    value: f32,
    index: u32,
}

fn beats(value: f32, index: u32, than: f32, than_index: u32) -> bool {
    if (index == 0xffffffffu) {
        return false;
    }
    if (than_index == 0xffffffffu) {
        return true;
    }
    let nan = is_nan_f32(value);
    let than_nan = is_nan_f32(than);
    if (nan != than_nan) {
        return nan;
    }
    return value > than || ((value == than || nan) && index < than_index);
}

fn workgroup_top(local: u32, top: Top) -> Top {
    tree_value[local] = top.value;
    tree_index[local] = top.index;
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        workgroupBarrier();
        if (local < stride && local + stride < WG) {
            let other = local + stride;
            if (beats(tree_value[other], tree_index[other], tree_value[local], tree_index[local])) {
                tree_value[local] = tree_value[other];
                tree_index[local] = tree_index[other];
            }
        }
    }
    workgroupBarrier();
    let result = Top(tree_value[0], tree_index[0]);
    workgroupBarrier();  // every invocation has read the result before the tree is written again
    return result;
}
