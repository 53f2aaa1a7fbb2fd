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
#define IN_CAP SQ_CAP
#define QA_SX 0u     // quant_act's sources: the raw vector in sx,
#define QA_NORM 1u   // sx normalised on the way (scale * sx[j] * norm weight j),
#define QA_STATE 2u  // or state words from `off`

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
#else
#define IN_CAP SX_CAP
#endif
