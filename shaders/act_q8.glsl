// act_q8.glsl — the q8 activation path (included by decode.comp where the dot products
// are defined; engine/src/act.rs defines the op): the int8 input vector in shared memory, its
// quantisation, and a quantised block against it. IN_CAP: the elements a matvec input holds
// at once (the int8 vector's in the ACT_Q8 modules, the f32 vector's otherwise).

// ---- the q8 activation path (ACT_Q8 modules; engine/src/act.rs defines the op) ----
#ifdef ACT_Q8
// The input vector quantised per 32-element block: block B is sq[3B] and sq[3B + 1] (its 32
// int8 quants, element 4k + i in byte i of word k, k = 0..7) and sq[3B + 2] = (scale bits,
// sum of the quants, 0, 0). 48 bytes per block: lane l of a team reads block b0 + l, and
// with a stride of 12 words the eight lanes of a 16-byte load phase hit eight different
// 4-bank groups (no conflicts; a stride of 8 words would pair them up).
shared uvec4 sq[SQ_CAP / 32u * 3u + 3u];
// The IQ4 code book by quant byte (round 67: +29.8 % at 1B IQ4_XS q8 on the H100, bit logic
// +22.3 %): iq4_tab[b] = kv[b & 15] as byte 0 and kv[b >> 4] as byte 2 (signed bytes), so
// that two entries pair up with one shift-add (see iq4_bytes8_tab). 1 KiB in a module whose
// program has an IQ4 tensor (the host takes it off sq's budget, setup.rs), one word otherwise
// (within the host's 1,024 bytes for the small arrays). Filled once per dispatch at the start of main (iq4_tab_fill); a dot product reads
// it only after the barrier that follows sq's quantisation, which orders the fill before.
const uint IQ4_TAB = 1u + 255u * (((TYPES >> TY_IQ4_XS) | (TYPES >> TY_IQ4_NL)) & 1u);
shared uint iq4_tab[IQ4_TAB];
#define IN_CAP SQ_CAP
#define QA_SX 0u     // quant_act's sources: the raw vector in sx,
#define QA_NORM 1u   // sx normalised on the way (scale * sx[j] * norm weight j),
#define QA_STATE 2u  // state words from `off`,
#define QA_ATT 3u    // or the attention output combined from `nt` chunks' records (att_out4)

// Quantise elements [0, n) of the input vector (whole blocks; n a multiple of 32) into sq,
// exactly as engine/src/act.rs defines it: every step is exact (abs, max, a power-of-two
// scaling, a comparison, round to nearest even), so every device and the CPU reference agree.
// Eight consecutive lanes of a subgroup hold a block, four elements each; the block's max,
// non-finite flag and quant sum travel between them by xor shuffles (a subgroup size that is
// a multiple of 8; every lane of the workgroup runs the same trip count). The caller syncs.
void quant_act(uint n, uint src, uint off, uint nt, float scale) {
    uint nq = (n / 32u) * 8u, L = gl_WorkGroupSize.x;
    for (uint i0 = 0u; i0 < nq; i0 += L) {
        TICK();
        uint i = i0 + team() * gl_SubgroupSize + tlane();
        bool has = i < nq;
        vec4 v = vec4(0.0);
        if (has) {
            if (src == QA_STATE) {
                v = st4.s[(off >> 2u) + i];   // off: a multiple of 4 (the host's layout)
            } else if (src == QA_ATT) {
                v = att_out4(i, nt);
            } else {
                v = sx4[(i >> 3u) * 9u + (i & 7u)];
                if (src == QA_NORM)
                    [[unroll]] for (uint c = 0u; c < 4u; ++c) v[c] = welem(nt, 0u, 4u * i + c) * (scale * v[c]);
            }
        }
        uint bad = (any(isnan(v)) || any(isinf(v))) ? 1u : 0u;
        vec4 a = abs(v);
        float m = max(max(a.x, a.y), max(a.z, a.w));
        [[unroll]] for (uint x = 1u; x < 8u; x <<= 1u) {
            m = max(m, subgroupShuffleXor(m, x));
            bad |= subgroupShuffleXor(bad, x);
        }
        // m is a normal float >= 2^-100 past the first test: [2^(E-1), 2^E) with E its biased
        // exponent - 126; e = E - 7 puts m * 2^-e in [64, 128), one more if that exceeds 127.
        float bscale = 0.0, inv = 0.0;
        if (bad != 0u) {
            bscale = uintBitsToFloat(0x7FC00000u);
        } else if (m >= uintBitsToFloat(27u << 23u)) {
            int e = int(floatBitsToUint(m) >> 23u) - 133;
            if (m * uintBitsToFloat(uint(127 - e) << 23u) > 127.0) e += 1;
            inv = uintBitsToFloat(uint(127 - e) << 23u);
            bscale = uintBitsToFloat(uint(127 + e) << 23u);
        }
        ivec4 q = bad != 0u ? ivec4(0) : ivec4(roundEven(v * inv));
        int qs = q.x + q.y + q.z + q.w;
        [[unroll]] for (uint x = 1u; x < 8u; x <<= 1u) qs += subgroupShuffleXor(qs, x);
        if (has) {
            uint blk = i >> 3u, k = i & 7u;
            sq[blk * 3u + (k >> 2u)][k & 3u] = (uint(q.x) & 255u) | ((uint(q.y) & 255u) << 8u)
                | ((uint(q.z) & 255u) << 16u) | (uint(q.w) << 24u);
            if (k == 0u) sq[blk * 3u + 2u] = uvec4(floatBitsToUint(bscale), uint(qs), 0u, 0u);
        }
    }
}

// A Q4_0 block (its four quant words W, scale D) against block B of sq: the nibbles n as
// unsigned bytes against the signed quants q, s = sum n*q - 8 * sum q exactly; the term is
// (float(s) * D) * the block's scale. Q8_0 likewise with signed weight bytes (no offset).
float q4_q8(uvec4 W, uint B, float D) {
    uvec4 xa = sq[B * 3u], xb = sq[B * 3u + 1u], xs = sq[B * 3u + 2u];
    int s = -8 * int(xs.y);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
        s += dotPacked4x8EXT(W[k] & 0x0F0F0F0Fu, int(xa[k]));
        s += dotPacked4x8EXT((W[k] >> 4u) & 0x0F0F0F0Fu, int(xb[k]));
    }
    return float(s) * D * uintBitsToFloat(xs.x);
}
float q8_q8(uvec4 WA, uvec4 WB, uint B, float D) {
    uvec4 xa = sq[B * 3u], xb = sq[B * 3u + 1u], xs = sq[B * 3u + 2u];
    int s = 0;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
        s += dotPacked4x8EXT(int(WA[k]), int(xa[k]));
        s += dotPacked4x8EXT(int(WB[k]), int(xb[k]));
    }
    return float(s) * D * uintBitsToFloat(xs.x);
}

// ---- the other quantised types against sq (engine/src/act.rs defines each term) ----
// Word k (k = 0..7: elements 4k..4k+3) of block B's quants.
int sqw(uint B, uint k) { return int(k < 4u ? sq[B * 3u][k] : sq[B * 3u + 1u][k - 4u]); }
float sq_scale(uint B) { return uintBitsToFloat(sq[B * 3u + 2u].x); }
int sq_sum(uint B) { return int(sq[B * 3u + 2u].y); }
// A block's term from its exact integer sums: (d · f32(a) + m · f32(b)) · 2^e, every product
// and the sum rounded as written (precise: no fused multiply-add, as on the CPU).
float q8_term(float d, int a, float m, int b, uint B) {
    precise float v = d * float(a) + m * float(b);
    precise float r = v * sq_scale(B);
    return r;
}

// Q4_1, Q5_0, Q5_1: unit = one block, s = Σ q·x over its 4- or 5-bit values (unsigned bytes
// against the signed quants); Q5_0's term is (f32(s − 16·Σx) · d) · 2^e, the others'
// (d · f32(s) + m · f32(Σx)) · 2^e.
float dot_q32_q8(uint ty, uint t, uint row, uint c0, uint cl) {
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), hs = T(t, T_SC), xs = T(t, T_X);
    uint nb = cl / 32u, nbt = T(t, T_COLS) / 32u, g0 = c0 / 32u, S = gl_SubgroupSize;
    bool five = ty != TY_Q4_1, mins = ty != TY_Q5_0;
    float acc = 0.0;
    FOR_LANE_UNITS(b, nb, 40u) {
        uint blk = row * nbt + g0 + b;
        uvec4 W = wld4(ch, base + (g0 + b) * 4u);
        uint hd = wld(ch, hs + blk), qh = five ? wld(ch, xs + blk) : 0u;
        int s = 0;
        [[unroll]] for (uint k = 0u; k < 4u; ++k) {
            s += dotPacked4x8EXT(q5_lo(W[k], qh, k), sqw(b, k));
            s += dotPacked4x8EXT(q5_hi(W[k], qh, k), sqw(b, k + 4u));
        }
        vec2 dm = unpackHalf2x16(hd);
        acc += mins ? q8_term(dm.x, s, dm.y, sq_sum(b), b) : q8_term(dm.x, s - 16 * sq_sum(b), 0.0, 0, b);
    }
    return acc;
}

// Q4_K, Q5_K: unit = sub-blocks 2p, 2p + 1 (blocks 2u, 2u + 1 of sq); sub-block j's term is
// (d · f32(sc_j · s_j) − dmin · f32(m_j · Σx)) · 2^e, s_j = Σ q·x over its 4- or 5-bit values.
// R rows at once as quant.glsl's DEFINE_Q4K: the int8 blocks read once for every row, each
// row's arithmetic the one-row sequence.
#define DEFINE_Q45K_Q8(NAME, R)                                                              \
void NAME(bool five, uint ts[R], uint rs[R], uint c0, uint cl, inout float acc[R]) {         \
    KROWS_SETUP(R, 8u)                                                                       \
    FOR_LANE_UNITS(u, nu, 40u * R) {                                                         \
        uint g = u0 + u, sb = g >> 2u, p = g & 3u;                                           \
        uvec4 qa[R], qb[R], ha[R], hb[R], hd[R];                                             \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            uint qo = base[r] + sb * 32u + p * 8u;                                           \
            qa[r] = wld4(ch[r], qo);                                                         \
            qb[r] = wld4(ch[r], qo + 4u);                                                    \
            ha[r] = five ? wld4(ch[r], xs[r] + sb * 8u) : uvec4(0u);                         \
            hb[r] = five ? wld4(ch[r], xs[r] + sb * 8u + 4u) : uvec4(0u);                    \
            hd[r] = wld4(ch[r], hs[r] + sb * 4u);                                            \
        }                                                                                    \
        uint B = 2u * u;                                                                     \
        uvec4 x0 = sq[B * 3u], x1 = sq[B * 3u + 1u], y0 = sq[B * 3u + 3u], y1 = sq[B * 3u + 4u]; \
        int lo[R], hi[R];                                                                    \
        [[unroll]] for (uint r = 0u; r < R; ++r) { lo[r] = 0; hi[r] = 0; }                   \
        [[unroll]] for (uint k = 0u; k < 8u; ++k) {                                          \
            int xl = int(k < 4u ? x0[k] : x1[k - 4u]), xh = int(k < 4u ? y0[k] : y1[k - 4u]); \
            [[unroll]] for (uint r = 0u; r < R; ++r) {                                       \
                uint w = k < 4u ? qa[r][k] : qb[r][k - 4u], hw = k < 4u ? ha[r][k] : hb[r][k - 4u]; \
                lo[r] += dotPacked4x8EXT(q5k_lo(w, hw, p), xl);                              \
                hi[r] += dotPacked4x8EXT(q5k_hi(w, hw, p), xh);                              \
            }                                                                                \
        }                                                                                    \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            vec2 dm = unpackHalf2x16(hd[r].x);                                               \
            uvec2 a = k_scale_min(hd[r], 2u * p), c = k_scale_min(hd[r], 2u * p + 1u);       \
            acc[r] += q8_term(dm.x, int(a.x) * lo[r], -dm.y, int(a.y) * sq_sum(B), B);       \
            acc[r] += q8_term(dm.x, int(c.x) * hi[r], -dm.y, int(c.y) * sq_sum(B + 1u), B + 1u); \
        }                                                                                    \
    }                                                                                        \
}
DEFINE_Q45K_Q8(q45k_q8_rows1, 1u)
DEFINE_Q45K_Q8(q45k_q8_rows2, 2u)
DEFINE_Q45K_Q8(q45k_q8_rows4, 4u)

// The bytes of w (values 0..63) less 32 as signed bytes: the top bit set keeps each byte's
// subtraction from borrowing, then flipping it back gives the two's complement.
int q6_signed(uint w) { return int(((w | 0x80808080u) - 0x20202020u) ^ 0x80808080u); }
// Q6_K: unit = sub-blocks 4h + o and 4h + 2 + o (repack); a sub-block's term is
// (d · f32(sc_0 · s_0 + sc_1 · s_1)) · 2^e over its two 16-element halves, s_i = Σ (q − 32)·x.
#define DEFINE_Q6K_Q8(NAME, R)                                                               \
void NAME(uint ts[R], uint rs[R], uint c0, uint cl, inout float acc[R]) {                    \
    KROWS_SETUP(R, 0u)                                                                       \
    FOR_LANE_UNITS(u, nu, 40u * R) {                                                         \
        Q6K_LOADS(R)                                                                         \
        uint B1 = (u >> 2u) * 8u + 4u * h + o, B2 = B1 + 2u;                                 \
        uvec4 e0 = sq[B1 * 3u], e1 = sq[B1 * 3u + 1u], f0 = sq[B2 * 3u], f1 = sq[B2 * 3u + 1u]; \
        int s0[R], s1[R], s2[R], s3[R];                                                      \
        [[unroll]] for (uint r = 0u; r < R; ++r) { s0[r] = 0; s1[r] = 0; s2[r] = 0; s3[r] = 0; } \
        [[unroll]] for (uint k = 0u; k < 4u; ++k) {                                          \
            [[unroll]] for (uint r = 0u; r < R; ++r) {                                       \
                uint n0 = q6_hn(c[r], k), n1 = q6_hn(c[r], k + 4u);                          \
                s0[r] += dotPacked4x8EXT(q6_signed(q6_a(a[r][k], n0)), int(e0[k]));          \
                s1[r] += dotPacked4x8EXT(q6_signed(q6_a(b[r][k], n1)), int(e1[k]));          \
                s2[r] += dotPacked4x8EXT(q6_signed(q6_b(a[r][k], n0)), int(f0[k]));          \
                s3[r] += dotPacked4x8EXT(q6_signed(q6_b(b[r][k], n1)), int(f1[k]));          \
            }                                                                                \
        }                                                                                    \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            uint wa = hd[r][2u * h], wb = hd[r][2u * h + 1u];                                \
            int i0a = int(q6_sc(wa, 2u * o)), i1a = int(q6_sc(wa, 2u * o + 1u));             \
            int i0b = int(q6_sc(wb, 2u * o)), i1b = int(q6_sc(wb, 2u * o + 1u));             \
            acc[r] += q8_term(d[r], i0a * s0[r] + i1a * s1[r], 0.0, 0, B1);                  \
            acc[r] += q8_term(d[r], i0b * s2[r] + i1b * s3[r], 0.0, 0, B2);                  \
        }                                                                                    \
    }                                                                                        \
}
DEFINE_Q6K_Q8(q6k_q8_rows1, 1u)
DEFINE_Q6K_Q8(q6k_q8_rows2, 2u)
DEFINE_Q6K_Q8(q6k_q8_rows4, 4u)

void iq4_tab_fill() {
    if (IQ4_TAB == 1u) return;
    for (uint b = lid(); b < 256u; b += gl_WorkGroupSize.x)
        iq4_tab[b] = (uint(iq4_kv(b & 15u)) & 255u) | ((uint(iq4_kv(b >> 4u)) & 255u) << 16u);
}
// iq4_bytes8's two words through the table: four loads (bank = byte mod 32, random indices),
// two shift-adds pairing entries 0/1 and 2/3 ([lo0 lo1 hi0 hi1], [lo2 lo3 hi2 hi3]), two byte
// shuffles (PRMT where the compiler sees them) and four index extractions: ≈ 12 ALU + 4 LDS
// per 8 values (bit logic: ≈ 30).
uvec2 iq4_bytes8_tab(uint w) {
    uint e0 = iq4_tab[w & 255u], e1 = iq4_tab[(w >> 8u) & 255u];
    uint e2 = iq4_tab[(w >> 16u) & 255u], e3 = iq4_tab[w >> 24u];
    uint a = e0 | (e1 << 8u), c = e2 | (e3 << 8u);
    return uvec2((a & 0xFFFFu) | (c << 16u), (a >> 16u) | (c & 0xFFFF0000u));
}
// One 32-element block of code-book nibbles (Q4_0's layout) against the int8 block whose
// quant words are xa (elements 0..15) and xb (16..31): Σ kv[n]·x (integer, so any order).
int iq4_block_q8(uvec4 W, uvec4 xa, uvec4 xb) {
    int v = 0;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
        uvec2 b = iq4_bytes8_tab(W[k]);
        v += dotPacked4x8EXT(int(b.x), int(xa[k]));
        v += dotPacked4x8EXT(int(b.y), int(xb[k]));
    }
    return v;
}
// IQ4_XS: unit = one sub-block (block u of sq); term (d · f32((ls − 32) · s)) · 2^e,
// s = Σ kv[n]·x. R rows at once (a two-row unit's rows: round 71), as Q4_K's: every
// row's loads first, the int8 block read once for every row, each row's arithmetic the
// one-row sequence (bit-identical to one row at a time). The scale words are unpacked only
// once every row's quant words have arrived (qscale_after's tie).
#define DEFINE_IQ4XS_Q8(NAME, R)                                                             \
void NAME(uint ts[R], uint rs[R], uint c0, uint cl, inout float acc[R]) {                    \
    uint nsb = T(ts[0], T_COLS) / 256u, nu = cl / 32u, u0 = c0 / 32u, S = gl_SubgroupSize;  \
    uint ch[R], base[R], hs[R];                                                              \
    [[unroll]] for (uint r = 0u; r < R; ++r) {                                               \
        ch[r] = T(ts[r], T_CHUNK);                                                           \
        base[r] = T(ts[r], T_QS) + rs[r] * T(ts[r], T_ROWW);                                 \
        hs[r] = T(ts[r], T_SC) + rs[r] * nsb * 2u;                                           \
    }                                                                                        \
    FOR_LANE_UNITS(u, nu, 40u * R) {                                                         \
        uint g = u0 + u, sb = g >> 3u, s = g & 7u;                                           \
        uvec4 W[R];                                                                          \
        uint h0[R], h1[R], dep = 0u;                                                         \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            W[r] = wld4(ch[r], base[r] + sb * 32u + s * 4u);                                 \
            h0[r] = wld(ch[r], hs[r] + sb * 2u);                                             \
            h1[r] = wld(ch[r], hs[r] + sb * 2u + 1u);                                        \
            dep ^= W[r].x;                                                                   \
        }                                                                                    \
        uvec4 xa = sq[u * 3u], xb = sq[u * 3u + 1u];                                         \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            int v = iq4_block_q8(W[r], xa, xb);                                              \
            uint a0 = h0[r] ^ (dep & pc.zero), a1 = h1[r] ^ (dep & pc.zero);                 \
            int ls = int(((a1 >> (4u * s)) & 15u) | (((a0 >> (16u + 2u * s)) & 3u) << 4u)) - 32; \
            acc[r] += q8_term(unpackHalf2x16(a0).x, ls * v, 0.0, 0, u);                      \
        }                                                                                    \
    }                                                                                        \
}
DEFINE_IQ4XS_Q8(iq4xs_q8_rows2, 2u)
DEFINE_IQ4XS_Q8(iq4xs_q8_rows4, 4u)

// IQ4_NL: unit = one block (block b of sq; Q4_0's layout, see quant.glsl's dot_iq4_nl);
// term (d · f32(s)) · 2^e, s = Σ kv[n]·x. R rows at once as IQ4_XS's above.
#define DEFINE_IQ4NL_Q8(NAME, R)                                                             \
void NAME(uint ts[R], uint rs[R], uint c0, uint cl, inout float acc[R]) {                    \
    uint nb = cl / 32u, nbt = T(ts[0], T_COLS) / 32u, g0 = c0 / 32u, S = gl_SubgroupSize;   \
    uint ch[R], base[R], sc[R];                                                              \
    [[unroll]] for (uint r = 0u; r < R; ++r) {                                               \
        ch[r] = T(ts[r], T_CHUNK);                                                           \
        base[r] = T(ts[r], T_QS) + rs[r] * T(ts[r], T_ROWW);                                 \
        sc[r] = T(ts[r], T_SC);                                                              \
    }                                                                                        \
    FOR_LANE_UNITS(b, nb, 40u * R) {                                                         \
        uvec4 W[R];                                                                          \
        uint dep = 0u;                                                                       \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            W[r] = wld4(ch[r], base[r] + (g0 + b) * 4u);                                     \
            dep ^= W[r].x;                                                                   \
        }                                                                                    \
        uvec4 xa = sq[b * 3u], xb = sq[b * 3u + 1u];                                         \
        [[unroll]] for (uint r = 0u; r < R; ++r) {                                           \
            int v = iq4_block_q8(W[r], xa, xb);                                              \
            acc[r] += q8_term(qscale_after(ch[r], sc[r], rs[r] * nbt + g0 + b, dep), v, 0.0, 0, b); \
        }                                                                                    \
    }                                                                                        \
}
DEFINE_IQ4NL_Q8(iq4nl_q8_rows2, 2u)
DEFINE_IQ4NL_Q8(iq4nl_q8_rows4, 4u)

// One IQ4 row, two units a lane a trip: units u and u + S (S the subgroup size) of the
// one-unit loops above, both units' loads issued before either's arithmetic and added in the
// one-unit loop's order (u, u + S, u + 2S, ...), so each row's sum is the one-unit loop's bit
// for bit. An IQ4 unit is 16 bytes of quants (Q4_K's and Q6_K's loops hold 32 a lane a trip,
// Q4_0's two blocks). Round 73 (H100): +2.45 % at 8B IQ4_XS q8, +1.73 % at 1B — not the
// +8…+35 % that bytes in flight predicted: not memory-bound (8B IQ4_XS runs as fast on an
// H100 as on the H200), nor issue-bound (round 74's s78, −16 instructions a trip: +0.03 %),
// nor held by the table's bank conflicts (round 75's s80, none: +0.02 %). The scale
// words of both units are unpacked only after both quant words arrive (the qscale_after tie).
// The back-edge count (TICK) is the one-unit loop's, trip for trip (budget.rs models that).
// Unit U (global G, quant words W, header words H0/H1 untied) into acc, as the one-unit loop;
// uses the caller's acc and dep (the header words' tie to the quant words).
#define IQ4XS_Q8_UNIT(W, U, G, H0, H1)                                                       \
    {                                                                                        \
        TICK_N(40u);                                                                         \
        int v = iq4_block_q8(W, sq[(U) * 3u], sq[(U) * 3u + 1u]);                            \
        uint a0 = (H0) ^ dep, a1 = (H1) ^ dep, s = (G) & 7u;                                 \
        int ls = int(((a1 >> (4u * s)) & 15u) | (((a0 >> (16u + 2u * s)) & 3u) << 4u)) - 32; \
        acc += q8_term(unpackHalf2x16(a0).x, ls * v, 0.0, 0, U);                             \
    }
void iq4xs_q8_one(uint t, uint row, uint c0, uint cl, inout float acc) {
    uint nsb = T(t, T_COLS) / 256u, nu = cl / 32u, u0 = c0 / 32u, S = gl_SubgroupSize;
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), hs = T(t, T_SC) + row * nsb * 2u;
    for (uint p0 = 0u, ua = tlane(); p0 < nu; p0 += 2u * S, ua += 2u * S) {
        TICK();
        uint ub = ua + S;
        bool ha = ua < nu, hb = ub < nu;
        uint ga = u0 + ua, gb = u0 + ub;
        uvec4 Wa = ha ? wld4(ch, base + (ga >> 3u) * 32u + (ga & 7u) * 4u) : uvec4(0u);
        uvec4 Wb = hb ? wld4(ch, base + (gb >> 3u) * 32u + (gb & 7u) * 4u) : uvec4(0u);
        uint h0a = ha ? wld(ch, hs + (ga >> 3u) * 2u) : 0u, h1a = ha ? wld(ch, hs + (ga >> 3u) * 2u + 1u) : 0u;
        uint h0b = hb ? wld(ch, hs + (gb >> 3u) * 2u) : 0u, h1b = hb ? wld(ch, hs + (gb >> 3u) * 2u + 1u) : 0u;
        uint dep = (Wa.x ^ Wb.x) & pc.zero;
        if (ha) IQ4XS_Q8_UNIT(Wa, ua, ga, h0a, h1a)
        if (p0 + S < nu) TICK();
        if (hb) IQ4XS_Q8_UNIT(Wb, ub, gb, h0b, h1b)
    }
}
// IQ4_NL's one row the same way (its unit: one block, one scale word; quant.glsl's loop).
#define IQ4NL_Q8_TERM(D, W, B) q8_term(D, iq4_block_q8(W, sq[(B) * 3u], sq[(B) * 3u + 1u]), 0.0, 0, B)
void iq4nl_q8_one(uint t, uint row, uint c0, uint cl, inout float acc) {
    uint nb = cl / 32u, nbt = T(t, T_COLS) / 32u, g0 = c0 / 32u, S = gl_SubgroupSize;
    uint ch = T(t, T_CHUNK), base = T(t, T_QS) + row * T(t, T_ROWW), sc = T(t, T_SC);
    IQ4NL_TWO_UNITS(IQ4NL_Q8_TERM)
}

// quant.glsl's quant_dot in the ACT_Q8 modules. A BF16 matrix has no int8 dot product (the
// host refuses it on this path, as F32 and F16): were one to come here, NaN fails the pass.
float quant_dot_q8(uint ty, uint t, uint row, uint c0, uint cl) {
    uint ts[1] = uint[1](t), rs[1] = uint[1](row);
    float a[1] = float[1](0.0);
    if (IS_TY(ty, TY_Q4_K) || IS_TY(ty, TY_Q5_K)) { q45k_q8_rows1(IS_TY(ty, TY_Q5_K), ts, rs, c0, cl, a); return a[0]; }
    if (IS_TY(ty, TY_Q6_K)) { q6k_q8_rows1(ts, rs, c0, cl, a); return a[0]; }
    if (IS_TY(ty, TY_IQ4_XS)) { iq4xs_q8_one(t, row, c0, cl, a[0]); return a[0]; }
    if (IS_TY(ty, TY_IQ4_NL)) { iq4nl_q8_one(t, row, c0, cl, a[0]); return a[0]; }
    if (IS_TY(ty, TY_Q4_1) || IS_TY(ty, TY_Q5_0) || IS_TY(ty, TY_Q5_1)) return dot_q32_q8(ty, t, row, c0, cl);
    return uintBitsToFloat(0x7FC00000u);
}
#else
#define IN_CAP SX_CAP
#endif

// R rows of one type and column count against the input vector (decode.comp's dot_rows2/4):
// whether this type streams rows together (Q4_K, Q6_K; IQ4_XS and IQ4_NL in the q8 modules
// below 1,024 lanes); if so res[r] is row r's dot product, bit-identical to quant_dot one row
// at a time (the same sequence per row, then subgroupAdd). Round 71 (H100, q8, bitwise):
// the IQ4 rows together +3.08 % at 1B IQ4_XS (512 lanes), −1.31 % at 8B IQ4_XS (1,024 lanes:
// 64 registers, spilling already); Q5_K's (its high-bit words too) −4.35 % at 1B Q5_K_M, so
// Q5_K rows go one at a time.
#ifdef ACT_Q8
#define QROWS_Q4K(R) q45k_q8_rows##R(false, ts, rs, 0u, cl, a)
#define QROWS_Q6K(R) q6k_q8_rows##R(ts, rs, 0u, cl, a)
#define QROWS_IQ4XS(R) iq4xs_q8_rows##R(ts, rs, 0u, cl, a)
#define QROWS_IQ4NL(R) iq4nl_q8_rows##R(ts, rs, 0u, cl, a)
#define QROWS_IQ4 (gl_WorkGroupSize.x < 1024u)
#else
#define QROWS_Q4K(R) q4k_rows##R(ts, rs, 0u, cl, a)
#define QROWS_Q6K(R) q6k_rows##R(ts, rs, 0u, cl, a)
#define QROWS_IQ4XS(R)
#define QROWS_IQ4NL(R)
#define QROWS_IQ4 false
#endif
#define DEFINE_QUANT_ROWS(NAME, R, RN)                                                       \
bool NAME(uint ty, uint ts[R], uint rs[R], out float res[R]) {                               \
    bool iq4 = QROWS_IQ4 && (IS_TY(ty, TY_IQ4_XS) || IS_TY(ty, TY_IQ4_NL));                 \
    if (!IS_TY(ty, TY_Q4_K) && !IS_TY(ty, TY_Q6_K) && !iq4) return false;                   \
    uint cl = T(ts[0], T_COLS);                                                              \
    float a[R];                                                                              \
    [[unroll]] for (uint r = 0u; r < R; ++r) a[r] = 0.0;                                     \
    if (IS_TY(ty, TY_Q4_K)) { QROWS_Q4K(RN); }                                               \
    else if (IS_TY(ty, TY_Q6_K)) { QROWS_Q6K(RN); }                                          \
    else if (IS_TY(ty, TY_IQ4_XS)) { QROWS_IQ4XS(RN); }                                      \
    else { QROWS_IQ4NL(RN); }                                                                \
    [[unroll]] for (uint r = 0u; r < R; ++r) res[r] = subgroupAdd(a[r]);                     \
    return true;                                                                             \
}
DEFINE_QUANT_ROWS(quant_rows2, 2u, 2)
DEFINE_QUANT_ROWS(quant_rows4, 4u, 4)
