// Groups a batch's expert slots by expert, for the grouped expert products
// (matmul_tiled's matmul_moe_ entries): each expert's weights are then read
// once per tile of the tokens that chose it instead of once per token.
//
// ids are the p.slots chosen experts (tokens × used, from moe_route). The
// output, groups, is
//   [0]                      the number of tiles T
//   [ORDER, ORDER + slots)   the slots sorted by expert
//   [ORDER + slots + 3t ..]  tile t: its expert, the position in that order
//                            of its first slot, and its count (1..p.tile)
// Tiles run by expert, each expert's slots cut into tiles of p.tile; T is
// at most slots/tile + min(experts, slots) (engine/ops' MoEGroupWords).
// Within an expert the slots are in the order the workgroup's atomics
// handed out places, which can differ from run to run: the products
// compute each slot's row on its own, so no result depends on it. A slot
// whose expert is past p.experts is left out (and its rows untouched).
//
// One workgroup: every invocation counts slots with workgroup atomics,
// invocation 0 turns the counts into offsets, and each expert's tiles and
// slots are written after. Constants: WG, the workgroup size; MAX_E, the
// most experts.

struct Params {
    slots: u32,
    experts: u32,
    tile: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> groups: array<u32>;

const ORDER: u32 = 4u;

var<workgroup> count: array<atomic<u32>, MAX_E>;
var<workgroup> first: array<u32, MAX_E>; // an expert's first place in the order
var<workgroup> first_tile: array<u32, MAX_E>;

@compute @workgroup_size(WG)
fn moe_group(@builtin(local_invocation_index) lid: u32) {
    for (var e = lid; e < p.experts; e += WG) {
        atomicStore(&count[e], 0u);
    }
    workgroupBarrier();
    for (var s = lid; s < p.slots; s += WG) {
        let e = ids[s];
        if (e < p.experts) {
            atomicAdd(&count[e], 1u);
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        var o = 0u;
        var t = 0u;
        for (var e = 0u; e < p.experts; e++) {
            let c = atomicLoad(&count[e]);
            first[e] = o;
            first_tile[e] = t;
            o += c;
            t += (c + p.tile - 1u) / p.tile;
        }
        groups[0] = t;
    }
    workgroupBarrier();
    let tiles = ORDER + p.slots;
    for (var e = lid; e < p.experts; e += WG) {
        let c = atomicLoad(&count[e]);
        for (var i = 0u; i * p.tile < c; i++) {
            let g = tiles + 3u * (first_tile[e] + i);
            groups[g] = e;
            groups[g + 1u] = first[e] + i * p.tile;
            groups[g + 2u] = min(p.tile, c - i * p.tile);
        }
    }
    // The counts become each expert's next free place.
    workgroupBarrier();
    for (var e = lid; e < p.experts; e += WG) {
        atomicStore(&count[e], first[e]);
    }
    workgroupBarrier();
    for (var s = lid; s < p.slots; s += WG) {
        let e = ids[s];
        if (e < p.experts) {
            groups[ORDER + atomicAdd(&count[e], 1u)] = s;
        }
    }
}
