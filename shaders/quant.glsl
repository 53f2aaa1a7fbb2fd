// quant.glsl — the tensor types beyond F32/F16/Q8_0/Q4_0 (included by decode.comp before
// welem): one element of a tensor (embedding lookup) and a lane's share of a row's dot product
// with the f32 input vector in sx, in the GPU layouts `program::repack` writes (its doc lists
// every stream). decode.comp calls quant_welem and quant_dot at its type dispatch points; in
// the ACT_Q8 modules quant_dot runs act_q8.glsl's int8 dot products instead.
//
// A lane's unit of work is 64 elements for the K-quants (a Q4_K/Q5_K sub-block pair, a Q6_K
// pair of sub-blocks), so a row of 2048 is one unit per lane of a 32-lane team, as Q4_0's two
// blocks per lane are; a 32-element block for Q4_1/Q5_0/Q5_1, IQ4_NL and IQ4_XS; a word (two
// elements) for BF16. Lane l adds
// units l, l + S, l + 2S, ... in ascending order (the op's order: a function of the type and
// the row alone, never of the schedule), then DEFINE_DOT's subgroupAdd. The elements come
// from sx four per load (SXI: block B's elements 4k..4k+3 are sx4[9B + k]); the quants become
// floats without integer->float conversions (QAT: mask, OR and one exact subtraction).

// The lane-strided loop over NU units: this lane takes units U = l, l + S, l + 2S, ... in
// ascending order; every lane counts each back-edge (TICK) and an active unit's unrolled
// work (TICKS) against the CPU devices' loop budget, as the other matvec loops do.
#define FOR_LANE_UNITS(U, NU, TICKS)                                                         \
    for (uint U##_0 = 0u, U = tlane(); U##_0 < (NU); U##_0 += gl_SubgroupSize, U += gl_SubgroupSize) \
        if (TICK() >= 0u && U < (NU) && TICK_N(TICKS) >= 0u)

// The bits under MASK of W as the float 2^E + n minus BIAS, exactly (decode.comp's Q4_0 dot
// uses it too): EXP is 2^E with E putting MASK's lowest bit at weight 1.
// EXP + pc.zero (pc.zero is always 0) is a loop-invariant register the compiler can neither
// fold nor merge into the OR, so `(W & MASK) | EXP` is one LOP3 with MASK its immediate, not
// two (round 85's s90 for Q4_0: 133 -> 69 LOP3 a 64-weight trip). The same bits.
#define QAT(W, MASK, EXP, BIAS) (uintBitsToFloat(((W) & (MASK)) | ((EXP) + pc.zero)) - (BIAS))
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

// Four byte values of W (each below 128) less BIAS against x, in element order: each value
// read as the float b - BIAS exactly by mask, OR and one subtraction (QAT; the top byte from
// W >> 16, below the exponent field).
float bytes_dot(uint w, vec4 x, float bias) {
    uint w16 = w >> 16u;
    return ((QAT(w, 0x7Fu, 0x4B000000u, 8388608.0 + bias) * x.x
           + QAT(w, 0x7F00u, 0x47000000u, 32768.0 + bias) * x.y)
           + QAT(w, 0x7F0000u, 0x43000000u, 128.0 + bias) * x.z)
           + QAT(w16, 0x7F00u, 0x47000000u, 32768.0 + bias) * x.w;
}
float vsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }

// Bits 0..3 of b, one per byte (bit i to bit 8i): the four shifted copies never overlap.
uint spread4(uint b) { return ((b & 15u) * 0x00204081u) & 0x01010101u; }
// Word k (k = 0..3) of a 32-element block's nibbles with their fifth bits (Q5_0/Q5_1: bit j
// of qh is element j's; 0 for Q4_1) as bytes: elements 4k..4k+3 (lo) and 16+4k.. (hi).
uint q5_lo(uint w, uint qh, uint k) { return (w & 0x0F0F0F0Fu) | (spread4(qh >> (4u * k)) << 4u); }
uint q5_hi(uint w, uint qh, uint k) { return ((w >> 4u) & 0x0F0F0F0Fu) | (spread4(qh >> (16u + 4u * k)) << 4u); }
// Word k (k = 0..7) of Q5_K sub-blocks 2p (lo) and 2p + 1 (hi): nibbles and bit 2p / 2p + 1
// of qh word k (elements 4k..4k+3 of both sub-blocks).
uint q5k_lo(uint w, uint hw, uint p) { return (w & 0x0F0F0F0Fu) | (((hw >> (2u * p)) & 0x01010101u) << 4u); }
uint q5k_hi(uint w, uint hw, uint p) { return ((w >> 4u) & 0x0F0F0F0Fu) | (((hw >> (2u * p + 1u)) & 0x01010101u) << 4u); }

// ---- Q4_1, Q5_0, Q5_1 ----
// Unit = one 32-element block: (d · Σ q·x) + m · Σ x (Q5_0: d · Σ (q − 16)·x), Σ q·x as
// Q4_0's lo + hi in element order.
float dot_q32(uint ty, uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), hs = T(t, T_SC), xs = T(t, T_X);
    uint nb = cl / 32u, nbt = T(t, T_COLS) / 32u, g0 = c0 / 32u, S = gl_SubgroupSize;
    bool five = ty != TY_Q4_1, mins = ty != TY_Q5_0;
    float bias = mins ? 0.0 : 16.0, acc = 0.0;
    FOR_LANE_UNITS(b, nb, 40u) {
        uint blk = row * nbt + g0 + b;
        uvec4 W = wld4(ch, base + (g0 + b) * 4u);
        uint hd = wld(ch, hs + blk), qh = five ? wld(ch, xs + blk) : 0u;
        float lo = 0.0, hi = 0.0;
        vec4 sxv = vec4(0.0);
        [[unroll]] for (uint k = 0u; k < 4u; ++k) {
            vec4 xl = sx4[b * 9u + k], xh = sx4[b * 9u + 4u + k];
            lo += bytes_dot(q5_lo(W[k], qh, k), xl, bias);
            hi += bytes_dot(q5_hi(W[k], qh, k), xh, bias);
            sxv += xl + xh;
        }
        vec2 dm = unpackHalf2x16(hd);
        acc += mins ? dm.x * (lo + hi) + dm.y * vsum(sxv) : dm.x * (lo + hi);
    }
    return acc;
}

// Element j: (d · q) + m (Q5_0: d · (q − 16)), as the CPU reference computes it.
float welem_q32(uint ty, uint t, uint row, uint j) {
    uint ch = T(t, T_CHUNK), b = j / 32u, e = j % 32u, k = e % 16u;
    uint blk = row * (T(t, T_COLS) / 32u) + b;
    uint word = wld(ch, T(t, T_QS) + row * T(t, T_ROWW) + b * 4u + k / 4u);
    uint byte = (word >> ((k % 4u) * 8u)) & 255u;
    uint n = e < 16u ? (byte & 15u) : (byte >> 4u);
    if (ty != TY_Q4_1) n |= ((wld(ch, T(t, T_X) + blk) >> e) & 1u) << 4u;
    vec2 dm = unpackHalf2x16(wld(ch, T(t, T_SC) + blk));
    if (ty == TY_Q5_0) return dm.x * float(int(n) - 16);
    return dm.x * float(n) + dm.y;
}

// ---- Q4_K, Q5_K ----
// Unit u of the range = sub-blocks 2p, 2p+1 of super-block sb (g = c0/64 + u = 4 sb + p):
// the 32 quant bytes' low nibbles are sub-block 2p, the high nibbles 2p+1 (Q5_K: with bit 2p
// resp. 2p + 1 of qh). A sub-block's term is (d·sc)·Σ n·x − (dmin·m)·Σ x (each sum in
// element order).
float kq_pair(uvec4 hd, uint p, float lo, float hi, vec4 slo, vec4 shi) {
    vec2 dm = unpackHalf2x16(hd.x);
    uvec2 a = k_scale_min(hd, 2u * p), b = k_scale_min(hd, 2u * p + 1u);
    float r = (dm.x * float(a.x)) * lo - (dm.y * float(a.y)) * vsum(slo);
    return r + ((dm.x * float(b.x)) * hi - (dm.y * float(b.y)) * vsum(shi));
}
// The rows macros' prologue: super-blocks per row, the 64-element units of the range, and
// each row's chunk, quant start, header start and second stream (X words per super-block
// from the row's first; 0: the stream's start).
#define KROWS_SETUP(R, X)                                                                    \
    uint nsb = T(ts[0], T_COLS) / 256u, nu = cl / 64u, u0 = c0 / 64u, S = gl_SubgroupSize;  \
    uint ch[R], base[R], hs[R], xs[R];                                                       \
    [[unroll]] for (uint r = 0u; r < R; ++r) {                                               \
        ch[r] = T(ts[r], T_CHUNK);                                                           \
        base[r] = T(ts[r], T_QS) + rs[r] * T(ts[r], T_ROWW);                                 \
        hs[r] = T(ts[r], T_SC) + rs[r] * nsb * 4u;                                           \
        xs[r] = T(ts[r], T_X) + rs[r] * nsb * (X);                                           \
    }
// Q6_K unit u's loads for R rows (quant.glsl's and act_q8.glsl's Q6_K rows).
#define Q6K_LOADS(R)                                                                         \
        uint gq = u0 + u, sb = gq >> 2u, q = gq & 3u, h = q >> 1u, o = q & 1u;               \
        uvec4 a[R], b[R], c[R], hd[R];                                                       \
        float d[R];                                                                          \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            uint qo = base[r] + sb * 48u + q * 12u;                                          \
            a[r] = wld4(ch[r], qo);                                                          \
            b[r] = wld4(ch[r], qo + 4u);                                                     \
            c[r] = wld4(ch[r], qo + 8u);                                                     \
            hd[r] = wld4(ch[r], hs[r] + sb * 4u);                                            \
        }                                                                                    \
        uint dep = 0u;                                                                       \
        [[unroll]] for (uint r = 0u; r < R; ++r) dep ^= a[r].x ^ b[r].x ^ c[r].x ^ hd[r].x;  \
        [[unroll]] for (uint r = 0u; r < R; ++r)                                             \
            d[r] = qscale_after(ch[r], xs[r], rs[r] * nsb + sb, dep);
// R rows at once (R = 1, 2, 4; one column count): every row's loads are issued before any is
// used and each element of sx, read once, feeds every row; per row the arithmetic is the
// same sequence whatever R is, so R rows give R one-row results bit for bit. acc[r] gets a
// lane's share of row rs[r] of tensor ts[r] over columns [c0, c0 + cl).
#define DEFINE_Q4K(NAME, R)                                                                  \
void NAME(uint ts[R], uint rs[R], uint c0, uint cl, inout float acc[R]) {                    \
    KROWS_SETUP(R, 0u)                                                                       \
    FOR_LANE_UNITS(u, nu, 40u * R) {                                                         \
        uint g = u0 + u, sb = g >> 2u, p = g & 3u;                                           \
        uvec4 qa[R], qb[R], hd[R];                                                           \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            uint qo = base[r] + sb * 32u + p * 8u;                                           \
            qa[r] = wld4(ch[r], qo);                                                         \
            qb[r] = wld4(ch[r], qo + 4u);                                                    \
            hd[r] = wld4(ch[r], hs[r] + sb * 4u);                                            \
        }                                                                                    \
        float lo[R], hi[R];                                                                  \
        [[unroll]] for (uint r = 0u; r < R; ++r) { lo[r] = 0.0; hi[r] = 0.0; }               \
        vec4 slo = vec4(0.0), shi = vec4(0.0);                                               \
        [[unroll]] for (uint k = 0u; k < 8u; ++k) {                                          \
            vec4 xl = sx4[(2u * u) * 9u + k], xh = sx4[(2u * u + 1u) * 9u + k];              \
            [[unroll]] for (uint r = 0u; r < R; ++r) {                                       \
                uint w = k < 4u ? qa[r][k] : qb[r][k - 4u], w16 = w >> 16u;                  \
                lo[r] += NIB_LO0(w) * xl.x;                                                  \
                hi[r] += NIB_HI0(w) * xh.x;                                                  \
                lo[r] += NIB_LO1(w) * xl.y;                                                  \
                hi[r] += NIB_HI1(w) * xh.y;                                                  \
                lo[r] += NIB_LO2(w) * xl.z;                                                  \
                hi[r] += NIB_HI0(w16) * xh.z;                                                \
                lo[r] += NIB_LO1(w16) * xl.w;                                                \
                hi[r] += NIB_HI1(w16) * xh.w;                                                \
            }                                                                                \
            slo += xl;                                                                       \
            shi += xh;                                                                       \
        }                                                                                    \
        [[unroll]] for (uint r = 0u; r < R; ++r)                                             \
            acc[r] += kq_pair(hd[r], p, lo[r], hi[r], slo, shi);                             \
    }                                                                                        \
}
DEFINE_Q4K(q4k_rows1, 1u)
DEFINE_Q4K(q4k_rows2, 2u)
DEFINE_Q4K(q4k_rows4, 4u)
float dot_q4_k(uint t, uint row, uint c0, uint cl) {
    uint ts[1] = uint[1](t), rs[1] = uint[1](row);
    float a[1] = float[1](0.0);
    q4k_rows1(ts, rs, c0, cl, a);
    return a[0];
}
float dot_q5_k(uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), hs = T(t, T_SC), xs = T(t, T_X);
    uint nsb = T(t, T_COLS) / 256u, nu = cl / 64u, u0 = c0 / 64u, S = gl_SubgroupSize;
    float acc = 0.0;
    FOR_LANE_UNITS(u, nu, 40u) {
        uint g = u0 + u, sb = g >> 2u, p = g & 3u, blk = row * nsb + sb;
        uint qo = base + sb * 32u + p * 8u;
        uvec4 qa = wld4(ch, qo), qb = wld4(ch, qo + 4u);
        uvec4 ha = wld4(ch, xs + blk * 8u), hb = wld4(ch, xs + blk * 8u + 4u);
        uvec4 hd = wld4(ch, hs + blk * 4u);
        float lo = 0.0, hi = 0.0;
        vec4 slo = vec4(0.0), shi = vec4(0.0);
        [[unroll]] for (uint k = 0u; k < 8u; ++k) {
            uint w = k < 4u ? qa[k] : qb[k - 4u], hw = k < 4u ? ha[k] : hb[k - 4u];
            vec4 xl = sx4[(2u * u) * 9u + k], xh = sx4[(2u * u + 1u) * 9u + k];
            lo += bytes_dot(q5k_lo(w, hw, p), xl, 0.0);
            hi += bytes_dot(q5k_hi(w, hw, p), xh, 0.0);
            slo += xl;
            shi += xh;
        }
        acc += kq_pair(hd, p, lo, hi, slo, shi);
    }
    return acc;
}

// Element j of a Q4_K or Q5_K row: (d·sc)·q − dmin·m.
float welem_q45_k(uint ty, uint t, uint row, uint j) {
    uint ch = T(t, T_CHUNK), nsb = T(t, T_COLS) / 256u;
    uint sb = j / 256u, e = j % 256u, s = e / 32u, l = e % 32u, blk = row * nsb + sb;
    uint word = wld(ch, T(t, T_QS) + row * T(t, T_ROWW) + sb * 32u + (s / 2u) * 8u + l / 4u);
    uint byte = (word >> ((l % 4u) * 8u)) & 255u;
    uint n = (s & 1u) == 0u ? (byte & 15u) : (byte >> 4u);
    if (ty == TY_Q5_K) n |= ((wld(ch, T(t, T_X) + blk * 8u + l / 4u) >> ((l % 4u) * 8u + s)) & 1u) << 4u;
    uvec4 hd = wld4(ch, T(t, T_SC) + blk * 4u);
    vec2 dm = unpackHalf2x16(hd.x);
    uvec2 sm = k_scale_min(hd, s);
    return (dm.x * float(sm.x)) * float(n) - dm.y * float(sm.y);
}

// ---- Q6_K ----
// Unit u = unit 2h + o of super-block sb (repack): sub-blocks 4h + o and 4h + 2 + o, words
// k = 0..7 of each (elements 4k..4k+3) from ql word k (low nibbles the first sub-block's, high
// the second's) and the high-bit nibbles (word k % 4, the high nibbles for k >= 4). The 6-bit
// value of each byte is assembled in place (nibble | two bits << 4); sub-block half i (16
// elements) has its own scale: term (d·sc)·Σ (q − 32)·x.
uint q6_hn(uvec4 c, uint k) { return k < 4u ? (c[k] & 0x0F0F0F0Fu) : ((c[k - 4u] >> 4u) & 0x0F0F0F0Fu); }
uint q6_a(uint w, uint n) { return (w & 0x0F0F0F0Fu) | ((n & 0x03030303u) << 4u); }
uint q6_b(uint w, uint n) { return ((w >> 4u) & 0x0F0F0F0Fu) | ((n & 0x0C0C0C0Cu) << 2u); }
// The signed scale in byte i of w.
float q6_sc(uint w, uint i) { return float((int(w) << (24u - 8u * i)) >> 24); }
#define DEFINE_Q6K(NAME, R)                                                                  \
void NAME(uint ts[R], uint rs[R], uint c0, uint cl, inout float acc[R]) {                    \
    KROWS_SETUP(R, 0u)                                                                       \
    FOR_LANE_UNITS(u, nu, 40u * R) {                                                         \
        Q6K_LOADS(R)                                                                         \
        /* The two sub-blocks' places in sx: 8 (u / 4) + 4h + o and two further. */         \
        uint x1 = ((u >> 2u) * 8u + 4u * h + o) * 9u, x2 = x1 + 18u;                         \
        float s0[R], s1[R], s2[R], s3[R];                                                    \
        [[unroll]] for (uint r = 0u; r < R; ++r) { s0[r] = 0.0; s1[r] = 0.0; s2[r] = 0.0; s3[r] = 0.0; } \
        [[unroll]] for (uint k = 0u; k < 4u; ++k) {                                          \
            vec4 y0 = sx4[x1 + k], y1 = sx4[x1 + 4u + k], y2 = sx4[x2 + k], y3 = sx4[x2 + 4u + k]; \
            [[unroll]] for (uint r = 0u; r < R; ++r) {                                       \
                uint n0 = q6_hn(c[r], k), n1 = q6_hn(c[r], k + 4u);                          \
                s0[r] += bytes_dot(q6_a(a[r][k], n0), y0, 32.0);                             \
                s1[r] += bytes_dot(q6_a(b[r][k], n1), y1, 32.0);                             \
                s2[r] += bytes_dot(q6_b(a[r][k], n0), y2, 32.0);                             \
                s3[r] += bytes_dot(q6_b(b[r][k], n1), y3, 32.0);                             \
            }                                                                                \
        }                                                                                    \
        /* Scales 8h + 2g + i (g = o, 2 + o; i the half): word 2h (g < 2) or 2h + 1, byte 2o + i. */ \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            uint wa = hd[r][2u * h], wb = hd[r][2u * h + 1u];                                \
            acc[r] += (d[r] * q6_sc(wa, 2u * o)) * s0[r];                                    \
            acc[r] += (d[r] * q6_sc(wa, 2u * o + 1u)) * s1[r];                               \
            acc[r] += (d[r] * q6_sc(wb, 2u * o)) * s2[r];                                    \
            acc[r] += (d[r] * q6_sc(wb, 2u * o + 1u)) * s3[r];                               \
        }                                                                                    \
    }                                                                                        \
}
DEFINE_Q6K(q6k_rows1, 1u)
DEFINE_Q6K(q6k_rows2, 2u)
DEFINE_Q6K(q6k_rows4, 4u)
float dot_q6_k(uint t, uint row, uint c0, uint cl) {
    uint ts[1] = uint[1](t), rs[1] = uint[1](row);
    float a[1] = float[1](0.0);
    q6k_rows1(ts, rs, c0, cl, a);
    return a[0];
}

float welem_q6_k(uint t, uint row, uint j) {
    uint ch = T(t, T_CHUNK), nsb = T(t, T_COLS) / 256u;
    uint sb = j / 256u, e = j % 256u;
    uint h = e / 128u, g = (e % 128u) / 32u, l = e % 32u, o = g & 1u, hi = g >> 1u;
    uint qo = T(t, T_QS) + row * T(t, T_ROWW) + sb * 48u + (2u * h + o) * 12u;
    uint qb = (wld(ch, qo + l / 4u) >> ((l % 4u) * 8u)) & 255u;
    uint hb = (wld(ch, qo + 8u + (l % 16u) / 4u) >> ((l % 4u) * 8u + 4u * (l / 16u))) & 15u;
    uint q = (hi == 0u ? (qb & 15u) : (qb >> 4u)) | (((hb >> (2u * hi)) & 3u) << 4u);
    uint blk = row * nsb + sb, si = 8u * h + 2u * g + l / 16u;
    float sc = q6_sc(wld(ch, T(t, T_SC) + blk * 4u + si / 4u), si % 4u);
    return (qscale(ch, T(t, T_X), blk) * sc) * float(int(q) - 32);
}

// ---- IQ4_XS ----
// The non-linear code book (ggml's kvalues_iq4nl) as signed bytes, four per word: value n is
// byte n % 4 of word n / 4.
uint iq4_word(uint n) {
    return n < 8u ? (n < 4u ? 0xBFAD9881u : 0xF6EADDCFu) : (n < 12u ? 0x26190D01u : 0x71594535u);
}
int iq4_kv(uint n) { return (int(iq4_word(n)) << (24u - 8u * (n & 3u))) >> 24; }
// Sub-block s's scale d · (ls − 32) from the header words (d | scales_h << 16, scales_l).
float iq4_dl(uint h0, uint h1, uint s) {
    uint ls = ((h1 >> (4u * s)) & 15u) | (((h0 >> (16u + 2u * s)) & 3u) << 4u);
    return unpackHalf2x16(h0).x * float(int(ls) - 32);
}
// The code book for all eight nibbles of w at once, as bit logic on the word (round 67): .x holds
// kv[low nibble of byte i] and .y kv[high nibble of byte i] as signed byte i. Write k = kv[n]'s
// byte as two nibbles, hi:lo. hi is n ^ 8 less one where n = 9..14 (n ≥ 8 and n's three low
// bits not all equal), which no lane borrows across (n ^ 8 ≥ 1 there). lo is four 4-input
// functions of n's bits: lo bit j, at lane bit j, is mux(n3, g0(n2, n1, n0), g1(n2, n1, n0)),
// the bits of n lined up with bit j by shifting the whole word (bits that move across a lane
// boundary land on positions the lane masks drop). g0/g1 are kv[0..7]/kv[8..15]'s lo bit j,
// each one 3-input function (one LOP3; the truth tables in the comments, bit n2n1n0).
// Count, per 8 values: 6 shifts, 2 LOP3 for the borrow bits, 2 for hi, 12 LOP3 for lo
// (4 × g0, g1, mux), 4 to merge lo's bits, 4 to pair the nibbles into bytes: about 30, i.e.
// ≈ 3.75 per value or 15 per 4 (the per-nibble word select, shift and place it replaces:
// ≈ 8-9 per value). No constant lives in a register: every mask is a LOP3 immediate.
uvec2 iq4_bytes8(uint w) {
    uint r1 = w >> 1u, r2 = w >> 2u, r3 = w >> 3u, l1 = w << 1u, l2 = w << 2u, l3 = w << 3u;
    uint z = ((w ^ r1) | (r1 ^ r2)) & r3 & 0x11111111u;
    uint hs = (w ^ 0x88888888u) - z;
    // lo bit 0: (a, b, c) = (n2, n1, n0) = (r2, r1, w); g0 = 0x3D, g1 = 0xF7.
    uint b0 = (((r2 ^ r1) | ~(r2 | w)) & ~r3) | ((r2 | ~(r1 & w)) & r3);
    // lo bit 1: (r1, w, l1); g0 = 0xD8, g1 = 0x08.
    uint b1 = (((r1 | l1) & (w | ~l1)) & ~r2) | ((~r1 & w & l1) & r2);
    // lo bit 2: (w, l1, l2); g0 = 0xBC, g1 = 0x3A.
    uint b2 = (((w ^ l1) | (w & l2)) & ~r1) | (((w & l1) ^ (w | l2)) & r1);
    // lo bit 3: (l1, l2, l3); g0 = 0x7E, g1 = 0x46.
    uint b3 = (((l1 ^ l2) | (l1 ^ l3)) & ~w) | (((l2 ^ l3) & ~(l1 & l3)) & w);
    uint lo = (b0 & 0x11111111u) | (b1 & 0x22222222u) | (b2 & 0x44444444u) | (b3 & 0x88888888u);
    return uvec2((lo & 0x0F0F0F0Fu) | ((hs << 4u) & 0xF0F0F0F0u), ((lo >> 4u) & 0x0F0F0F0Fu) | (hs & 0xF0F0F0F0u));
}
// Signed byte i of a word of iq4_bytes8's, as a float.
float iq4_f(uint b, uint i) { return float(int(b << (24u - 8u * i)) >> 24); }
// One 32-element block of code-book nibbles (Q4_0's layout: the low nibbles are elements
// 0..15, the high 16..31) against block u of sx: lo + hi, each summed in element order.
float iq4_block_sx(uvec4 W, uint u) {
    float lo = 0.0, hi = 0.0;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
        vec4 xl = sx4[u * 9u + k], xh = sx4[u * 9u + 4u + k];
        uvec2 b = iq4_bytes8(W[k]);
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
            lo += iq4_f(b.x, i) * xl[i];
            hi += iq4_f(b.y, i) * xh[i];
        }
    }
    return lo + hi;
}
// Unit = one sub-block of 32 (g = c0/32 + u = 8 sb + s): (d·(ls − 32)) · Σ kv[n]·x, the
// nibbles laid out as Q4_0's (lo + hi, each in element order). A lane takes its units u and
// u + S in one trip, both units' loads (quants, then header words tied to them as
// qscale_after ties a scale) before either's arithmetic, and adds them in the order of one
// unit a trip (u, u + S, u + 2S, ...): the same bits, twice the bytes in flight a trip (an
// IQ4 unit is 16 bytes of quants; act_q8.glsl's iq4xs_q8_one). The back-edge count (TICK) is
// the one-unit loop's, trip for trip (budget.rs).
float dot_iq4_xs(uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), hs = T(t, T_SC);
    uint nsb = T(t, T_COLS) / 256u, nu = cl / 32u, u0 = c0 / 32u, S = gl_SubgroupSize;
    float acc = 0.0;
    for (uint p0 = 0u, ua = tlane(); p0 < nu; p0 += 2u * S, ua += 2u * S) {
        TICK();
        uint ub = ua + S;
        bool ha = ua < nu, hb = ub < nu;
        uint ga = u0 + ua, gb = u0 + ub;
        uint hba = hs + (row * nsb + (ga >> 3u)) * 2u, hbb = hs + (row * nsb + (gb >> 3u)) * 2u;
        uvec4 Wa = ha ? wld4(ch, base + (ga >> 3u) * 32u + (ga & 7u) * 4u) : uvec4(0u);
        uvec4 Wb = hb ? wld4(ch, base + (gb >> 3u) * 32u + (gb & 7u) * 4u) : uvec4(0u);
        uint dep = (Wa.x ^ Wb.x) & pc.zero;
        uint h0a = ha ? wld(ch, hba) : 0u, h1a = ha ? wld(ch, hba + 1u) : 0u;
        uint h0b = hb ? wld(ch, hbb) : 0u, h1b = hb ? wld(ch, hbb + 1u) : 0u;
        if (ha) {
            TICK_N(40u);
            acc += iq4_dl(h0a ^ dep, h1a ^ dep, ga & 7u) * iq4_block_sx(Wa, ua);
        }
        if (p0 + S < nu) TICK();
        if (hb) {
            TICK_N(40u);
            acc += iq4_dl(h0b ^ dep, h1b ^ dep, gb & 7u) * iq4_block_sx(Wb, ub);
        }
    }
    return acc;
}
float welem_iq4_xs(uint t, uint row, uint j) {
    uint ch = T(t, T_CHUNK), nsb = T(t, T_COLS) / 256u;
    uint sb = j / 256u, e = j % 256u, s = e / 32u, l = e % 32u, k = l % 16u;
    uint hb = T(t, T_SC) + (row * nsb + sb) * 2u;
    uint byte = (wld(ch, T(t, T_QS) + row * T(t, T_ROWW) + sb * 32u + s * 4u + k / 4u) >> ((k % 4u) * 8u)) & 255u;
    uint n = l < 16u ? (byte & 15u) : (byte >> 4u);
    return iq4_dl(wld(ch, hb), wld(ch, hb + 1u), s) * float(iq4_kv(n));
}

// ---- IQ4_NL ----
// Q4_0's layout (repack): four quant words per block in the row, nibbles laid out as Q4_0's,
// the block scales as packed halves at T_SC. Unit = one block (g = c0/32 + b): d · Σ kv[n]·x
// (lo + hi, each in element order), IQ4_XS's sub-block term with the block's own scale.
// A row's blocks two a lane a trip, added in the one-unit order (see dot_iq4_xs): blocks ba
// and ba + S's quant words, then their scales tied to them, then acc += TERM(d, W, b) of
// each (scale, quant words, block); the f32 loop below and act_q8.glsl's iq4nl_q8_one. Uses
// the caller's ch, base, sc, nb, nbt, g0, S, row and acc.
#define IQ4NL_TWO_UNITS(TERM)                                                                \
    for (uint p0 = 0u, ba = tlane(); p0 < nb; p0 += 2u * S, ba += 2u * S) {                 \
        TICK();                                                                              \
        uint bb = ba + S;                                                                    \
        bool ha = ba < nb, hb = bb < nb;                                                     \
        uvec4 Wa = ha ? wld4(ch, base + (g0 + ba) * 4u) : uvec4(0u);                         \
        uvec4 Wb = hb ? wld4(ch, base + (g0 + bb) * 4u) : uvec4(0u);                         \
        uint dep = Wa.x ^ Wb.x;                                                              \
        float da = ha ? qscale_after(ch, sc, row * nbt + g0 + ba, dep) : 0.0;                \
        float db = hb ? qscale_after(ch, sc, row * nbt + g0 + bb, dep) : 0.0;                \
        if (ha) {                                                                            \
            TICK_N(40u);                                                                     \
            acc += TERM(da, Wa, ba);                                                         \
        }                                                                                    \
        if (p0 + S < nb) TICK();                                                             \
        if (hb) {                                                                            \
            TICK_N(40u);                                                                     \
            acc += TERM(db, Wb, bb);                                                         \
        }                                                                                    \
    }
#define IQ4NL_SX_TERM(D, W, B) (D) * iq4_block_sx(W, B)
float dot_iq4_nl(uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), sc = T(t, T_SC);
    uint nb = cl / 32u, nbt = T(t, T_COLS) / 32u, g0 = c0 / 32u, S = gl_SubgroupSize;
    float acc = 0.0;
    IQ4NL_TWO_UNITS(IQ4NL_SX_TERM)
    return acc;
}
// Element j: d · kv[n], as the CPU reference computes it.
float welem_iq4_nl(uint t, uint row, uint j) {
    uint ch = T(t, T_CHUNK), b = j / 32u, e = j % 32u, k = e % 16u;
    uint word = wld(ch, T(t, T_QS) + row * T(t, T_ROWW) + b * 4u + k / 4u);
    uint byte = (word >> ((k % 4u) * 8u)) & 255u;
    uint n = e < 16u ? (byte & 15u) : (byte >> 4u);
    return qscale(ch, T(t, T_SC), row * (T(t, T_COLS) / 32u) + b) * float(iq4_kv(n));
}

// ---- BF16 ----
// Two elements per word (rows padded to whole words, as F16's): lane l takes words l, l + S, ...
vec2 bf16_pair(uint w) { return vec2(uintBitsToFloat(w << 16u), uintBitsToFloat(w & 0xFFFF0000u)); }
float dot_bf16(uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW) + c0 / 2u;
    uint nw = (cl + 1u) / 2u, S = gl_SubgroupSize;
    float acc = 0.0;
    for (uint k0 = 0u; k0 < nw; k0 += S) {
        TICK();
        uint k = k0 + tlane();
        if (k >= nw) continue;
        vec2 v = bf16_pair(wld(ch, base + k));
        acc += v.x * sx_get(SXI(2u * k));
        if (2u * k + 1u < cl) acc += v.y * sx_get(SXI(2u * k + 1u));
    }
    return acc;
}
float welem_bf16(uint t, uint row, uint j) {
    vec2 v = bf16_pair(wld(T(t, T_CHUNK), T(t, T_QS) + row * T(t, T_ROWW) + j / 2u));
    return (j & 1u) == 0u ? v.x : v.y;
}

// ---- dispatch (decode.comp's type branches) ----
bool quant_type(uint ty) {
    return IS_TY(ty, TY_Q4_K) || IS_TY(ty, TY_Q5_K) || IS_TY(ty, TY_Q6_K) || IS_TY(ty, TY_IQ4_XS) || IS_TY(ty, TY_Q4_1)
        || IS_TY(ty, TY_Q5_0) || IS_TY(ty, TY_Q5_1) || IS_TY(ty, TY_BF16) || IS_TY(ty, TY_IQ4_NL);
}
// One element of a tensor of a type this file defines.
float quant_welem(uint ty, uint t, uint row, uint j) {
    if (IS_TY(ty, TY_Q4_K) || IS_TY(ty, TY_Q5_K)) return welem_q45_k(ty, t, row, j);
    if (IS_TY(ty, TY_Q6_K)) return welem_q6_k(t, row, j);
    if (IS_TY(ty, TY_IQ4_XS)) return welem_iq4_xs(t, row, j);
    if (IS_TY(ty, TY_IQ4_NL)) return welem_iq4_nl(t, row, j);
    if (IS_TY(ty, TY_BF16)) return welem_bf16(t, row, j);
    if (IS_TY(ty, TY_Q4_1) || IS_TY(ty, TY_Q5_0) || IS_TY(ty, TY_Q5_1)) return welem_q32(ty, t, row, j);
    return uintBitsToFloat(0x7FC00000u);  // unreachable (quant_type): NaN, never a quiet 0
}
#ifdef ACT_Q8
// act_q8.glsl: a lane's share of row·x against the int8 input vector in sq.
float quant_dot_q8(uint ty, uint t, uint row, uint c0, uint cl);
#endif
// Whether this file defines type ty; if so a lane's share of row·x over columns
// [c0, c0 + cl) of the input vector goes into acc (the f32 vector in sx, or in the ACT_Q8
// modules its int8 quantisation in sq).
bool quant_dot(uint ty, uint t, uint row, uint c0, uint cl, inout float acc) {
    if (!quant_type(ty)) return false;
#ifdef ACT_Q8
    acc = quant_dot_q8(ty, t, row, c0, cl);
#else
    if (IS_TY(ty, TY_Q4_K)) acc = dot_q4_k(t, row, c0, cl);
    else if (IS_TY(ty, TY_Q5_K)) acc = dot_q5_k(t, row, c0, cl);
    else if (IS_TY(ty, TY_Q6_K)) acc = dot_q6_k(t, row, c0, cl);
    else if (IS_TY(ty, TY_IQ4_XS)) acc = dot_iq4_xs(t, row, c0, cl);
    else if (IS_TY(ty, TY_IQ4_NL)) acc = dot_iq4_nl(t, row, c0, cl);
    else if (IS_TY(ty, TY_BF16)) acc = dot_bf16(t, row, c0, cl);
    else if (IS_TY(ty, TY_Q4_1) || IS_TY(ty, TY_Q5_0) || IS_TY(ty, TY_Q5_1)) acc = dot_q32(ty, t, row, c0, cl);
    else acc = uintBitsToFloat(0x7FC00000u);  // unreachable (quant_type)
#endif
    return true;
}
