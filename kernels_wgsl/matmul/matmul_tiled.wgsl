// Y = act(alpha * op(A) @ op(B) + beta * C + R), workgroup-memory tiled for real GPUs: a workgroup
// of (TILE / TM)^2 invocations (WG must be that many) computes a TILE x TILE tile of Y, TM x TM
// outputs per invocation, staging KT x TILE slices of A and B in workgroup memory (zero outside M,
// N, K) so each element is read from the buffer once per tile instead of once per output.
// Two shapes (backends/wgpu/matmul.py picks by the product's size): 32x32 tiles of 64 invocations
// x 4x4 outputs, KT 16; 128x128 tiles of 256 invocations x 8x8, KT 8 (per K step an invocation
// then reads 4 vec4s of workgroup memory for 64 multiply-adds, against 2 for 16).
// An invocation's outputs are HALVES x HALVES blocks of 4x4, the blocks TILE / HALVES apart, so
// that neighbouring invocations read neighbouring vec4s of the staged slices. Each invocation
// fetches its share of the next slice (whole vec4s of the staged layout) into registers while the
// current one's products run.
// No private array is indexed by a variable: naga writes such an index as a bounds-checked loop
// variable and drivers then keep the array in local memory, not registers (NVIDIA's: 4% of an
// H200's FMA peak; written out, 81%). matmul.py's tiled_text writes the per-invocation code out instead, with
// literal names and offsets: DECLARE (the accumulators acc_h_i_g, the staging registers next_a*,
// next_b* and their slots), FETCH (the next slice, at k_next, into those registers), STAGE
// (them into workgroup memory), PRODUCTS (one slice's KT steps) and STORES (the epilogue).
// params: as matmul_blocked.wgsl (slots 0..32, 35, the residual R, and 36..42, Y's strides and
// a split part's width; 33, 34 unused); 4, 5 count TILE-wide tiles.
@group(0) @binding(0) var<storage, read_write> a: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> res: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> y1: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> y2: array<{{T}}>;
@group(0) @binding(7) var<uniform> params: Params;
// include: matmul/epilogue.wgsl
// include: matmul/batch_offsets.wgsl
override WG: u32 = 64u;

alias Vec = vec4<{{T}}>;
const TILE = {{TILE}};
const TM = {{TM}};
const KT = {{KT}};
const SIDE = TILE / TM;  // invocations along M and along N
const THREADS = SIDE * SIDE;
const HALVES = TM / 4;  // 4x4 blocks of outputs per invocation along M and along N
const V = TILE / 4;  // vec4s in one k-row of a staged slice
// One vec4 of padding per k-row: invocations staging consecutive k (an operand contiguous along k)
// then write to different banks of workgroup memory, not all to one.
const ROW = V + 1;
// a_tile[k * ROW + r] holds rows 4r..4r+3 of the tile at k; b_tile[k * ROW + q] columns 4q..4q+3.
var<workgroup> a_tile: array<Vec, KT * ROW>;
var<workgroup> b_tile: array<Vec, KT * ROW>;

// Vec4 s of a staged KT x V slice: (its vec4 of rows of A or columns of B in the tile, its k),
// with k running fastest where the operand is contiguous along k.
fn slot(s: i32, k_fast: bool) -> vec2<i32> {
    if (k_fast) {
        return vec2<i32>(s / KT, s % KT);
    }
    return vec2<i32>(s % V, s / V);
}

// Vec4 `at` (slot) of A's staged slice at k0 (rows from tm0 of the matrix at ao), zero outside M and K.
fn fetch_a(at: vec2<i32>, k0: i32, tm0: i32, ao: i32) -> Vec {
    let k = k0 + at.y;
    let m = tm0 + at.x * 4;
    let rows = select(0, p(0u) - m, k < p(2u));  // of the 4, those inside M (none past K)
    let step = p(24u);
    let i = ao + m * step + k * p(25u);
    if (rows >= 4) {
        return Vec(a[i], a[i + step], a[i + 2 * step], a[i + 3 * step]);
    }
    var v = Vec();
    if (rows > 0) {
        v.x = a[i];
    }
    if (rows > 1) {
        v.y = a[i + step];
    }
    if (rows > 2) {
        v.z = a[i + 2 * step];
    }
    return v;
}

// Vec4 `at` (slot) of B's staged slice at k0 (columns from tn0 of the matrix at bo), zero outside N and K.
fn fetch_b(at: vec2<i32>, k0: i32, tn0: i32, bo: i32) -> Vec {
    let k = k0 + at.y;
    let n = tn0 + at.x * 4;
    let columns = select(0, p(1u) - n, k < p(2u));
    let step = p(27u);
    let i = bo + k * p(26u) + n * step;
    if (columns >= 4) {
        return Vec(b[i], b[i + step], b[i + 2 * step], b[i + 3 * step]);
    }
    var v = Vec();
    if (columns > 0) {
        v.x = b[i];
    }
    if (columns > 1) {
        v.y = b[i + step];
    }
    if (columns > 2) {
        v.z = b[i + 2 * step];
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) local: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let k_size = p(2u);
    let tiles_m = pu(4u);
    let tiles_n = pu(5u);
    let group = wid.x + wid.y * nwg.x;
    if (group >= pu(3u) * tiles_m * tiles_n) {
        return;  // the whole workgroup: uniform, so the barriers below stay in uniform control flow
    }
    let tm0 = i32((group / tiles_n) % tiles_m) * TILE;
    let tn0 = i32(group % tiles_n) * TILE;
    let offsets = batch_offsets(group / (tiles_n * tiles_m));  // of this product in A, B, C and Y
    let ao = offsets.x;
    let bo = offsets.y;
    let co = offsets.z;
    let yo = offsets.w;
    // Consecutive invocations stage consecutive vec4s along A's contiguous axis: along k when A is
    // row-major (unit k stride), else along its rows; B along its columns or along k alike.
    let a_k_fast = p(25u) == 1;
    let b_k_fast = p(26u) == 1 && p(27u) != 1;
    let l = i32(local);
    let tr = l / SIDE;  // this invocation's rows: h * TILE / HALVES + 4tr .. + 3 for each h
    let tc = l % SIDE;  // and columns, alike
{{DECLARE}}
    {  // the first slice; the loads of slice k0 + KT are then in flight while slice k0's products run
        let k_next = 0;
{{FETCH}}
    }
    for (var k0 = 0; k0 < k_size; k0 += KT) {
{{STAGE}}
        workgroupBarrier();
        if (k0 + KT < k_size) {
            let k_next = k0 + KT;
{{FETCH}}
        }
{{PRODUCTS}}
        workgroupBarrier();
    }
{{STORES}}
}
