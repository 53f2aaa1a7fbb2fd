//! The KV cache's storage type. It lives in the telemetry crate (a run's details carry it, so
//! a recording of an f16 run says so); the engine re-exports it, and adds what the CLI asks
//! for ([`KvChoice`]: `auto`, `f32` or `f16`) and how `auto` is resolved ([`resolve_kv`]).

use crate::act::ActType;
pub use baro_telemetry::KvType;

/// What `--kv` asks for: a fixed storage type, or `auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvChoice {
    /// f16 where the run's activations are q8, the model is at least [`KV_AUTO_F16_DIM`] wide
    /// and the backend can store f16 ([`resolve_kv`]), else f32: the CLI's default. A q8 run
    /// is already off the f32 reference path (its logits within ≈ 1 % of f32's); an f16
    /// cache's own rounding is a tenth of that, and llama.cpp's default cache is f16 too. The
    /// f32 path (stories260K's goldens, the f32 gate) keeps f32.
    #[default]
    Auto,
    /// Always f32 (the reference path).
    F32,
    /// Always f16 (refused by name where the device cannot store it).
    F16,
}

impl KvChoice {
    /// Every choice, in the order the CLI lists them.
    pub const ALL: [KvChoice; 3] = [KvChoice::Auto, KvChoice::F32, KvChoice::F16];

    /// The name the CLI uses (`auto`, `f32`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            KvChoice::Auto => "auto",
            KvChoice::F32 => KvType::F32.name(),
            KvChoice::F16 => KvType::F16.name(),
        }
    }

    /// Parse a name exactly as [`KvChoice::name`] writes it; anything else is refused with a
    /// message naming the accepted values.
    pub fn parse(s: &str) -> Result<KvChoice, String> {
        KvChoice::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "KV cache type '{s}': expected one of {}",
                    KvChoice::ALL.map(|k| k.name()).join(", ")
                )
            })
    }

    /// The fixed type asked for; `None` for `auto`.
    pub fn fixed(self) -> Option<KvType> {
        match self {
            KvChoice::Auto => None,
            KvChoice::F32 => Some(KvType::F32),
            KvChoice::F16 => Some(KvType::F16),
        }
    }
}

impl std::fmt::Display for KvChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        KvChoice::parse(s)
    }
}

/// The narrowest model (`dim`) whose q8 runs take the f16 cache under `--kv auto`: where the
/// q8 kernel runs its widest workgroups (1,024 lanes, the decoder's default from this width
/// up), so every lane is held to 64 registers whichever cache it reads. Measured on an H100
/// (bench/rounds/91.md, `bench ab` f32 → f16 cache, q8): 8B Q4_K_M +1.22 % at depth 0 and
/// +4.67 % at 4096, 8B Q4_0 −0.22 % at 0 (within the instrument's ±0.3 %) and +3.1 % at
/// 4096 (round 74). Below it the 512-lane kernel with the f16 cache lost its register budget
/// (round 91: 91 → 64, 1B Q4_0 −4.73 % at depth 0); since round 93 (the raw-first f16 loops
/// only from 1,024 lanes) it keeps 91, and the f16 cache there measures level with f32
/// (1B Q4_0 −0.57 % at depth 0, +0.63 % at 4096; 1B Q4_K_M +0.62 % at 4096): no gain worth
/// the f16 rounding, so narrower models keep the reference cache.
pub const KV_AUTO_F16_DIM: usize = 4096;

/// The storage type a run takes for `choice` when its activations are `act` (already
/// resolved), its model `dim` wide, on a backend that can (`f16_ok`) or cannot store an f16
/// cache: a fixed choice as asked (an explicit f16 that cannot run is refused where the
/// decoder is built, by name, not turned into f32 here); `auto` is f16 for a q8 run of a model
/// at least [`KV_AUTO_F16_DIM`] wide where the backend can store it, else f32.
pub fn resolve_kv(choice: KvChoice, act: ActType, dim: usize, f16_ok: bool) -> KvType {
    match choice.fixed() {
        Some(t) => t,
        None if act == ActType::Q8 && dim >= KV_AUTO_F16_DIM && f16_ok => KvType::F16,
        None => KvType::F32,
    }
}

/// A KV cache type as runs report it: `f16`, or `f16 (auto)` where `--kv auto` chose it.
pub fn kv_words(kv: KvType, auto: bool) -> String {
    baro_telemetry::run::auto_words(kv.name(), auto)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_auto_is_f16_only_for_q8_runs_of_wide_models_on_backends_that_store_f16_and_fixed_choices_stay_fixed(
    ) {
        use ActType::{F32 as A32, Q8};
        let (wide, narrow) = (KV_AUTO_F16_DIM, KV_AUTO_F16_DIM - 1);
        assert_eq!(resolve_kv(KvChoice::Auto, Q8, wide, true), KvType::F16);
        assert_eq!(resolve_kv(KvChoice::Auto, Q8, 8192, true), KvType::F16);
        assert_eq!(resolve_kv(KvChoice::Auto, Q8, narrow, true), KvType::F32);
        assert_eq!(resolve_kv(KvChoice::Auto, Q8, 2048, true), KvType::F32);
        assert_eq!(resolve_kv(KvChoice::Auto, Q8, wide, false), KvType::F32);
        assert_eq!(resolve_kv(KvChoice::Auto, A32, wide, true), KvType::F32);
        assert_eq!(resolve_kv(KvChoice::Auto, A32, narrow, false), KvType::F32);
        for act in [Q8, A32] {
            for dim in [narrow, wide] {
                for ok in [true, false] {
                    assert_eq!(resolve_kv(KvChoice::F32, act, dim, ok), KvType::F32);
                    // An explicit f16 is never quietly turned into f32 (the decoder refuses it).
                    assert_eq!(resolve_kv(KvChoice::F16, act, dim, ok), KvType::F16);
                }
            }
        }
    }

    #[test]
    fn kv_choice_parses_exactly_its_three_names_and_refuses_others_naming_them() {
        for c in KvChoice::ALL {
            assert_eq!(KvChoice::parse(c.name()), Ok(c));
            assert_eq!(c.to_string(), c.name());
        }
        for bad in ["", "F16", "fp16", "bf16", "auto ", "q8"] {
            let e = KvChoice::parse(bad).unwrap_err();
            assert!(e.contains("auto, f32, f16"), "{e}");
        }
        assert_eq!(KvChoice::default(), KvChoice::Auto);
        assert_eq!(kv_words(KvType::F16, true), "f16 (auto)");
        assert_eq!(kv_words(KvType::F32, false), "f32");
    }
}
