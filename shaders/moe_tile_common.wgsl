// The grouped expert slots' tiles, shared by the two tiled products that
// walk them (matmul_tiled's matmul_moe_ entries and matmul_backward_input's
// backward_moe_ entries; pasted in by their include line). The includer
// declares groups, MoEGroup's output (shaders/moe_group.wgsl: [0] the
// number of tiles, from MOE_ORDER the slots sorted by expert, then per tile
// its expert, its first slot's position in that order and its count), and a
// params p whose m is the slots, n an expert's rows, row0 the chunk's first
// expert and experts its expert count.

const MOE_ORDER: u32 = 4u;

// Tile is where a workgroup's rows come from: its weight rows start at
// wrow within the chunk, it has m activation rows, and with moe row j is
// slot groups[slots + j].
struct Tile {
    wrow: u32,
    m: u32,
    slots: u32,
    moe: bool,
}

// moe_tile is grouped tile t as this chunk's workgroup takes it: its
// expert's rows in the chunk, its count, its slots. A tile past the batch's
// count, or of an expert in another chunk, comes back with moe false: the
// caller's workgroup then leaves, all of it alike (groups is read-only).
fn moe_tile(t: u32) -> Tile {
    if (t >= groups[0]) {
        return Tile(0u, 0u, 0u, false);
    }
    let g = MOE_ORDER + p.m + 3u * t;
    let e = groups[g];
    if (e < p.row0 || e - p.row0 >= p.experts) {
        return Tile(0u, 0u, 0u, false);
    }
    return Tile((e - p.row0) * p.n, groups[g + 2u], MOE_ORDER + groups[g + 1u], true);
}
