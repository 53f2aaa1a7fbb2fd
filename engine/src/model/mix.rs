//! Which ggml type each matrix of a model gets when baro-top writes one: one type for every
//! matrix ([`Quant::Uniform`], as `llama-quantize --pure`), or one of llama-quantize's K-quant
//! mixes ([`KMix`]: `Q4_K_M` and friends, the files people download), chosen tensor by tensor
//! by llama-quantize's own rules for the llama-family architectures baro-top implements, so a
//! `model gen --quant q4_k_m` file has the types (and, with ggml's reference quantisers, the
//! bytes) llama-quantize writes from the same F32 values.
//!
//! The rules (llama.cpp's `llama_tensor_get_type`, no importance matrix, no experts):
//! - the classifier (`output.weight`, or `token_embd.weight` when the classifier is tied to it)
//!   is Q6_K — Q8_0 where its rows are not whole super-blocks;
//! - `attn_v` of layer i: Q6_K in `Q4_K_M`/`Q5_K_M` where [`more_bits`]`(i)`; Q5_K in `Q4_K_S`
//!   for i < 4; then Q5_K where the result is Q4_K and the model is a "70B" (80 layers: a llama
//!   with grouped-query attention, or any qwen2);
//! - `ffn_down` of layer i: Q6_K in `Q4_K_M`/`Q5_K_M` where [`more_bits`]`(i)`; Q5_K in
//!   `Q4_K_S` for i < n/8;
//! - `IQ4_XS` and `IQ4_NL`: `attn_v` Q5_K where a KV head serves 4 or more query heads,
//!   `ffn_down` Q5_K in the first n/8 layers;
//! - every other matrix (an untied `token_embd` included) the mix's base type;
//! - a matrix whose rows are not whole blocks of its type falls back: Q4_K → Q5_0, Q5_K → Q5_1,
//!   Q6_K → Q8_0, IQ4_XS → IQ4_NL, and to F16 where even that does not fit (rows not whole
//!   32-blocks; the 32-block types Q8_0 and IQ4_NL go to F16 directly).

use super::types::{Arch, Config};
use crate::quant::GgmlType;
use crate::{Error, Result};

/// One of llama-quantize's K-quant mixes (its `LLAMA_FTYPE_MOSTLY_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KMix {
    /// `Q4_K_S`: Q4_K, more bits for the first layers' `attn_v` and `ffn_down`.
    Q4KS,
    /// `Q4_K_M`: Q4_K, Q6_K for half the layers' `attn_v` and `ffn_down` (the usual download).
    Q4KM,
    /// `Q5_K_S`: Q5_K throughout (the classifier Q6_K).
    Q5KS,
    /// `Q5_K_M`: Q5_K, Q6_K for half the layers' `attn_v` and `ffn_down`.
    Q5KM,
    /// `Q6_K`: Q6_K throughout.
    Q6K,
    /// `IQ4_XS`: IQ4_XS, Q5_K for some `attn_v` and `ffn_down`, the classifier Q6_K.
    IQ4XS,
    /// `IQ4_NL`: IQ4_NL (IQ4_XS's 32-element sibling), Q5_K for some `attn_v` and `ffn_down`,
    /// the classifier Q6_K.
    IQ4NL,
}

/// How a model's matrices are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quant {
    /// Every matrix one type (norms and other vectors stay F32).
    Uniform(GgmlType),
    /// llama-quantize's mix, tensor by tensor.
    Mix(KMix),
}

impl From<GgmlType> for Quant {
    fn from(t: GgmlType) -> Self {
        Quant::Uniform(t)
    }
}

/// What a matrix is, as far as the mixes care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    TokenEmbd,
    Output,
    AttnQ,
    AttnK,
    AttnV,
    AttnOutput,
    FfnGate,
    FfnUp,
    FfnDown,
}

impl Role {
    /// The tensor's GGUF name in layer `layer`.
    pub fn tensor_name(self, layer: usize) -> String {
        let in_layer = |s: &str| format!("blk.{layer}.{s}.weight");
        match self {
            Role::TokenEmbd => "token_embd.weight".into(),
            Role::Output => "output.weight".into(),
            Role::AttnQ => in_layer("attn_q"),
            Role::AttnK => in_layer("attn_k"),
            Role::AttnV => in_layer("attn_v"),
            Role::AttnOutput => in_layer("attn_output"),
            Role::FfnGate => in_layer("ffn_gate"),
            Role::FfnUp => in_layer("ffn_up"),
            Role::FfnDown => in_layer("ffn_down"),
        }
    }
}

/// llama-quantize's `use_more_bits(i, n)`: the first and last eighth of the layers and every
/// third layer between.
pub fn more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

impl KMix {
    const ALL: [KMix; 7] = [
        KMix::Q4KS,
        KMix::Q4KM,
        KMix::Q5KS,
        KMix::Q5KM,
        KMix::Q6K,
        KMix::IQ4XS,
        KMix::IQ4NL,
    ];

    /// The command-line name (`q4_k_m`).
    pub fn name(self) -> &'static str {
        match self {
            KMix::Q4KS => "q4_k_s",
            KMix::Q4KM => "q4_k_m",
            KMix::Q5KS => "q5_k_s",
            KMix::Q5KM => "q5_k_m",
            KMix::Q6K => "q6_k",
            KMix::IQ4XS => "iq4_xs",
            KMix::IQ4NL => "iq4_nl",
        }
    }

    /// The type of every matrix the rules do not single out.
    pub fn base(self) -> GgmlType {
        match self {
            KMix::Q4KS | KMix::Q4KM => GgmlType::Q4_K,
            KMix::Q5KS | KMix::Q5KM => GgmlType::Q5_K,
            KMix::Q6K => GgmlType::Q6_K,
            KMix::IQ4XS => GgmlType::IQ4_XS,
            KMix::IQ4NL => GgmlType::IQ4_NL,
        }
    }
}

impl Quant {
    /// Parse a `--quant` value: a type (every matrix that type) or one of llama-quantize's
    /// mixes (`q4_k_s|q4_k_m|q5_k_s|q5_k_m|q6_k|iq4_xs|iq4_nl`). `q6_k`, `iq4_xs` and `iq4_nl`
    /// are the mixes (what llama-quantize makes of them: the classifier Q6_K, Q8_0 where rows
    /// are not whole super-blocks; the IQ4 mixes' Q5_K tensors).
    pub fn parse(s: &str) -> Result<Quant> {
        if let Some(m) = KMix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
        {
            return Ok(Quant::Mix(m));
        }
        match GgmlType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
        {
            Some(t) => Ok(Quant::Uniform(t)),
            None => {
                let one: Vec<_> = GgmlType::ALL
                    .into_iter()
                    .map(GgmlType::name)
                    .filter(|n| !KMix::ALL.iter().any(|m| m.name() == *n))
                    .collect();
                Err(Error::Invalid(format!(
                    "unknown quantisation '{s}' (one type for every matrix: {}; or a \
                     llama-quantize mix: {})",
                    one.join("|"),
                    KMix::ALL.map(KMix::name).join("|")
                )))
            }
        }
    }

    /// The name `parse` reads.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Uniform(t) => t.name(),
            Quant::Mix(m) => m.name(),
        }
    }

    /// llama.cpp's `general.file_type` (`enum llama_ftype`) for the file: the mix's own, or
    /// for one type the value llama.cpp guesses for a file mostly of that type.
    pub fn file_type(self) -> u32 {
        match self {
            Quant::Mix(KMix::Q4KS) => 14,
            Quant::Mix(KMix::Q4KM) => 15,
            Quant::Mix(KMix::Q5KS) => 16,
            Quant::Mix(KMix::Q5KM) => 17,
            Quant::Mix(KMix::Q6K) => 18,
            Quant::Mix(KMix::IQ4XS) => 30,
            Quant::Mix(KMix::IQ4NL) => 25,
            Quant::Uniform(t) => match t {
                GgmlType::F32 => 0,
                GgmlType::F16 => 1,
                GgmlType::Q4_0 => 2,
                GgmlType::Q4_1 => 3,
                GgmlType::Q8_0 => 7,
                GgmlType::Q5_0 => 8,
                GgmlType::Q5_1 => 9,
                GgmlType::Q4_K => 15,
                GgmlType::Q5_K => 17,
                GgmlType::Q6_K => 18,
                GgmlType::IQ4_NL => 25,
                GgmlType::IQ4_XS => 30,
                GgmlType::BF16 => 32,
            },
        }
    }

    /// The type of the matrix `role` of layer `layer` (0 for the embedding and classifier)
    /// with rows of `cols` elements, in a model of configuration `cfg` whose classifier is
    /// tied to the embedding when `tied`. Every type a mix picks is one baro-top writes.
    pub fn tensor_type(
        self,
        role: Role,
        layer: usize,
        cols: usize,
        cfg: &Config,
        tied: bool,
    ) -> GgmlType {
        let m = match self {
            Quant::Uniform(t) => return t,
            Quant::Mix(m) => m,
        };
        let n = cfg.n_layers;
        let classifier = role == Role::Output || (tied && role == Role::TokenEmbd);
        let mut ty = m.base();
        if classifier {
            ty = if cols.is_multiple_of(ty.block_len()) {
                GgmlType::Q6_K
            } else {
                GgmlType::Q8_0
            };
        } else if role == Role::AttnV {
            if matches!(m, KMix::IQ4XS | KMix::IQ4NL) && cfg.n_heads / cfg.n_kv_heads >= 4 {
                ty = GgmlType::Q5_K;
            } else if matches!(m, KMix::Q4KM | KMix::Q5KM) && more_bits(layer, n) {
                ty = GgmlType::Q6_K;
            } else if m == KMix::Q4KS && layer < 4 {
                ty = GgmlType::Q5_K;
            }
            let is_70b = n == 80
                && match cfg.arch {
                    Arch::Llama => cfg.n_heads != cfg.n_kv_heads,
                    Arch::Qwen2 => true,
                    Arch::Qwen3 => false,
                };
            if is_70b && ty == GgmlType::Q4_K {
                ty = GgmlType::Q5_K;
            }
        } else if role == Role::FfnDown {
            if matches!(m, KMix::Q4KM | KMix::Q5KM) && more_bits(layer, n) {
                ty = GgmlType::Q6_K;
            } else if matches!(m, KMix::Q4KS | KMix::IQ4XS | KMix::IQ4NL) && layer < n / 8 {
                ty = GgmlType::Q5_K;
            }
        }
        if cols.is_multiple_of(ty.block_len()) {
            return ty;
        }
        // llama-quantize's tensor_type_fallback: a 32-block type (Q8_0, IQ4_NL) has no smaller
        // block to fall back to, so the F16 test below takes it.
        let fallback = match ty {
            GgmlType::Q4_K => GgmlType::Q5_0,
            GgmlType::Q5_K => GgmlType::Q5_1,
            GgmlType::Q6_K => GgmlType::Q8_0,
            GgmlType::IQ4_XS => GgmlType::IQ4_NL,
            t => t,
        };
        if cols.is_multiple_of(fallback.block_len()) {
            fallback
        } else {
            GgmlType::F16
        }
    }
}

/// llama.cpp's name of a `general.file_type` value (`enum llama_ftype`: `Q4_K_M` for 15), the
/// removed values included, so `model info` names what a file says it is.
pub fn file_type_name(id: u32) -> Option<&'static str> {
    const NAMES: [&str; 42] = [
        "F32",
        "F16",
        "Q4_0",
        "Q4_1",
        "Q4_1_SOME_F16",
        "Q4_2",
        "Q4_3",
        "Q8_0",
        "Q5_0",
        "Q5_1",
        "Q2_K",
        "Q3_K_S",
        "Q3_K_M",
        "Q3_K_L",
        "Q4_K_S",
        "Q4_K_M",
        "Q5_K_S",
        "Q5_K_M",
        "Q6_K",
        "IQ2_XXS",
        "IQ2_XS",
        "Q2_K_S",
        "IQ3_XS",
        "IQ3_XXS",
        "IQ1_S",
        "IQ4_NL",
        "IQ3_S",
        "IQ3_M",
        "IQ2_S",
        "IQ2_M",
        "IQ4_XS",
        "IQ1_M",
        "BF16",
        "Q4_0_4_4",
        "Q4_0_4_8",
        "Q4_0_8_8",
        "TQ1_0",
        "TQ2_0",
        "MXFP4_MOE",
        "NVFP4",
        "Q1_0",
        "Q2_0",
    ];
    NAMES.get(id as usize).copied()
}

impl std::fmt::Display for Quant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(n_layers: usize, n_heads: usize, n_kv_heads: usize) -> Config {
        Config {
            dim: 2048,
            hidden_dim: 8192,
            n_layers,
            n_heads,
            n_kv_heads,
            vocab_size: 128256,
            seq_len: 2048,
            rope_theta: 500000.0,
            norm_eps: 1e-5,
            arch: Arch::Llama,
            head_dim: None,
            rope_scale: 1.0,
        }
    }

    #[test]
    fn more_bits_picks_the_layers_llama_quantize_picks() {
        // 16 layers (Llama-3.2-1B): n/8 = 2, 7n/8 = 14.
        let picked: Vec<usize> = (0..16).filter(|&i| more_bits(i, 16)).collect();
        assert_eq!(picked, [0, 1, 4, 7, 10, 13, 14, 15]);
        // 2 layers: n/8 = 0, 7n/8 = 1 (the kq fixtures: layer 1's attn_v and ffn_down Q6_K).
        let picked: Vec<usize> = (0..2).filter(|&i| more_bits(i, 2)).collect();
        assert_eq!(picked, [1]);
    }

    /// What llama-quantize (llama.cpp 0c1e57098bba, CPU build) wrote for `model gen --shape
    /// llama-1b --quant f32` as Q4_K_M, 2026-12-05: the tied embedding and the attn_v and
    /// ffn_down of layers 0, 1, 4, 7, 10, 13, 14, 15 in Q6_K, every other matrix Q4_K (and
    /// baro-top's `--quant q4_k_m` of the same shape and seed was that file byte for byte).
    #[test]
    fn q4_k_m_of_the_1b_shape_is_what_llama_quantize_wrote() {
        let cfg = config(16, 32, 8);
        let q = Quant::Mix(KMix::Q4KM);
        let q6 = [0, 1, 4, 7, 10, 13, 14, 15];
        assert_eq!(
            q.tensor_type(Role::TokenEmbd, 0, 2048, &cfg, true),
            GgmlType::Q6_K
        );
        assert_eq!(
            q.tensor_type(Role::TokenEmbd, 0, 2048, &cfg, false),
            GgmlType::Q4_K
        );
        for l in 0..16 {
            let want = if q6.contains(&l) {
                GgmlType::Q6_K
            } else {
                GgmlType::Q4_K
            };
            assert_eq!(q.tensor_type(Role::AttnV, l, 2048, &cfg, true), want);
            assert_eq!(q.tensor_type(Role::FfnDown, l, 8192, &cfg, true), want);
            for (r, cols) in [
                (Role::AttnQ, 2048),
                (Role::AttnK, 2048),
                (Role::AttnOutput, 2048),
                (Role::FfnGate, 2048),
                (Role::FfnUp, 2048),
            ] {
                assert_eq!(q.tensor_type(r, l, cols, &cfg, true), GgmlType::Q4_K);
            }
        }
    }

    #[test]
    fn rows_that_are_not_whole_super_blocks_fall_back_as_llama_quantize_does() {
        let cfg = config(8, 32, 8);
        let q4 = Quant::Mix(KMix::Q4KM);
        // 128 columns: Q4_K -> Q5_0, Q6_K -> Q8_0, the classifier Q8_0.
        assert_eq!(
            q4.tensor_type(Role::AttnQ, 1, 128, &cfg, false),
            GgmlType::Q5_0
        );
        assert_eq!(
            q4.tensor_type(Role::AttnV, 0, 128, &cfg, false),
            GgmlType::Q8_0
        );
        assert_eq!(
            q4.tensor_type(Role::Output, 0, 128, &cfg, false),
            GgmlType::Q8_0
        );
        let q5 = Quant::Mix(KMix::Q5KS);
        assert_eq!(
            q5.tensor_type(Role::FfnUp, 0, 160, &cfg, false),
            GgmlType::Q5_1
        );
        // 48 columns are not even whole 32-blocks: F16.
        assert_eq!(
            q4.tensor_type(Role::AttnQ, 1, 48, &cfg, false),
            GgmlType::F16
        );
        // Q4_K_S: Q5_K for the first four attn_v and the first n/8 ffn_down.
        let s = Quant::Mix(KMix::Q4KS);
        assert_eq!(
            s.tensor_type(Role::AttnV, 3, 256, &cfg, false),
            GgmlType::Q5_K
        );
        assert_eq!(
            s.tensor_type(Role::AttnV, 4, 256, &cfg, false),
            GgmlType::Q4_K
        );
        assert_eq!(
            s.tensor_type(Role::FfnDown, 0, 256, &cfg, false),
            GgmlType::Q5_K
        );
        assert_eq!(
            s.tensor_type(Role::FfnDown, 1, 256, &cfg, false),
            GgmlType::Q4_K
        );
        // An 80-layer llama with grouped-query attention ("70B"): attn_v at least Q5_K.
        let big = config(80, 64, 8);
        assert_eq!(
            s.tensor_type(Role::AttnV, 40, 256, &big, false),
            GgmlType::Q5_K
        );
        let mha = config(80, 64, 64);
        let qwen2 = Config {
            arch: Arch::Qwen2,
            ..mha.clone()
        };
        assert_eq!(
            s.tensor_type(Role::AttnV, 40, 256, &qwen2, false),
            GgmlType::Q5_K
        );
        assert_eq!(
            s.tensor_type(Role::AttnV, 40, 256, &mha, false),
            GgmlType::Q4_K
        );
    }

    #[test]
    fn every_file_type_baro_top_writes_is_named_as_its_mix() {
        for m in KMix::ALL {
            let id = Quant::Mix(m).file_type();
            assert_eq!(
                file_type_name(id).map(str::to_lowercase).as_deref(),
                Some(m.name())
            );
        }
        for t in GgmlType::ALL {
            let id = Quant::Uniform(t).file_type();
            let name = file_type_name(id).expect("named").to_lowercase();
            assert!(name.starts_with(t.name()), "{t}: {name}");
        }
        assert_eq!(file_type_name(42), None);
    }

    /// llama-quantize's IQ4_XS without an importance matrix: attn_v Q5_K where a KV head
    /// serves 4 or more query heads (Llama 3: 32 / 8), ffn_down Q5_K in the first n/8
    /// layers, the classifier Q6_K; rows that are not whole super-blocks fall back to IQ4_NL
    /// (Qwen2-0.5B's 896), and rows that are not even whole 32-blocks to F16.
    #[test]
    fn iq4_xs_types_its_tensors_as_llama_quantize_with_iq4_nl_for_rows_of_whole_32_blocks() {
        let q = Quant::Mix(KMix::IQ4XS);
        let gqa4 = config(16, 32, 8);
        let gqa2 = config(16, 32, 16);
        let t = |role, layer, cols, cfg: &Config, tied| q.tensor_type(role, layer, cols, cfg, tied);
        assert_eq!(t(Role::AttnV, 5, 2048, &gqa4, true), GgmlType::Q5_K);
        assert_eq!(t(Role::AttnV, 5, 2048, &gqa2, true), GgmlType::IQ4_XS);
        assert_eq!(t(Role::FfnDown, 1, 8192, &gqa2, true), GgmlType::Q5_K);
        assert_eq!(t(Role::FfnDown, 2, 8192, &gqa2, true), GgmlType::IQ4_XS);
        assert_eq!(t(Role::TokenEmbd, 0, 2048, &gqa2, true), GgmlType::Q6_K);
        assert_eq!(t(Role::TokenEmbd, 0, 2048, &gqa2, false), GgmlType::IQ4_XS);
        assert_eq!(t(Role::Output, 0, 128, &gqa2, false), GgmlType::Q8_0);
        assert_eq!(t(Role::FfnUp, 3, 160, &gqa2, false), GgmlType::IQ4_NL);
        assert_eq!(t(Role::AttnQ, 3, 896, &gqa2, false), GgmlType::IQ4_NL);
        assert_eq!(t(Role::TokenEmbd, 0, 896, &gqa2, false), GgmlType::IQ4_NL);
        // The Q5_K ones fall back to Q5_1, not IQ4_NL.
        assert_eq!(t(Role::AttnV, 5, 896, &gqa4, false), GgmlType::Q5_1);
        assert_eq!(t(Role::FfnUp, 3, 200, &gqa2, false), GgmlType::F16);
    }

    /// llama-quantize's IQ4_NL (`LLAMA_FTYPE_MOSTLY_IQ4_NL`) without an importance matrix:
    /// IQ4_XS's rules with IQ4_NL as the base type, so rows of whole 32-blocks keep it; the
    /// classifier Q6_K (Q8_0 where its rows are not whole super-blocks, F16 where not whole
    /// 32-blocks), Q5_K attn_v and first-n/8 ffn_down falling back to Q5_1.
    #[test]
    fn iq4_nl_types_its_tensors_as_llama_quantize() {
        let q = Quant::Mix(KMix::IQ4NL);
        let gqa4 = config(16, 32, 8);
        let gqa2 = config(16, 32, 16);
        let t = |role, layer, cols, cfg: &Config, tied| q.tensor_type(role, layer, cols, cfg, tied);
        assert_eq!(t(Role::AttnV, 5, 2048, &gqa4, true), GgmlType::Q5_K);
        assert_eq!(t(Role::AttnV, 5, 896, &gqa4, true), GgmlType::Q5_1);
        assert_eq!(t(Role::AttnV, 5, 2048, &gqa2, true), GgmlType::IQ4_NL);
        assert_eq!(t(Role::FfnDown, 1, 8192, &gqa2, true), GgmlType::Q5_K);
        assert_eq!(t(Role::FfnDown, 2, 8192, &gqa2, true), GgmlType::IQ4_NL);
        assert_eq!(t(Role::TokenEmbd, 0, 2048, &gqa2, true), GgmlType::Q6_K);
        assert_eq!(t(Role::TokenEmbd, 0, 896, &gqa2, true), GgmlType::Q8_0);
        assert_eq!(t(Role::TokenEmbd, 0, 896, &gqa2, false), GgmlType::IQ4_NL);
        assert_eq!(t(Role::Output, 0, 200, &gqa2, false), GgmlType::F16);
        for (r, cols) in [
            (Role::AttnQ, 896),
            (Role::FfnGate, 160),
            (Role::AttnOutput, 4864),
        ] {
            assert_eq!(t(r, 3, cols, &gqa2, false), GgmlType::IQ4_NL, "{r:?}");
        }
        assert_eq!(t(Role::FfnUp, 3, 200, &gqa2, false), GgmlType::F16);
        assert_eq!(Quant::Mix(KMix::IQ4NL).file_type(), 25);
        assert_eq!(file_type_name(25), Some("IQ4_NL"));
    }

    /// What llama-quantize (llama.cpp 0c1e57098bba, CPU build) wrote for `model gen --arch
    /// qwen2 --dim 896 --hidden 4864 --heads 14 --kv-heads 2 --layers 24 --vocab 151936 --quant
    /// f32` (Qwen2-0.5B's shape, tied) as IQ4_XS and as IQ4_NL, 2026-12-05, counted by type
    /// (and baro-top's `--quant iq4_xs` / `iq4_nl` of the same shape and seed were those files
    /// byte for byte): rows of 896 are whole 32-blocks only.
    #[test]
    fn the_iq4_mixes_of_qwen2_0_5b_are_typed_as_llama_quantize_typed_them() {
        let cfg = Config {
            dim: 896,
            hidden_dim: 4864,
            arch: Arch::Qwen2,
            ..config(24, 14, 2)
        };
        let count = |m: KMix| {
            let q = Quant::Mix(m);
            let mut n = std::collections::BTreeMap::new();
            let mut add = |t: GgmlType| *n.entry(t.ggml_name()).or_insert(0) += 1;
            add(q.tensor_type(Role::TokenEmbd, 0, 896, &cfg, true));
            for l in 0..24 {
                for r in [
                    Role::AttnQ,
                    Role::AttnK,
                    Role::AttnV,
                    Role::AttnOutput,
                    Role::FfnGate,
                    Role::FfnUp,
                ] {
                    add(q.tensor_type(r, l, 896, &cfg, true));
                }
                add(q.tensor_type(Role::FfnDown, l, 4864, &cfg, true));
            }
            n.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(
            count(KMix::IQ4XS),
            [
                ("IQ4_NL", 120),
                ("IQ4_XS", 21),
                ("Q5_1", 24),
                ("Q5_K", 3),
                ("Q8_0", 1)
            ]
        );
        assert_eq!(
            count(KMix::IQ4NL),
            [("IQ4_NL", 141), ("Q5_1", 24), ("Q5_K", 3), ("Q8_0", 1)]
        );
    }

    #[test]
    fn parse_reads_mixes_and_single_types_and_names_the_choices() {
        assert_eq!(Quant::parse("q4_k_m").unwrap(), Quant::Mix(KMix::Q4KM));
        assert_eq!(Quant::parse("Q6_K").unwrap(), Quant::Mix(KMix::Q6K));
        assert_eq!(
            Quant::parse("q4_k").unwrap(),
            Quant::Uniform(GgmlType::Q4_K)
        );
        assert_eq!(
            Quant::parse("q8_0").unwrap(),
            Quant::Uniform(GgmlType::Q8_0)
        );
        let e = Quant::parse("q3_k_m").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid argument: unknown quantisation 'q3_k_m' (one type for every matrix: \
             f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k; or a llama-quantize mix: \
             q4_k_s|q4_k_m|q5_k_s|q5_k_m|q6_k|iq4_xs|iq4_nl)"
        );
        assert_eq!(Quant::parse("IQ4_XS").unwrap(), Quant::Mix(KMix::IQ4XS));
        assert_eq!(Quant::parse("iq4_nl").unwrap(), Quant::Mix(KMix::IQ4NL));
    }
}
