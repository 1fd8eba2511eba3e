// Y = act(alpha * op(A) @ op(B) + beta * C + R), workgroup-memory tiled for real GPUs: a workgroup
// of (TILE / TM)^2 invocations (WG must be that many) computes a TILE x TILE tile of Y, TM x TM
// outputs per invocation, staging KT x TILE slices of A and B in workgroup memory (zero outside M,
// N, K) so each element is read from the buffer once per tile instead of once per output.
// Two shapes (backends/wgpu/matmul.py picks by the product's size): 32x32 tiles of 64 invocations
// x 4x4 outputs, KT 16; 128x128 tiles of 256 invocations x 8x8, KT 8 (per K step an invocation
// then reads 4 vec4s of workgroup memory for 64 multiply-adds, against 2 for 16).
// An invocation's outputs are HALVES x HALVES blocks of 4x4, the blocks TILE / HALVES apart, so
// that neighbouring invocations read neighbouring vec4s of the staged slices. Each invocation
// fetches its share of the next slice into registers while the current one's products run.
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

const TILE = {{TILE}};
const TM = {{TM}};
const KT = {{KT}};
const SIDE = TILE / TM;  // invocations along M and along N
const THREADS = SIDE * SIDE;
const HALVES = TM / 4;  // 4x4 blocks of outputs per invocation along M and along N
const V = TILE / 4;  // vec4s in one k-row of a staged slice
const LOADS = KT * TILE / THREADS;  // elements of A (and of B) each invocation stages per K step
// One vec4 of padding per k-row: invocations staging consecutive k (an operand contiguous along k)
// then write to different banks of workgroup memory, not all to one.
const ROW = V + 1;
// a_tile[k * ROW + r] holds rows 4r..4r+3 of the tile at k; b_tile[k * ROW + q] columns 4q..4q+3.
var<workgroup> a_tile: array<vec4<{{T}}>, KT * ROW>;
var<workgroup> b_tile: array<vec4<{{T}}>, KT * ROW>;

// Element e of a staged KT x TILE slice: (its row of A or column of B in the tile, its k), with k
// running fastest where the operand is contiguous along k.
fn slot(e: i32, k_fast: bool) -> vec2<i32> {
    if (k_fast) {
        return vec2<i32>(e / KT, e % KT);
    }
    return vec2<i32>(e % TILE, e / TILE);
}

// Element e of A's staged slice at k0 (rows from tm0 of the matrix at ao), zero outside M and K.
fn fetch_a(e: i32, k0: i32, tm0: i32, ao: i32, k_fast: bool) -> {{T}} {
    let s = slot(e, k_fast);
    if (k0 + s.y < p(2u) && tm0 + s.x < p(0u)) {
        return a[ao + (tm0 + s.x) * p(24u) + (k0 + s.y) * p(25u)];
    }
    return {{T}}();
}

// Element e of B's staged slice at k0 (columns from tn0 of the matrix at bo), zero outside N and K.
fn fetch_b(e: i32, k0: i32, tn0: i32, bo: i32, k_fast: bool) -> {{T}} {
    let s = slot(e, k_fast);
    if (k0 + s.y < p(2u) && tn0 + s.x < p(1u)) {
        return b[bo + (k0 + s.y) * p(26u) + (tn0 + s.x) * p(27u)];
    }
    return {{T}}();
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
    // Consecutive invocations stage consecutive elements of A's contiguous axis: along k when A is
    // row-major (unit k stride), else along its rows; B along its columns or along k alike.
    let a_k_fast = p(25u) == 1;
    let b_k_fast = p(26u) == 1 && p(27u) != 1;
    let l = i32(local);
    let tr = l / SIDE;  // this invocation's rows: h * TILE / HALVES + 4tr .. + 3 for each h
    let tc = l % SIDE;  // and columns, alike
    var acc: array<vec4<{{T}}>, TM * HALVES>;  // row h * 4 + i of the block rows, column block g
    // This invocation's share of the next slices, fetched into registers one slice ahead: the
    // loads of slice k0 + KT are in flight while slice k0's products run.
    var next_a: array<{{T}}, LOADS>;
    var next_b: array<{{T}}, LOADS>;
    for (var q = 0; q < LOADS; q++) {
        next_a[q] = fetch_a(l + THREADS * q, 0, tm0, ao, a_k_fast);
        next_b[q] = fetch_b(l + THREADS * q, 0, tn0, bo, b_k_fast);
    }
    for (var k0 = 0; k0 < k_size; k0 += KT) {
        for (var q = 0; q < LOADS; q++) {
            let sa = slot(l + THREADS * q, a_k_fast);
            a_tile[sa.y * ROW + sa.x / 4][sa.x % 4] = next_a[q];
            let sb = slot(l + THREADS * q, b_k_fast);
            b_tile[sb.y * ROW + sb.x / 4][sb.x % 4] = next_b[q];
        }
        workgroupBarrier();
        if (k0 + KT < k_size) {
            for (var q = 0; q < LOADS; q++) {
                next_a[q] = fetch_a(l + THREADS * q, k0 + KT, tm0, ao, a_k_fast);
                next_b[q] = fetch_b(l + THREADS * q, k0 + KT, tn0, bo, b_k_fast);
            }
        }
        for (var k = 0; k < KT; k++) {
            for (var h = 0; h < HALVES; h++) {
                let av = a_tile[k * ROW + h * (V / HALVES) + tr];
                for (var g = 0; g < HALVES; g++) {
                    let bv = b_tile[k * ROW + g * (V / HALVES) + tc];
                    acc[(h * 4) * HALVES + g] += av.x * bv;
                    acc[(h * 4 + 1) * HALVES + g] += av.y * bv;
                    acc[(h * 4 + 2) * HALVES + g] += av.z * bv;
                    acc[(h * 4 + 3) * HALVES + g] += av.w * bv;
                }
            }
        }
        workgroupBarrier();
    }
    for (var h = 0; h < HALVES; h++) {
        for (var i = 0; i < 4; i++) {
            let m = tm0 + h * (TILE / HALVES) + tr * 4 + i;
            for (var g = 0; g < HALVES; g++) {
                store4(m, tn0 + g * (TILE / HALVES) + tc * 4, acc[(h * 4 + i) * HALVES + g], yo, co);
            }
        }
    }
}
