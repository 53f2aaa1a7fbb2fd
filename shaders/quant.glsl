// quant.glsl — the tensor types beyond F32/F16/Q8_0/Q4_0 (included by decode.comp before
// welem): one element of a tensor (embedding lookup) and a lane's share of a row's dot product
// with the f32 input vector in sx, in the GPU layouts `program::repack` writes (its doc lists
// every stream). decode.comp calls quant_welem and quant_dot at its type dispatch points.
//
// A lane's unit of work is 64 elements (a Q4_K sub-block pair, a Q6_K quarter), so a row of
// 2048 is one unit per lane of a 32-lane team, as Q4_0's two blocks per lane are; lane l adds
// units l, l + S, l + 2S, ... in ascending order (the op's order: a function of the type and
// the row alone, never of the schedule), then DEFINE_DOT's subgroupAdd. The elements come
// from sx four per load (SXI: block B's elements 4k..4k+3 are sx4[9B + k]); the quants become
// floats without integer->float conversions (Q4_AT: mask, OR and one exact subtraction).

// The bits under MASK of W as the float 2^E + n minus BIAS, exactly (decode.comp's Q4_AT,
// which is defined after this file): EXP is 2^E with E putting MASK's lowest bit at weight 1.
#define QAT(W, MASK, EXP, BIAS) (uintBitsToFloat(((W) & (MASK)) | (EXP)) - (BIAS))
// The nibble under MASK as the float n itself (the bias 2^E alone).
#define NIB_LO0(W) QAT(W, 0xFu, 0x4B000000u, 8388608.0)
#define NIB_HI0(W) QAT(W, 0xF0u, 0x49000000u, 524288.0)
#define NIB_LO1(W) QAT(W, 0xF00u, 0x47000000u, 32768.0)
#define NIB_HI1(W) QAT(W, 0xF000u, 0x45000000u, 2048.0)
#define NIB_LO2(W) QAT(W, 0xF0000u, 0x43000000u, 128.0)

// Sub-block j's (scale, min) of a Q4_K/Q5_K header (hd.yzw: the 12 bytes of `scales`):
// j < 4: the low six bits of bytes j and j + 4; else byte j + 4's nibbles below the top two
// bits of bytes j - 4 and j (ggml's get_scale_min_k4).
uvec2 k_scale_min(uvec4 hd, uint j) {
    uint sh = (j & 3u) * 8u;
    uint a = (hd.y >> sh) & 255u, b = (hd.z >> sh) & 255u, c = (hd.w >> sh) & 255u;
    if (j < 4u) return uvec2(a & 63u, b & 63u);
    return uvec2((c & 15u) | ((a >> 6u) << 4u), (c >> 4u) | ((b >> 6u) << 4u));
}

// ---- Q4_K ----
// Unit u of the range = sub-blocks 2p, 2p+1 of super-block sb (g = c0/64 + u = 4 sb + p):
// the 32 quant bytes' low nibbles are sub-block 2p, the high nibbles 2p+1. A sub-block's
// term is (d·sc)·Σ n·x − (dmin·m)·Σ x (each sum in element order).
float dot_q4_k(uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), hs = T(t, T_SC);
    uint nsb = T(t, T_COLS) / 256u, nu = cl / 64u, u0 = c0 / 64u, S = gl_SubgroupSize;
    float acc = 0.0;
    for (uint i0 = 0u; i0 < nu; i0 += S) {
        TICK();
        uint u = i0 + tlane();
        if (u >= nu) continue;
        TICK_N(40u);
        uint g = u0 + u, sb = g >> 2u, p = g & 3u;
        uint qo = base + sb * 32u + p * 8u;
        uvec4 qa = wld4(ch, qo), qb = wld4(ch, qo + 4u);
        uvec4 hd = wld4(ch, hs + (row * nsb + sb) * 4u);
        float lo = 0.0, hi = 0.0;
        vec4 slo = vec4(0.0), shi = vec4(0.0);
        [[unroll]] for (uint k = 0u; k < 8u; ++k) {
            uint w = k < 4u ? qa[k] : qb[k - 4u], w16 = w >> 16u;
            vec4 xl = sx4[(2u * u) * 9u + k], xh = sx4[(2u * u + 1u) * 9u + k];
            lo += NIB_LO0(w) * xl.x;
            hi += NIB_HI0(w) * xh.x;
            lo += NIB_LO1(w) * xl.y;
            hi += NIB_HI1(w) * xh.y;
            lo += NIB_LO2(w) * xl.z;
            hi += NIB_HI0(w16) * xh.z;
            lo += NIB_LO1(w16) * xl.w;
            hi += NIB_HI1(w16) * xh.w;
            slo += xl;
            shi += xh;
        }
        vec2 dm = unpackHalf2x16(hd.x);
        uvec2 a = k_scale_min(hd, 2u * p), b = k_scale_min(hd, 2u * p + 1u);
        float sl = (slo.x + slo.y) + (slo.z + slo.w), sh = (shi.x + shi.y) + (shi.z + shi.w);
        acc += (dm.x * float(a.x)) * lo - (dm.y * float(a.y)) * sl;
        acc += (dm.x * float(b.x)) * hi - (dm.y * float(b.y)) * sh;
    }
    return acc;
}

float welem_q4_k(uint t, uint row, uint j) {
    uint ch = T(t, T_CHUNK), nsb = T(t, T_COLS) / 256u;
    uint sb = j / 256u, e = j % 256u, s = e / 32u, l = e % 32u;
    uint word = wld(ch, T(t, T_QS) + row * T(t, T_ROWW) + sb * 32u + (s / 2u) * 8u + l / 4u);
    uint byte = (word >> ((l % 4u) * 8u)) & 255u;
    uint n = (s & 1u) == 0u ? (byte & 15u) : (byte >> 4u);
    uvec4 hd = wld4(ch, T(t, T_SC) + (row * nsb + sb) * 4u);
    vec2 dm = unpackHalf2x16(hd.x);
    uvec2 sm = k_scale_min(hd, s);
    return (dm.x * float(sm.x)) * float(n) - dm.y * float(sm.y);
}

// ---- Q6_K ----
// Unit u = quarter Q = 2h + k of super-block sb: elements 128h + 32g + 16k + i (g = 0..3,
// i = 0..15) from the three 16-byte streams of the quarter (repack): a = ql low/high nibbles
// of groups 0/2, b = of groups 1/3, c = the two high bits of every group. The 6-bit value of
// each byte is assembled in place (nibble | two bits << 4) and read as the float q - 32
// exactly (Q4_AT with the bias 2^E + 32); group g's term is (d·sc_g)·Σ (q − 32)·x.
#define Q6_AT0(W) QAT(W, 0x3Fu, 0x4B000000u, 8388640.0)
#define Q6_AT1(W) QAT(W, 0x3F00u, 0x47000000u, 32800.0)
#define Q6_AT2(W) QAT(W, 0x3F0000u, 0x43000000u, 160.0)
float q6_word(uint w, vec4 x) {
    uint w16 = w >> 16u;
    return ((Q6_AT0(w) * x.x + Q6_AT1(w) * x.y) + Q6_AT2(w) * x.z) + Q6_AT1(w16) * x.w;
}
float dot_q6_k(uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), hs = T(t, T_SC), xs = T(t, T_X);
    uint nsb = T(t, T_COLS) / 256u, nu = cl / 64u, u0 = c0 / 64u, S = gl_SubgroupSize;
    float acc = 0.0;
    for (uint i0 = 0u; i0 < nu; i0 += S) {
        TICK();
        uint u = i0 + tlane();
        if (u >= nu) continue;
        TICK_N(40u);
        uint gq = u0 + u, sb = gq >> 2u, q = gq & 3u, h = q >> 1u, k = q & 1u;
        uint qo = base + sb * 48u + q * 12u;
        uvec4 a = wld4(ch, qo), b = wld4(ch, qo + 4u), c = wld4(ch, qo + 8u);
        uint blk = row * nsb + sb;
        uvec4 hd = wld4(ch, hs + blk * 4u);
        float d = qscale(ch, xs, blk);
        // Local 32-block of group g: 8 (u / 4) + 4h + g; its elements 16k + 4j.. are
        // sx4[9 (that block) + 4k + j].
        uint xb = ((u >> 2u) * 8u + 4u * h) * 9u + 4u * k;
        float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            uint cj = c[j];
            s0 += q6_word((a[j] & 0x0F0F0F0Fu) | ((cj << 4u) & 0x30303030u), sx4[xb + j]);
            s1 += q6_word((b[j] & 0x0F0F0F0Fu) | ((cj << 2u) & 0x30303030u), sx4[xb + 9u + j]);
            s2 += q6_word(((a[j] >> 4u) & 0x0F0F0F0Fu) | (cj & 0x30303030u), sx4[xb + 18u + j]);
            s3 += q6_word(((b[j] >> 4u) & 0x0F0F0F0Fu) | ((cj >> 2u) & 0x30303030u), sx4[xb + 27u + j]);
        }
        // Scales 8h + 2g + k: word 2h (groups 0, 1) or 2h + 1 (groups 2, 3), byte 2(g&1) + k.
        uint wa = h == 0u ? hd.x : hd.z, wb = h == 0u ? hd.y : hd.w;
        int sh0 = int(24u - 8u * k), sh1 = int(8u - 8u * k);
        float c0f = float((int(wa) << sh0) >> 24), c1f = float((int(wa) << sh1) >> 24);
        float c2f = float((int(wb) << sh0) >> 24), c3f = float((int(wb) << sh1) >> 24);
        acc += (d * c0f) * s0;
        acc += (d * c1f) * s1;
        acc += (d * c2f) * s2;
        acc += (d * c3f) * s3;
    }
    return acc;
}

float welem_q6_k(uint t, uint row, uint j) {
    uint ch = T(t, T_CHUNK), nsb = T(t, T_COLS) / 256u;
    uint sb = j / 256u, e = j % 256u;
    uint h = e / 128u, g = (e % 128u) / 32u, l = e % 32u, k = l / 16u, i = l % 16u;
    uint qo = T(t, T_QS) + row * T(t, T_ROWW) + sb * 48u + (2u * h + k) * 12u;
    uint sh = (i % 4u) * 8u;
    uint qb = (wld(ch, qo + (g & 1u) * 4u + i / 4u) >> sh) & 255u;
    uint hb = (wld(ch, qo + 8u + i / 4u) >> sh) & 255u;
    uint q = (g < 2u ? (qb & 15u) : (qb >> 4u)) | (((hb >> (2u * g)) & 3u) << 4u);
    uint blk = row * nsb + sb, si = 8u * h + 2u * g + k;
    uint sw = wld(ch, T(t, T_SC) + blk * 4u + si / 4u);
    float sc = float((int(sw) << int(24u - 8u * (si % 4u))) >> 24);
    return (qscale(ch, T(t, T_X), blk) * sc) * float(int(q) - 32);
}

// ---- dispatch (decode.comp's type branches) ----
// One element of a tensor of a type this file defines.
float quant_welem(uint ty, uint t, uint row, uint j) {
    if (ty == TY_Q4_K) return welem_q4_k(t, row, j);
    return welem_q6_k(t, row, j);
}
// Whether this file defines type ty; if so a lane's share of row·x over columns
// [c0, c0 + cl) of the f32 vector in sx goes into acc.
bool quant_dot(uint ty, uint t, uint row, uint c0, uint cl, inout float acc) {
    if (ty == TY_Q4_K) { acc = dot_q4_k(t, row, c0, cl); return true; }
    if (ty == TY_Q6_K) { acc = dot_q6_k(t, row, c0, cl); return true; }
    return false;
}
bool quant_type(uint ty) { return ty == TY_Q4_K || ty == TY_Q6_K; }
