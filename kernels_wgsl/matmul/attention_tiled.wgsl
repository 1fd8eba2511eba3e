// Attention for real GPUs (the op and params as attention.wgsl): a workgroup takes WG query rows of
// one batch entry, one row per invocation, and walks the keys in tiles of TK: its invocations copy
// a tile's K and V rows into workgroup memory together, so each is read from the buffer once per
// workgroup instead of once per query row, then every invocation updates its own row's online
// softmax (attention.wgsl's) with the whole tile at once. Rows past S_q load the last row, take
// part in the copies and barriers, and store nothing. params 3 counts the row groups of WG per
// batch entry.
// Split keys (params 42 splits of params 41 keys; 1 split: all keys): a workgroup walks one split's
// keys and stores, per row and split, its running maximum, total and unscaled value sums to the
// buffer bound as y (attention_merge.wgsl combines them): more workgroups where a few rows would
// leave most of a real GPU idle, each with a shorter chain of dependent key updates.
// include: matmul/attention_operands.wgsl
override WG: u32 = 64u;
const TK = {{TK}};  // keys per tile
const D = {{D}};
const DV = {{DV}};
const DQ = {{DQ}};  // vec4s per key row: D / 4 rounded up
const DVQ = {{DVQ}};
// k_tile[t * DQ + g] holds vec4 g of key j0 + t (lanes past D zero); v_tile likewise.
var<workgroup> k_tile: array<vec4<f32>, TK * DQ>;
var<workgroup> v_tile: array<vec4<f32>, TK * DVQ>;
// scores[t * ROWS_WG + local]: the score of key j0 + t for the invocation's row (ROWS_WG is WG).
const ROWS_WG = {{ROWS_WG}};
var<workgroup> scores: array<f32, TK * ROWS_WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let groups = pu(3u);
    let splits = pu(42u);
    let group = wid.x + wid.y * nwg.x;
    if (group >= pu(2u) * groups * splits) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let r0 = i32(group % groups) * i32(WG) + i32(local);
    let split = i32((group / groups) % splits);
    let entry = group / groups / splits;
    let at = batch_offsets(entry);
    let rows = p(0u);
    let first_key = split * p(41u);
    let keys = min(p(1u), first_key + p(41u));
    let alpha = pf(39u);
    let beta = pf(40u);
    let has_mask = p(36u) != 0;
    {{LOAD_Q}}
    for (var j0 = first_key; j0 < keys; j0 += TK) {
        let count = min(TK, keys - j0);
        workgroupBarrier();  // every row is done with the previous tile
        for (var e = i32(local); e < count * DQ; e += i32(WG)) {
            let j = j0 + e / DQ;
            let g = e % DQ;
            k_tile[e] = {{K_VEC4}};
        }
        for (var e = i32(local); e < count * DVQ; e += i32(WG)) {
            let j = j0 + e / DVQ;
            let g = e % DVQ;
            v_tile[e] = {{V_VEC4}};
        }
        workgroupBarrier();
        // The whole tile at once: its scores (kept in this row's column of `scores`) and their
        // maximum, one rescale of the sums, then one exp and one multiply-add of V per key.
        var top = best0;
        for (var t = 0; t < count; t++) {
            let s = masked({{TILE_DOT}}, row0, j0 + t, at.m, beta, has_mask);
            scores[t * ROWS_WG + i32(local)] = s;
            top = max(top, s);
        }
        let scale = exp(best0 - top);
        {{RESCALE}}
        for (var t = 0; t < count; t++) {
            let weight = exp(scores[t * ROWS_WG + i32(local)] - top);
            {{ACCUMULATE}}
        }
        best0 = top;
    }
    if (splits == 1u) {
        {{STORE}}
    } else if (r0 < rows) {
        let part = ((i32(entry) * rows + r0) * i32(splits) + split) * (DV + 2);
        {{STORE_PART}}
    }
}
