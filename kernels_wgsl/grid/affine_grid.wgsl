// AffineGrid: one invocation per output position (n, [d,] h, w) writes its r coordinates
// theta[n] @ (x, y[, z], 1), with x the normalized position along W, y along H, z along D.
// params: 0 = invocations (N * positions), 1 = positions per batch item, 2 = spatial rank r
// (2 or 3), 3 = align_corners, 4..6 = D, H, W (D = 1 when r = 2).
@group(0) @binding(0) var<storage, read_write> theta: array<f32>;
@group(0) @binding(1) var<storage, read_write> grid: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

// Normalized position of pixel i of an axis of len pixels: its center in [-1, 1], or its corner
// with align_corners (a one-pixel axis sits at -1 then).
fn position(i: u32, len: u32) -> f32 {
    if (p(3u) != 0) {
        if (len == 1u) {
            return -1.0;
        }
        return -1.0 + f32(i) * (2.0 / f32(len - 1u));
    }
    return -1.0 + (2.0 * f32(i) + 1.0) / f32(len);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let id = linear_id(gid, nwg, WG);
    if (id >= u32(p(0u))) {
        return;
    }
    let positions = u32(p(1u));
    let r = u32(p(2u));
    let depth = u32(p(4u));
    let height = u32(p(5u));
    let width = u32(p(6u));
    let pos = id % positions;
    let n = id / positions;
    // Homogeneous point (x, y, z, 1); for r = 2 the third entry is the constant 1.
    var point = array<f32, 4>(position(pos % width, width), position((pos / width) % height, height),
                              position(pos / (width * height), depth), 1.0);
    if (r == 2u) {
        point[2] = 1.0;
    }
    let rows = n * r * (r + 1u);  // theta[n] starts here
    for (var j = 0u; j < r; j++) {
        var acc = 0.0;
        for (var k = 0u; k <= r; k++) {
            acc += theta[rows + j * (r + 1u) + k] * point[k];
        }
        grid[id * r + j] = acc;
    }
}
