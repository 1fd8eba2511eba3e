// The batch offsets of the MatMul kernels (included by matmul_tiled, and by matmul_blocked and
// matmul_subgroup through block8_operands): where one product of the batch starts in A, B, C and Y.

// Offsets (A, B, C, Y) of product `batch`: its coordinates in the batch shape (slots 8..11,
// right-aligned) times each tensor's batch strides (12.., 16.., 20.., 36..; 0 on broadcast).
fn batch_offsets(batch: u32) -> vec4<i32> {
    var rest = batch;
    var ao = 0;
    var bo = 0;
    var co = 0;
    var yo = 0;
    for (var d = 3; d >= 0; d--) {
        let size = pu(8u + u32(d));
        let coord = i32(rest % size);
        rest = rest / size;
        ao += coord * p(12u + u32(d));
        bo += coord * p(16u + u32(d));
        co += coord * p(20u + u32(d));
        yo += coord * p(36u + u32(d));
    }
    return vec4<i32>(ao, bo, co, yo);
}
