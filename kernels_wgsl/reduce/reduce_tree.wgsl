// The Reduce kernels' workgroup tree (included by reduce_workgroup.wgsl, reduce_split.wgsl and
// reduce_split_merge.wgsl): every invocation's partial merged by the kind's merge step. It holds
// barriers, so call it from uniform control flow only.
var<workgroup> partials: array<{{T}}, 256>;

// Every invocation's partial merged; all invocations get the result.
fn merge_across(local: u32, value: {{T}}, finite_max: bool) -> {{T}} {
    partials[local] = value;
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        workgroupBarrier();
        if (local < stride && local + stride < WG) {
            partials[local] = merge(finite_max, partials[local], partials[local + stride]);
        }
    }
    workgroupBarrier();
    let result = partials[0];
    workgroupBarrier();  // every invocation has read the result before the tree is written again
    return result;
}
