// Y = act(alpha * op(A) @ op(B) + beta * C + R), workgroup-memory tiled for real GPUs: a workgroup
// of 64 invocations (WG must be 64) computes a 32x32 tile of Y, 4x4 outputs per invocation,
// staging 32x16 slices of A and B in workgroup memory (zero outside M, N, K) so each element is
// read from the buffer once per tile instead of once per output.
// params: as matmul_blocked.wgsl (slots 0..32, 35, the residual R, and 36..42, Y's strides and
// a split part's width; 33, 34 unused); 4, 5 count 32-wide tiles.
@group(0) @binding(0) var<storage, read_write> a: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> res: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> y1: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> y2: array<{{T}}>;
@group(0) @binding(7) var<uniform> params: Params;
// include: matmul/epilogue.wgsl
override WG: u32 = 64u;

const KT = 16;
// a_tile[k * 8 + r] holds rows 4r..4r+3 of the tile at k; b_tile[k * 8 + q] columns 4q..4q+3.
var<workgroup> a_tile: array<vec4<{{T}}>, 128>;
var<workgroup> b_tile: array<vec4<{{T}}>, 128>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let m_size = p(0u);
    let n_size = p(1u);
    let k_size = p(2u);
    let tiles_m = pu(4u);
    let tiles_n = pu(5u);
    let group = wid.x + wid.y * nwg.x;
    if (group >= pu(3u) * tiles_m * tiles_n) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let tm0 = i32((group / tiles_n) % tiles_m) * 32;
    let tn0 = i32(group % tiles_n) * 32;
    var rest = group / (tiles_n * tiles_m);
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
    let l = i32(local);
    let tr = l / 8;  // this invocation's rows: 4tr..4tr+3 of the tile
    let tc = l % 8;  // columns 4tc..4tc+3
    var acc0 = vec4<{{T}}>();
    var acc1 = vec4<{{T}}>();
    var acc2 = vec4<{{T}}>();
    var acc3 = vec4<{{T}}>();
    for (var k0 = 0; k0 < k_size; k0 += KT) {
        // 512 elements of each slice, 8 per invocation; consecutive invocations take consecutive
        // rows (A) / columns (B).
        for (var q = 0; q < 8; q++) {
            let e = l + 64 * q;
            let i = e % 32;
            let k = e / 32;
            let kg = k0 + k;
            var av = {{T}}();
            var bv = {{T}}();
            if (kg < k_size && tm0 + i < m_size) {
                av = a[ao + (tm0 + i) * p(24u) + kg * p(25u)];
            }
            if (kg < k_size && tn0 + i < n_size) {
                bv = b[bo + kg * p(26u) + (tn0 + i) * p(27u)];
            }
            a_tile[k * 8 + i / 4][i % 4] = av;
            b_tile[k * 8 + i / 4][i % 4] = bv;
        }
        workgroupBarrier();
        for (var k = 0; k < KT; k++) {
            let av = a_tile[k * 8 + tr];
            let bv = b_tile[k * 8 + tc];
            acc0 += av.x * bv;
            acc1 += av.y * bv;
            acc2 += av.z * bv;
            acc3 += av.w * bv;
        }
        workgroupBarrier();
    }
    let out_base = yo;
    let m0 = tm0 + tr * 4;
    let n0 = tn0 + tc * 4;
    store4(m0, n0, acc0, out_base, co);
    store4(m0 + 1, n0, acc1, out_base, co);
    store4(m0 + 2, n0, acc2, out_base, co);
    store4(m0 + 3, n0, acc3, out_base, co);
}
