// layout.glsl — bindings, specialisation constants and the program/state layouts shared by
// every stage body. The host side of these layouts is engine/src/vulkan/program.rs; the two
// must change together (the word indices are named the same there).

#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_realtime_clock : require
#extension GL_EXT_control_flow_attributes : require
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

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool MEGA = true;          // persistent kernel (else one stage per dispatch)
layout(constant_id = 2) const uint G = 1;                // workgroups in the grid
layout(constant_id = 3) const uint SX_CAP = 4096;        // floats of shared input vector
layout(constant_id = 4) const bool INSTR = false;        // write the telemetry ring
layout(constant_id = 5) const bool HAS_CLOCK = true;     // device clock available (VK_KHR_shader_clock)
layout(constant_id = 6) const uint ITER_BUDGET = 0;      // back-edge budget per invocation (0 = none; CPU devices)
layout(constant_id = 7) const bool CPU_PAUSE = false;    // slow the spin down on CPU devices
layout(constant_id = 8) const uint TEST_SLOW_KIND = 0xFFFFu; // test only: stage kind made slower
layout(constant_id = 9) const uint TEST_STALL_WG = 0xFFFFFFFFu; // test only: this WG never arrives
layout(constant_id = 10) const uint NCHUNK_USED = 1;     // weight chunks bound
layout(constant_id = 11) const uint MAX_WG = 1024;       // upper bound of the workgroup size (array sizes)
layout(constant_id = 12) const uint MAT_TY = 0xFFFFu;    // the one type of every matrix, or 0xFFFF (read per tensor)

#define NCHUNK 8
layout(set = 0, binding = 0) readonly buffer Weights { uint w[]; } weights[NCHUNK];
// The same buffers seen as 16-byte vectors: one load per Q4_0 block, two per Q8_0 block.
layout(set = 0, binding = 0) readonly buffer Weights4 { uvec4 w4[]; } weights4[NCHUNK];
layout(set = 0, binding = 1) coherent buffer State { float s[]; } st;
layout(set = 0, binding = 2) coherent buffer Kv { float kv[]; } kvc;
layout(set = 0, binding = 3) coherent buffer Out { uint o[]; } outb;
layout(set = 0, binding = 4) coherent buffer Sync { uint w[]; } sy;
layout(set = 0, binding = 5) readonly buffer Prog { uint p[]; } prog;
layout(set = 0, binding = 6) coherent buffer Ring { uint r[]; } ring;

layout(push_constant) uniform Push {
    uint token;
    uint pos;
    uint level;     // multi: the level to run
    uint stage;     // multi: the stage to run
    uint pass_id;   // pass number (residency stamps, ring slot)
    uint timeout;   // spin timeout in device-clock ticks
    uint ring_slot; // frame slot in the ring
    uint flags;
} pc;

// ---- program header (word indices; mirrored in program.rs) ----
#define H_N_LEVELS 0
#define H_N_STAGES 1
#define H_DIM 3
#define H_HIDDEN 4
#define H_N_HEADS 5
#define H_N_KV_HEADS 6
#define H_HEAD_SIZE 7
#define H_VOCAB 8
#define H_MAX_SEQ 9
#define H_OFF_X 10
#define H_OFF_XB 11
#define H_OFF_Q 12
#define H_OFF_HB 13
#define H_OFF_ATT 14
#define H_OFF_ROPE 15
#define H_KV_LAYER 16
#define H_V_BASE 17
#define H_EMBED 18
#define H_EPS 19
#define H_ATT_SCALE 20
#define H_LEVELS 21
#define H_STAGES 22
#define H_TENSORS 23
#define H_KV_DIM 24
#define H_OFF_ACC 25
#define H_N_LAYERS 26
#define H_RING_FRAME_WORDS 27
#define H_RING_SLOTS 28

// level record: 8 words
#define L_FIRST 0
#define L_COUNT 1
#define L_PRO 2       // prologue: 0 none, 1 norm, 2 load xb, 3 load hb
#define L_PRO_T 3     // norm weight tensor
#define L_FLAGS 4     // bit0: input is the token embedding; bit1: single-workgroup level
#define PRO_NONE 0u
#define PRO_NORM 1u
#define PRO_XB 2u
#define PRO_HB 3u

// stage record: 8 words
#define S_KIND 0
#define S_LAYER 1
#define S_UNITS 2
#define S_OFF 3
#define S_T0 4
#define S_T1 5
#define S_LEVEL 6
#define K_Q 0u
#define K_K 1u
#define K_V 2u
#define K_ATTN 3u
#define K_WO 4u
#define K_FFN 5u
#define K_DOWN 6u
#define K_HEAD 7u
#define K_ARGMAX 8u

// tensor record: 8 words
#define T_TYPE 0
#define T_ROWS 1
#define T_COLS 2
#define T_CHUNK 3
#define T_QS 4
#define T_SC 5
#define T_ROWW 6
#define TY_F32 0u
#define TY_F16 1u
#define TY_Q4_0 2u
#define TY_Q8_0 8u

// ---- sync words (mirrored in decoder.rs) ----
#define SY_COUNTER 0
#define SY_FAIL 1
#define SY_FAIL_LEVEL 2
#define SY_FAIL_SEEN 3
#define SY_FAIL_WG 4
#define SY_ABORT 5
#define SY_STARTED 6
#define SY_FAIL_FIRST 7  // the bit of the first failure (whose level/seen/wg are recorded)
#define SY_CALIB 8     // 2 words: clock sample of a calibration dispatch
#define SY_RESIDENT 16   // G words: pass_id + 1 when the workgroup started

#define FAIL_TIMEOUT 1u
#define FAIL_BUDGET 2u
#define FAIL_LATE 4u
#define FAIL_NONFINITE 8u   // a logit came out NaN or infinite (the head saw a non-finite input or weight)

// ---- out buffer ----
// o[0 .. vocab): logits (float bits); o[vocab], o[vocab+1]: argmax index, value bits;
// o[vocab+2 .. vocab+2+2G): per-workgroup argmax partials.

uint P(uint i) { return prog.p[i]; }
