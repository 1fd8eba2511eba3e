// Attention for real GPUs (the op and params as attention.wgsl): a workgroup takes WG query rows of
// one batch entry, one row per invocation, and walks the keys in tiles of TK: its invocations copy
// a tile's K and V rows into workgroup memory together, so each is read from the buffer once per
// workgroup instead of once per query row, then every invocation runs attention.wgsl's online
// softmax over the tile for its own row. Rows past S_q load the last row, take part in the copies
// and barriers, and store nothing. params 3 counts the row groups of WG per batch entry.
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

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let groups = pu(3u);
    let group = wid.x + wid.y * nwg.x;
    if (group >= pu(2u) * groups) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let r0 = i32(group % groups) * i32(WG) + i32(local);
    let at = batch_offsets(group / groups);
    let rows = p(0u);
    let keys = p(1u);
    let alpha = pf(39u);
    let beta = pf(40u);
    let has_mask = p(36u) != 0;
    {{LOAD_Q}}
    for (var j0 = 0; j0 < keys; j0 += TK) {
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
        for (var t = 0; t < count; t++) {
            let j = j0 + t;
            {{LOAD_KV}}
            {{UPDATE}}
        }
    }
    {{STORE}}
}
