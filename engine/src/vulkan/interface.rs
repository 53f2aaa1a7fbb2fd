//! The host ↔ shader interface, in one table: descriptor bindings, specialisation-constant
//! ids, the program buffer's header and record layouts, stage kinds, tensor types and the sync
//! words. `build.rs` includes this file and generates `interface.glsl` from [`GLSL`] (every
//! constant as `#define PREFIX_NAME value`), which `shaders/layout.glsl` includes: the two
//! languages read the same numbers and cannot drift. The kernel's fail-word bits are here too;
//! a test holds them equal to the telemetry crate's (`baro_telemetry::fail::bits`).
//!
//! This file is also compiled by `build.rs`, so it uses nothing outside `core`.

/// Defines one module of constants per group and the [`GLSL`] table listing them all.
macro_rules! interface {
    ($(
        $(#[doc = $gdoc:literal])*
        mod $m:ident: $ty:ty = ($prefix:literal, $suffix:literal) {
            $( $(#[doc = $doc:literal])* $name:ident = $val:literal, )*
        }
    )*) => {
        $(
            $(#[doc = $gdoc])*
            pub mod $m {
                $( $(#[doc = $doc])* pub const $name: $ty = $val; )*
            }
        )*
        /// Every group as (GLSL prefix, literal suffix, [(name, value)]), for the generator.
        pub const GLSL: &[(&str, &str, &[(&str, u32)])] = &[
            $( ($prefix, $suffix, &[ $( (stringify!($name), $val), )* ]), )*
        ];
    };
}

interface! {
    /// Descriptor bindings of set 0 (`B_*`).
    mod binding: u32 = ("B_", "") {
        /// Weight chunks (an array of `NCHUNK` storage buffers, also seen as `uvec4`).
        WEIGHTS = 0,
        /// Activations and scratch (`st.s`).
        STATE = 1,
        /// The key cache.
        KV = 2,
        /// Logits, argmax and per-workgroup argmax partials.
        OUT = 3,
        /// The sync words (barrier counter, fail word, residency).
        SYNC = 4,
        /// The program (header, levels, stages, tensors).
        PROG = 5,
        /// The telemetry event ring.
        RING = 6,
        /// The value cache (its own buffer: each cache must fit one storage-buffer range,
        /// 4 GiB on NVIDIA, which an 8B model's f32 keys and values at 16k positions fill).
        KV_V = 7,
    }

    /// Specialisation-constant ids (`SPEC_*`).
    mod spec: u32 = ("SPEC_", "") {
        /// Workgroup size (local_size_x).
        WG_SIZE = 0,
        /// Persistent megakernel (else one stage per dispatch).
        MEGA = 1,
        /// Workgroups in the grid.
        GRID = 2,
        /// Floats of the shared input vector.
        SX_CAP = 3,
        /// Write the telemetry ring.
        INSTR = 4,
        /// The device clock exists (VK_KHR_shader_clock).
        HAS_CLOCK = 5,
        /// Back-edge budget per invocation (0 = none; CPU devices).
        ITER_BUDGET = 6,
        /// Pace barrier polls on CPU devices.
        CPU_PAUSE = 7,
        /// Test only: this stage kind does extra work.
        TEST_SLOW_KIND = 8,
        /// Test only: this workgroup never arrives.
        TEST_STALL_WG = 9,
        /// Weight chunks bound.
        NCHUNK_USED = 10,
        /// Upper bound of the workgroup size (array sizes).
        MAX_WG = 11,
        /// The one type of every matrix, or 0xFFFF (read per tensor).
        MAT_TY = 12,
        /// Weight rows a team streams at once in the matvec stages (1, 2 or 4).
        ROWS = 13,
        /// The KV cache stores keys and values as f16 (only in the module built with
        /// 16-bit storage; the f32 path runs the module without it).
        KV_F16 = 14,
        /// The head size: the attention's quad count, lanes per key row and loop trip counts
        /// fold at pipeline creation, and a head size that is a multiple of 4 drops the
        /// scalar fallback.
        HEAD_SIZE = 15,
        /// Elements of the shared int8 input vector (only in the modules built with the q8
        /// activation path).
        SQ_CAP = 16,
        /// The tensor types the program has, bit `id` for ggml type `id`: the type branches of
        /// the others fold away (a lavapipe pipeline of every type inlined at every matvec
        /// site takes minutes to compile).
        TYPES = 17,
        /// Megakernel: MiB of the weights after an attention level that its idle workgroups
        /// read ahead into L2 between their arrival and their wait (0: none;
        /// [`DecoderOptions::prefetch_mib`](crate::vulkan::DecoderOptions::prefetch_mib)).
        PREFETCH_MIB = 18,
        /// Megakernel: read ahead the stream this many attention levels later instead (a
        /// control: [`DecoderOptions::prefetch_skew`](crate::vulkan::DecoderOptions::prefetch_skew)).
        PREFETCH_SKEW = 19,
        /// Words between two chain slots' sync words in the sync buffer
        /// ([`program::sync_buffer_words`](crate::vulkan::program::sync_buffer_words), rounded
        /// up to the descriptor offset alignment): slot `s`'s begin at `s` times this. Every
        /// module writes the next slot's token word at this offset from its own; the pass
        /// loop's modules also find a pass's slot with it (a constant: a slot's base is then
        /// uniform arithmetic rather than a loaded value held in a register).
        SYNC_STRIDE = 20,
        /// Words between two chain slots' output words: vocab + 2 + 2 × grid, rounded up as
        /// `SYNC_STRIDE` is (the pass loop's modules only).
        OUT_STRIDE = 21,
        /// Every attention head group has `att::HEADS` query heads (the query heads per KV
        /// head are a multiple of it): the attention unit's per-head guards fold at pipeline
        /// creation (round 50: its loops are bound by instruction issue).
        ATT_FULL = 22,
        /// The output projection's prologue combines the attention's chunks, up to
        /// `att::PRO_CHUNKS` of them ([`DecoderOptions::att_prologue_combine`](crate::vulkan::DecoderOptions::att_prologue_combine)).
        ATT_PRO = 23,
        /// How many there are.
        COUNT = 24,
    }

    /// Program header word indices (`H_*`).
    mod h: usize = ("H_", "") {
        /// Levels.
        N_LEVELS = 0,
        /// Stages.
        N_STAGES = 1,
        /// Tensors.
        N_TENSORS = 2,
        /// Model dimension.
        DIM = 3,
        /// FFN hidden dimension.
        HIDDEN = 4,
        /// Query heads.
        N_HEADS = 5,
        /// KV heads.
        N_KV_HEADS = 6,
        /// Head size.
        HEAD_SIZE = 7,
        /// Vocabulary.
        VOCAB = 8,
        /// Positions in the KV cache.
        MAX_SEQ = 9,
        /// State offset of x (the residual stream).
        OFF_X = 10,
        /// Query width and attention output width (n_heads · head_size).
        Q_DIM = 11,
        /// State offset of q (Q_DIM floats; with per-head q/k norms followed by the keys'
        /// raw rows, KV_DIM floats).
        OFF_Q = 12,
        /// State offset of hb (the FFN activation).
        OFF_HB = 13,
        /// State offset of the attention scores.
        OFF_ATT = 14,
        /// State offset of the RoPE table.
        OFF_ROPE = 15,
        /// KV floats per layer.
        KV_LAYER = 16,
        /// RoPE pairing (`ROPE_*` flags).
        ROPE = 17,
        /// The embedding tensor's index.
        EMBED = 18,
        /// RMSNorm epsilon (f32 bits).
        EPS = 19,
        /// √head_size (f32 bits).
        ATT_SCALE = 20,
        /// Word offset of the level records.
        LEVELS = 21,
        /// Word offset of the stage records.
        STAGES = 22,
        /// Word offset of the tensor records.
        TENSORS = 23,
        /// KV dimension.
        KV_DIM = 24,
        /// State offset of the chunked down-projection accumulator.
        OFF_ACC = 25,
        /// Layers.
        N_LAYERS = 26,
        /// Ring words per frame.
        RING_FRAME_WORDS = 27,
        /// Ring frame slots.
        RING_SLOTS = 28,
        /// State offset of the attention's per-chunk partials, 16-byte aligned (heads x
        /// `att::CHUNKS` records: the chunk's unnormalised output, head_size floats, its max
        /// and its sum; with spec `ATT_PRO` the outputs in rows of head_size floats and the
        /// (max, sum) pairs behind all of them, so that the prologue reads quads).
        OFF_ATTP = 29,
        /// State offset of the attention output (q_dim floats: every head's chunks combined,
        /// written by the attention level past `att::PRO_CHUNKS` chunks, loaded by the output
        /// projection's prologue).
        OFF_ATTO = 30,
        /// The tensor index of layer 0's per-head query norm weight (qwen3; layer l's query
        /// norm at QK_NORM + 2l, its key norm at QK_NORM + 2l + 1), 0 without q/k norms: the
        /// Q and K stages' units are then whole heads.
        QK_NORM = 31,
        /// Megakernel: ns of the device clock that a workgroup without a unit in an attention
        /// level waits after arriving at that level's barrier before its first poll (0: none;
        /// [`DecoderOptions::idle_wait_ns`](crate::vulkan::DecoderOptions::idle_wait_ns)). A
        /// header word, not a specialisation constant: the wait's block must stay in the
        /// kernel at every value (bench/rounds/45.md: the compile mode).
        IDLE_WAIT_NS = 32,
        /// Header words.
        WORDS = 33,
    }

    /// RoPE flags (`ROPE_*`, header word `H_ROPE`).
    mod rope: u32 = ("ROPE_", "u") {
        /// NEOX pairing: element i of a head with element i + head_size/2 (else adjacent
        /// pairs 2i, 2i+1).
        NEOX = 1,
    }

    /// Attention units (`ATT_*`): compile-time constants of the shader (register arrays).
    /// A unit is (head group, position chunk): a head group is up to `HEADS` query heads of
    /// one KV head, so a unit loads each key and value of its chunk once for all of them.
    mod att: u32 = ("ATT_", "u") {
        /// The most position chunks a head group's attention is split into (one workgroup
        /// each). An 8-KV-head model (Llama 3 1B/8B: 32 query heads, 4 per KV head) has 8
        /// head groups: 128 units, one wave on a 132-SM H200.
        CHUNKS = 16,
        /// Positions per chunk at least: up to this many positions a head group is one chunk,
        /// so short contexts do not pay for parallelism they cannot use.
        CHUNK_MIN = 64,
        /// Query heads a unit serves at most (models with more query heads per KV head split
        /// them into several head groups, each loading the KV head's keys and values).
        HEADS = 4,
        /// Chunks that the next level's prologue combines where it does (spec `ATT_PRO`): up
        /// to this many, every workgroup of the output projection merges the chunks' partial
        /// records as it loads its input (the units only store them); past it, each head
        /// group's last-arriving unit merges them once and the prologue loads the result. The
        /// same arithmetic either way.
        PRO_CHUNKS = 4,
    }

    /// Level record fields (`L_*`), `L_WORDS` words per level.
    mod l: usize = ("L_", "") {
        /// First stage.
        FIRST = 0,
        /// Stages in the level.
        COUNT = 1,
        /// Prologue (`PRO_*`).
        PRO = 2,
        /// The prologue's norm weight tensor.
        PRO_T = 3,
        /// Bit 0: the input is the token embedding; bit 1: a single-workgroup level.
        FLAGS = 4,
        /// Words per record.
        WORDS = 8,
    }

    /// Level prologues (`PRO_*`).
    mod pro: u32 = ("PRO_", "u") {
        /// None.
        NONE = 0,
        /// RMSNorm of x (or the embedding) into the shared vector.
        NORM = 1,
        /// Load the attention output (the attention level combined every head's chunks).
        ATT = 2,
        /// Load hb.
        HB = 3,
    }

    /// Stage record fields (`S_*`), `S_WORDS` words per stage.
    mod s: usize = ("S_", "") {
        /// Kind (`K_*`).
        KIND = 0,
        /// Layer.
        LAYER = 1,
        /// Work units.
        UNITS = 2,
        /// Unit offset within the level (rotates the workgroup-granular stages: attention,
        /// argmax; row-granular stages use `WGS`).
        OFF = 3,
        /// First tensor.
        T0 = 4,
        /// Second tensor (FFN up).
        T1 = 5,
        /// Level.
        LEVEL = 6,
        /// A row-granular stage's workgroups in the megakernel: first | count << 16. A level's
        /// stages share the grid in proportion to their weight bytes, each with at least one
        /// round's workgroups where the level's needs fit (`Program::stage_shares`).
        WGS = 7,
        /// Words per record.
        WORDS = 8,
    }

    /// Stage kinds (`K_*`); the telemetry crate's `StageKind::code` uses the same numbers.
    mod k: u32 = ("K_", "u") {
        /// Query rows with RoPE.
        Q = 0,
        /// Key rows with RoPE.
        K = 1,
        /// Value rows.
        V = 2,
        /// Attention.
        ATTN = 3,
        /// Output projection plus residual.
        WO = 4,
        /// FFN gate and up.
        FFN = 5,
        /// FFN down plus residual.
        DOWN = 6,
        /// Classifier.
        HEAD = 7,
        /// Final argmax.
        ARGMAX = 8,
    }

    /// Tensor record fields (`T_*`), `T_WORDS` words per tensor.
    mod t: usize = ("T_", "") {
        /// Type (`TY_*`, ggml type id).
        TYPE = 0,
        /// Rows.
        ROWS = 1,
        /// Columns.
        COLS = 2,
        /// Weight chunk (binding array index).
        CHUNK = 3,
        /// Word offset of the quants (or values).
        QS = 4,
        /// Word offset of the block scales.
        SC = 5,
        /// Words per row.
        ROWW = 6,
        /// Word offset of a type's second header stream (Q6_K's d, the fifth bits of the Q5
        /// types; `program::repack`).
        X = 7,
        /// Words per record.
        WORDS = 8,
    }

    /// Tensor types (`TY_*`, ggml's type ids).
    mod ty: u32 = ("TY_", "u") {
        /// f32.
        F32 = 0,
        /// f16.
        F16 = 1,
        /// Q4_0.
        Q4_0 = 2,
        /// Q4_1.
        Q4_1 = 3,
        /// Q5_0.
        Q5_0 = 6,
        /// Q5_1.
        Q5_1 = 7,
        /// Q8_0.
        Q8_0 = 8,
        /// Q4_K.
        Q4_K = 12,
        /// Q5_K.
        Q5_K = 13,
        /// Q6_K.
        Q6_K = 14,
        /// IQ4_NL.
        IQ4_NL = 20,
        /// IQ4_XS.
        IQ4_XS = 23,
        /// BF16.
        BF16 = 30,
    }

    /// Sync word indices (`SY_*`).
    mod sy: usize = ("SY_", "") {
        /// Grid-barrier arrival counter (cumulative over levels).
        COUNTER = 0,
        /// The fail word.
        FAIL = 1,
        /// First failing level (u32::MAX: none).
        FAIL_LEVEL = 2,
        /// What the first failure saw (meaning by `FAIL_FIRST`).
        FAIL_SEEN = 3,
        /// First failing workgroup.
        FAIL_WG = 4,
        /// Abort flag.
        ABORT = 5,
        /// Workgroups started.
        STARTED = 6,
        /// The bit of the first failure.
        FAIL_FIRST = 7,
        /// Two words: the clock sample of a calibration dispatch.
        CALIB = 8,
        /// A chained pass's input token (push flag 2): the previous pass's argmax, which its
        /// kernel writes into the next slot's token word beside its own argmax (a
        /// submission's first pass: copied here on the GPU from the previous submission's
        /// last argmax). Every slot's but the first is reset to u32::MAX (outside every
        /// vocabulary) before a submission; the first's holds that copy, read only with flag 2.
        TOKEN = 10,
        /// 32-byte weight sectors the idle workgroups of the attention levels read ahead this
        /// pass (`PREFETCH_MIB`; 0 without it).
        PREFETCHED = 11,
        /// Two words: the device clock when workgroup 0 was done with this pass (its argmax,
        /// then the grid barrier that ends every pass of the loop but the last), on every pass
        /// of a dispatch's pass loop (more than one pass; with the device clock).
        PASS_END = 12,
        /// G words: pass_id + 1 when the workgroup started; then one word per attention
        /// head group: its position chunks finished so far this pass (cumulative over layers;
        /// the layer's last arrival combines the chunks). The residency words are read back,
        /// the counters are not.
        RESIDENT = 16,
    }

    /// Fail-word bits the kernel raises (`FAIL_*`; equal to `baro_telemetry::fail::bits`).
    mod fail: u32 = ("FAIL_", "u") {
        /// A grid-barrier spin timed out.
        TIMEOUT = 1,
        /// The back-edge budget ran out.
        BUDGET = 2,
        /// A workgroup started after the first barrier released.
        LATE = 4,
        /// A logit came out NaN or infinite.
        NON_FINITE = 8,
        /// A chained pass's input token was outside the vocabulary.
        BAD_TOKEN = 16,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernel_fail_bits_equal_the_telemetry_crates() {
        use baro_telemetry::fail::bits;
        assert_eq!(super::fail::TIMEOUT, bits::TIMEOUT);
        assert_eq!(super::fail::BUDGET, bits::BUDGET);
        assert_eq!(super::fail::LATE, bits::LATE);
        assert_eq!(super::fail::NON_FINITE, bits::NON_FINITE);
        assert_eq!(super::fail::BAD_TOKEN, bits::BAD_TOKEN);
    }

    #[test]
    fn stage_kind_codes_equal_the_telemetry_kinds() {
        use baro_telemetry::StageKind as T;
        let table = [
            (super::k::Q, T::Q),
            (super::k::K, T::K),
            (super::k::V, T::V),
            (super::k::ATTN, T::Attn),
            (super::k::WO, T::Wo),
            (super::k::FFN, T::Ffn),
            (super::k::DOWN, T::Down),
            (super::k::HEAD, T::Head),
            (super::k::ARGMAX, T::Argmax),
        ];
        for (k, t) in table {
            assert_eq!(k, t.code());
            assert_eq!(T::from_code(k), Some(t));
        }
    }

    #[test]
    fn no_two_constants_of_a_group_share_a_name_and_glsl_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for (prefix, _, items) in super::GLSL {
            for (name, _) in *items {
                assert!(
                    seen.insert(format!("{prefix}{name}")),
                    "{prefix}{name} twice"
                );
            }
        }
    }
}
