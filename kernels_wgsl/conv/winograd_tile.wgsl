// The tile of an invocation of the Winograd transforms (included by winograd2_input.wgsl,
// winograd4_input.wgsl, winograd2_output.wgsl and winograd4_output.wgsl), and where its positions
// lie in the scratch buffer (v or m, laid out [position][slice][tile]). params: 1 = tiles along W,
// 2 = tiles along H, 3 = padded tile count, 4 = slices in the scratch buffer.

struct Tile {
    n: i32, c4: i32, ty: i32, tx: i32,  // image, slice, tile row and tile column
    at: i32,    // the tile's first position in the scratch buffer
    step: i32,  // from one position to the next
}

// Invocation `index`'s tile: tiles along W, then along H, then `slices` slices, then images.
fn winograd_tile(index: i32, slices: i32) -> Tile {
    let tw = p(1u); let th = p(2u);
    var rest = index;
    let tx = rest % tw; rest /= tw;
    let ty = rest % th; rest /= th;
    let c4 = rest % slices;
    let n = rest / slices;
    let tiles = p(3u);
    return Tile(n, c4, ty, tx, c4 * tiles + (n * th + ty) * tw + tx, p(4u) * tiles);
}
