// Embedding gather: out[t] = scale * dequantized row ids[t] of a GGUF table.
// One workgroup per token (the grid wraps into y past 65535 tokens); its
// threads stride over the row's elements, each decoding one element straight
// from the block bytes, so writes are coalesced and no block is expanded in
// memory. A table split into row chunks is gathered with one dispatch per
// chunk: a workgroup whose token lies in another chunk does nothing.
//
// Ids past the table are clamped to its last row so a corrupt token never
// reads out of bounds.
//
// Constants: WG, the workgroup size.

struct EmbedParams {
    cols: u32,       // elements per row
    rows: u32,       // rows in this chunk
    n: u32,          // tokens
    row0: u32,       // first table row of this chunk
    vocab: u32,      // rows of the whole table
    out_offset: u32, // float index of out[0][0]
    scale: f32,      // multiplier (Gemma: sqrt(d_model)); 1 for none
    row_bytes: u32,  // stored bytes per row
}

@group(0) @binding(0) var<uniform> p: EmbedParams;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn byte_at(o: u32) -> u32 {
    return extractBits(w[o >> 2u], (o & 3u) * 8u, 8u);
}

fn sbyte_at(o: u32) -> f32 {
    return f32(extractBits(bitcast<i32>(w[o >> 2u]), (o & 3u) * 8u, 8u));
}

// The f16 at even byte offset o (every f16 field of every block is 2-aligned).
fn half_at(o: u32) -> f32 {
    return unpack2x16float(w[o >> 2u] >> ((o & 2u) * 8u)).x;
}

fn u32_at(o: u32) -> u32 {
    return byte_at(o) | (byte_at(o + 1u) << 8u) | (byte_at(o + 2u) << 16u) | (byte_at(o + 3u) << 24u);
}

// Element i of a row starting at byte o, for each supported layout
// (ggml-common.h; ggml-quants.c dequantize_row_*).

fn f32_elem(o: u32, i: u32) -> f32 {
    return bitcast<f32>(w[(o >> 2u) + i]);
}

fn f16_elem(o: u32, i: u32) -> f32 {
    return half_at(o + 2u * i);
}

fn bf16_elem(o: u32, i: u32) -> f32 {
    let e = o + 2u * i;
    return bitcast<f32>(((w[e >> 2u] >> ((e & 2u) * 8u)) & 0xffffu) << 16u);
}

// Legacy 32-element blocks: element l of block b; nibbles: l < 16 low, else high.
fn nibble(qs: u32, l: u32) -> u32 {
    return (byte_at(qs + (l & 15u)) >> ((l >> 4u) * 4u)) & 15u;
}

fn q4_0_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 32u) * 18u;
    return (f32(nibble(b + 2u, i % 32u)) - 8.0) * half_at(b);
}

fn q4_1_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 32u) * 20u;
    return f32(nibble(b + 4u, i % 32u)) * half_at(b) + half_at(b + 2u);
}

fn q5_0_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 32u) * 22u;
    let l = i % 32u;
    let q = nibble(b + 6u, l) | (extractBits(u32_at(b + 2u), l, 1u) << 4u);
    return (f32(q) - 16.0) * half_at(b);
}

fn q5_1_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 32u) * 24u;
    let l = i % 32u;
    let q = nibble(b + 8u, l) | (extractBits(u32_at(b + 4u), l, 1u) << 4u);
    return f32(q) * half_at(b) + half_at(b + 2u);
}

fn q8_0_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 32u) * 34u;
    return sbyte_at(b + 2u + i % 32u) * half_at(b);
}

// get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) packed in
// the 12 bytes at s.
fn scale_min_k4(s: u32, j: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(byte_at(s + j) & 63u), f32(byte_at(s + j + 4u) & 63u));
    }
    let sc = (byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6u) << 4u);
    let m = (byte_at(s + j + 4u) >> 4u) | ((byte_at(s + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

// Q4_K: 256-element super-blocks of 144 bytes: d, dmin, scales[12], qs[128].
// Sub-block j (32 elements) takes the low nibbles of qs[32*(j/2)..] when j is
// even, the high nibbles when odd; value = (d*sc)*q - dmin*m.
fn q4_k_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 256u) * 144u;
    let e = i % 256u;
    let j = e / 32u;
    let sm = scale_min_k4(b + 4u, j);
    let q = (byte_at(b + 16u + 32u * (j / 2u) + e % 32u) >> (4u * (j & 1u))) & 15u;
    return (half_at(b) * sm.x) * f32(q) - half_at(b + 2u) * sm.y;
}

// Q5_K: 176 bytes: d, dmin, scales[12], qh[32], qs[128]; bit j of qh[l] is
// bit 4 of element l of sub-block j.
fn q5_k_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 256u) * 176u;
    let e = i % 256u;
    let j = e / 32u;
    let l = e % 32u;
    let sm = scale_min_k4(b + 4u, j);
    let lo = (byte_at(b + 48u + 32u * (j / 2u) + l) >> (4u * (j & 1u))) & 15u;
    let q = lo + 16u * ((byte_at(b + 16u + l) >> j) & 1u);
    return (half_at(b) * sm.x) * f32(q) - half_at(b + 2u) * sm.y;
}

// Q6_K: 210 bytes: ql[128], qh[64], scales int8[16], d. Each half h of 128
// elements holds quarters c = 0..3 of 32; element l of quarter c takes the
// low (c < 2) or high nibble of ql[64h + 32(c&1) + l] and bits 2c..2c+1 of
// qh[32h + l]; its scale is scales[8h + l/16 + 2c]. value = (d*sc)*(q-32).
fn q6_k_elem(o: u32, i: u32) -> f32 {
    let b = o + (i / 256u) * 210u;
    let e = i % 256u;
    let h = e / 128u;
    let c = (e % 128u) / 32u;
    let l = e % 32u;
    let lo = (byte_at(b + 64u * h + 32u * (c & 1u) + l) >> (4u * (c >> 1u))) & 15u;
    let hi = (byte_at(b + 128u + 32u * h + l) >> (2u * c)) & 3u;
    let sc = sbyte_at(b + 192u + 8u * h + l / 16u + 2u * c);
    return (half_at(b + 208u) * sc) * (f32(lo | (hi << 4u)) - 32.0);
}

// row_of returns the chunk-local row of token tok, or -1 when it lives in
// another chunk (or tok is past n).
fn row_of(tok: u32) -> i32 {
    if (tok >= p.n) {
        return -1;
    }
    let id = min(ids[tok], p.vocab - 1u);
    if (id < p.row0 || id >= p.row0 + p.rows) {
        return -1;
    }
    return i32(id - p.row0);
}

fn out_index(tok: u32, i: u32) -> u32 {
    return p.out_offset + tok * p.cols + i;
}

fn token(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// The entry points differ only in the element decoder. WGSL has no function
// values, so each spells out the same four-line loop.

@compute @workgroup_size(WG)
fn embed_f32(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = f32_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_f16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = f16_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_bf16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = bf16_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q4_0_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q4_1_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q5_0_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q5_1_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q8_0_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q4_k_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q5_k_elem(o, i) * p.scale; }
}

@compute @workgroup_size(WG)
fn embed_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tok = token(wid, nwg);
    let r = row_of(tok);
    if (r < 0) { return; }
    let o = u32(r) * p.row_bytes;
    for (var i = lid; i < p.cols; i += WG) { out[out_index(tok, i)] = q6_k_elem(o, i) * p.scale; }
}
