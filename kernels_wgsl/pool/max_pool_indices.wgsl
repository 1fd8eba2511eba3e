// Max pooling with indices, 1-D/2-D/3-D as D x H x W (x, y, indices NCDHW): each output takes the
// first tap (row-major tap order) holding the window's maximum (a later tap replaces it only when
// strictly greater), as onnxruntime and the ONNX reference; taps outside the input are skipped.
// The index is the flat input position: plane * D * H * W plus (z * H + y) * W + x, or with
// storage_order 1 (column-major spatial axes) z + y * D + x * D * H. Indices are i32 on the GPU
// (the Python side refuses inputs of 2^31 elements or more). A window with no tap inside the
// input (dilated taps can all miss it) gives the fill (the lowest float) and index -1.
// Each invocation computes a row segment of p(2) output pixels along W.
// params: 0 invocations, 1 segments per row, 2 segment length, 3 storage_order,
// 4..6 input D H W, 8..10 output D H W, 12..14 kernel D H W, 16..18 strides, 20..22 dilations,
// 24..26 pads (begin), 27 fill (f32 bits).
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> indices: array<i32>;
@group(0) @binding(3) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let index = i32(linear_id(gid, nwg, WG));
    if (index >= p(0u)) {
        return;
    }
    let d = p(4u); let h = p(5u); let wd = p(6u);
    let od = p(8u); let oh = p(9u); let ow = p(10u);
    let kd = p(12u); let kh = p(13u); let kw = p(14u);
    var rest = index;
    let start = (rest % p(1u)) * p(2u); rest /= p(1u);
    let oy = rest % oh; rest /= oh;
    let oz = rest % od;
    let plane = rest / od;
    let xbase = plane * d * h * wd;
    let z0 = oz * p(16u) - p(24u);
    let y0 = oy * p(17u) - p(25u);
    let col_major = p(3u) != 0;
    let out = plane * od * oh * ow + (oz * oh + oy) * ow;
    let stop = min(start + p(2u), ow);
    for (var ox = start; ox < stop; ox++) {
        let x0 = ox * p(18u) - p(26u);
        var best = pf(27u);
        var found = false;
        var at = vec3<i32>();
        for (var tz = 0; tz < kd; tz++) {
            let iz = z0 + tz * p(20u);
            for (var ty = 0; ty < kh; ty++) {
                let iy = y0 + ty * p(21u);
                if (iz < 0 || iz >= d || iy < 0 || iy >= h) {
                    continue;
                }
                for (var tx = 0; tx < kw; tx++) {
                    let ix = x0 + tx * p(22u);
                    if (ix < 0 || ix >= wd) {
                        continue;
                    }
                    let v = x[xbase + (iz * h + iy) * wd + ix];
                    if (!found || v > best) {
                        best = v;
                        at = vec3<i32>(iz, iy, ix);
                        found = true;
                    }
                }
            }
        }
        let position = select((at.x * h + at.y) * wd + at.z, at.x + at.y * d + at.z * d * h, col_major);
        y[out + ox] = best;
        indices[out + ox] = select(-1, xbase + position, found);
    }
}
