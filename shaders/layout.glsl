// layout.glsl — bindings, specialisation constants and the program/state layouts shared by
// every stage body. Every number the host also knows (binding and constant ids, record
// layouts, sync words, fail bits) comes from interface.glsl, which engine/build.rs generates
// from engine/src/vulkan/interface.rs: one table for both languages.

#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_realtime_clock : require
#extension GL_EXT_control_flow_attributes : require
#ifdef KV16
// The KV16 modules (built beside the others) may store the KV cache as f16: 16-bit storage
// only (loads and stores of float16_t, converted to and from f32; no f16 arithmetic), so they
// need storageBuffer16BitAccess. The f32 path runs the modules built without it.
#extension GL_EXT_shader_16bit_storage : require
#endif
#ifdef ACT_Q8
// The ACT_Q8 modules (built beside the others) multiply quantised matrices against the input
// vector quantised to int8 (engine/src/act.rs): packed 4x8-bit integer dot products, so they
// need shaderIntegerDotProduct. The f32 path runs the modules built without it.
#extension GL_EXT_integer_dot_product : require
#endif
#ifdef CPU_MODEL
// CPU devices (lavapipe) get the GLSL450 memory model. Under `#pragma use_vulkan_memory_model`
// glslang marks every access to `shared` and `coherent` memory MakePointerVisible/Available;
// spirv_to_nir turns each into a scoped barrier, and lavapipe (Mesa 22.3 gallivm) compiles
// each as a workgroup barrier: a coroutine suspend of its 8-lane SIMD chunk. A loop whose trip
// count differs between chunks (a team-strided unit loop with units % teams != 0, a lane-0-only
// loop) then suspends some chunks more often than others, barriers stop pairing up, and once
// the first chunk returns llvmpipe stops resuming the rest: they vanish, silently.
// In this model only controlBarrier, memoryBarrier and non-relaxed atomics are suspend points:
// keep those out of loops that run a chunk-dependent number of times.
// QueueFamily scope needs the Vulkan memory model, so scopes are Device here.
#define SCOPE gl_ScopeDevice
#else
// GPUs: the Vulkan memory model, so device-scope coherence of `coherent` buffers is explicit.
#pragma use_vulkan_memory_model
#define SCOPE gl_ScopeQueueFamily
#endif

#include "interface.glsl"

layout(local_size_x_id = SPEC_WG_SIZE) in;
layout(constant_id = SPEC_MEGA) const bool MEGA = true;          // persistent kernel (else one stage per dispatch)
layout(constant_id = SPEC_GRID) const uint G = 1;                // workgroups in the grid
layout(constant_id = SPEC_SX_CAP) const uint SX_CAP = 4096;        // floats of shared input vector
layout(constant_id = SPEC_INSTR) const bool INSTR = false;        // write the telemetry ring
layout(constant_id = SPEC_HAS_CLOCK) const bool HAS_CLOCK = true;     // device clock available (VK_KHR_shader_clock)
layout(constant_id = SPEC_ITER_BUDGET) const uint ITER_BUDGET = 0;      // back-edge budget per invocation (0 = none; CPU devices)
layout(constant_id = SPEC_CPU_PAUSE) const bool CPU_PAUSE = false;    // slow the spin down on CPU devices
layout(constant_id = SPEC_TEST_SLOW_KIND) const uint TEST_SLOW_KIND = 0xFFFFu; // test only: stage kind made slower
layout(constant_id = SPEC_TEST_STALL_WG) const uint TEST_STALL_WG = 0xFFFFFFFFu; // test only: this WG never arrives
layout(constant_id = SPEC_NCHUNK_USED) const uint NCHUNK_USED = 1;     // weight chunks bound
layout(constant_id = SPEC_MAX_WG) const uint MAX_WG = 1024;       // upper bound of the workgroup size (array sizes)
layout(constant_id = SPEC_MAT_TY) const uint MAT_TY = 0xFFFFu;    // the one type of every matrix, or 0xFFFF (read per tensor)
layout(constant_id = SPEC_ROWS) const uint ROWS = 1;             // weight rows a team streams at once (1, 2, 4)
layout(constant_id = SPEC_KV_F16) const bool KV_F16 = false;    // KV cache stored as f16 (KV16 modules only)
layout(constant_id = SPEC_HEAD_SIZE) const uint HEAD_SIZE = 64;  // the program's head size (H_HEAD_SIZE)
layout(constant_id = SPEC_SQ_CAP) const uint SQ_CAP = 32;       // elements of the int8 input vector (ACT_Q8 modules)
layout(constant_id = SPEC_TYPES) const uint TYPES = 0xFFFFFFFFu; // bit id: the program has a tensor of ggml type id
layout(constant_id = SPEC_PREFETCH_MIB) const uint PREFETCH_MIB = 0u; // megakernel: MiB of the weights after an attention level its idle workgroups pull into L2 (0: none)
layout(constant_id = SPEC_PREFETCH_SKEW) const uint PREFETCH_SKEW = 0u; // megakernel: read ahead the stream this many attention levels later (a control; 0: the next levels)
layout(constant_id = SPEC_SYNC_STRIDE) const uint SYNC_STRIDE = 0u; // words of one chain slot's sync words (the next slot's follow)
#ifdef PASS_LOOP
layout(constant_id = SPEC_OUT_STRIDE) const uint OUT_STRIDE = 0u;   // words of one chain slot's output words (vocab + 2 + 2G)
#endif
layout(constant_id = SPEC_ATT_FULL) const bool ATT_FULL = false;   // every attention head group has ATT_HEADS query heads
layout(constant_id = SPEC_ATT_PRO) const bool ATT_PRO = false;     // the output projection's prologue combines up to ATT_PRO_CHUNKS chunks
// How many quantised types the program holds: each is one more copy of the dot loops at every
// inlined site (decode.comp's choice of the one-site loop). A sum of bits, so it folds as a
// specialisation constant.
const uint N_QTYPES = ((TYPES >> TY_Q4_0) & 1u) + ((TYPES >> TY_Q4_1) & 1u) + ((TYPES >> TY_Q5_0) & 1u)
    + ((TYPES >> TY_Q5_1) & 1u) + ((TYPES >> TY_Q8_0) & 1u) + ((TYPES >> TY_Q4_K) & 1u)
    + ((TYPES >> TY_Q5_K) & 1u) + ((TYPES >> TY_Q6_K) & 1u) + ((TYPES >> TY_IQ4_NL) & 1u)
    + ((TYPES >> TY_IQ4_XS) & 1u);
// ty is type X and the program has tensors of type X (a constant test first: folds away).
#define IS_TY(ty, X) (((TYPES >> (X)) & 1u) != 0u && (ty) == (X))

#define NCHUNK 8
layout(set = 0, binding = B_WEIGHTS) readonly buffer Weights { uint w[]; } weights[NCHUNK];
// The same buffers seen as 16-byte vectors: one load per Q4_0 block, two per Q8_0 block.
layout(set = 0, binding = B_WEIGHTS) readonly buffer Weights4 { uvec4 w4[]; } weights4[NCHUNK];
layout(set = 0, binding = B_STATE) coherent buffer State { float s[]; } st;
layout(set = 0, binding = B_KV) coherent buffer Kv { float kv[]; } kvc;      // keys
layout(set = 0, binding = B_KV_V) coherent buffer KvV { float kv[]; } kvv;   // values
// The same two buffers as 16-byte vectors: elements 4k..4k+3 of an f32 cache in one load (the
// attention's wide loads; a head size that is a multiple of 4 keeps every row's quads aligned).
layout(set = 0, binding = B_KV) coherent buffer Kv4 { vec4 kv[]; } kvc4;
layout(set = 0, binding = B_KV_V) coherent buffer KvV4 { vec4 kv[]; } kvv4;
#ifdef KV16
// The same two buffers as f16 elements (KV_F16): element o of the cache at byte 2·o.
layout(set = 0, binding = B_KV) coherent buffer Kv16 { float16_t kv[]; } kvc16;
layout(set = 0, binding = B_KV_V) coherent buffer KvV16 { float16_t kv[]; } kvv16;
// And as pairs of words: elements 4k..4k+3 of an f16 cache (8 bytes) in one load, widened with
// unpackHalf2x16 (no 16-bit types involved, but only the KV16 modules read an f16 cache).
layout(set = 0, binding = B_KV) coherent buffer Kv16x4 { uvec2 kv[]; } kvc16x4;
layout(set = 0, binding = B_KV_V) coherent buffer KvV16x4 { uvec2 kv[]; } kvv16x4;
#endif
// The state as 16-byte vectors: the q8 path quantises four consecutive floats per lane, and
// the output projection's prologue combines the attention's chunk records a quad at a time
// (H_OFF_HB, H_OFF_ATTP and H_OFF_ATTO are multiples of 4 floats).
layout(set = 0, binding = B_STATE) coherent buffer State4 { vec4 s[]; } st4;
layout(set = 0, binding = B_OUT) coherent buffer Out { uint o[]; } outb;
layout(set = 0, binding = B_SYNC) coherent buffer Sync { uint w[]; } sy;
layout(set = 0, binding = B_PROG) readonly buffer Prog { uint p[]; } prog;
layout(set = 0, binding = B_RING) coherent buffer Ring { uint r[]; } ring;

layout(push_constant) uniform Push {
    uint token;
    uint pos;
    uint level;     // multi: the level to run
    uint stage;     // multi: the stage to run
    uint pass_id;   // pass number (residency stamps, ring slot)
    uint timeout;   // spin timeout in device-clock ticks
    uint ring_slot; // chain slot of the (first) pass: its ring frame (PASS_LOOP: and its sync and output words)
    uint flags;
    uint npasses;   // megakernel: chained passes this dispatch runs (PASS_LOOP modules; 0 is 1)
    uint zero;      // always 0: a zero the compiler cannot fold (decode.comp's qscale_after)
} pc;

// ---- program layout, stage kinds, tensor types, sync words, kernel fail bits ----
// All in interface.glsl, generated from engine/src/vulkan/interface.rs (H_*, L_*, PRO_*, S_*,
// K_*, T_*, TY_*, SY_*, FAIL_*). Records: level L_WORDS, stage S_WORDS, tensor T_WORDS words.

// ---- out buffer ----
// o[0 .. vocab): logits (float bits); o[vocab], o[vocab+1]: argmax index, value bits;
// o[vocab+2 .. vocab+2+2G): per-workgroup argmax partials.

uint P(uint i) { return prog.p[i]; }
