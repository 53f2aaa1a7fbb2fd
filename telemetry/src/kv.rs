//! The KV cache's storage type: f32 (the reference path, bit-exact against every golden) or
//! f16 (half the cache's bytes and half the attention's cache reads, at the price of each
//! stored key and value rounded to f16).
//!
//! Only storage changes: every product and sum stays f32. The CPU reference applies the same
//! rounding ([`KvType::store`]) when asked, so an f16 run is checked against an f16 reference.

use serde::{Deserialize, Serialize};

/// How the KV cache stores keys and values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvType {
    /// 32-bit floats: the reference path. Logits match the goldens bit for bit, and mega and
    /// multi agree bitwise.
    #[default]
    F32,
    /// 16-bit floats (IEEE binary16): every key and value is rounded to f16 (round to nearest,
    /// ties to even) when it is stored, and read back as f32. Gives up the f32 reference's
    /// bits (logits move by the keys' and values' rounding, ~1e-3 relative) for half the cache
    /// bytes (twice the context in the same memory) and half the attention's cache reads.
    /// Mega and multi still agree bitwise. Needs `storageBuffer16BitAccess`. Faster at depth
    /// since the attention's rework (H100, q8: +4.67 % on an 8B Q4_K_M at 4,096 positions,
    /// bench/rounds/91.md), but the 512-lane q8 kernel of a 1B model loses its register budget
    /// with it (−4.73 % at depth 0): the CLI's `--kv auto` picks it where it pays.
    F16,
}

impl KvType {
    /// Every type, in the order the CLI lists them.
    pub const ALL: [KvType; 2] = [KvType::F32, KvType::F16];

    /// The name the CLI, bench rows and run details use (`f32`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
        }
    }

    /// Parse a name exactly as [`KvType::name`] writes it; anything else is refused with a
    /// message naming the accepted values.
    pub fn parse(s: &str) -> Result<KvType, String> {
        KvType::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "KV cache type '{s}': expected one of {}",
                    KvType::ALL.map(|k| k.name()).join(", ")
                )
            })
    }

    /// The reference type (what a run without the field in its details used).
    pub fn is_f32(&self) -> bool {
        *self == KvType::F32
    }

    /// `kv f16` for a run off the reference path (what screens and logs show); `None` for f32.
    pub fn label(self) -> Option<String> {
        (!self.is_f32()).then(|| format!("kv {}", self.name()))
    }

    /// Bytes per stored element.
    pub fn bytes(self) -> u64 {
        match self {
            KvType::F32 => 4,
            KvType::F16 => 2,
        }
    }

    /// The value a stored `x` reads back as: `x` itself (f32), or `x` rounded to the nearest
    /// f16, ties to even (what the GPU's f32 → f16 conversion does), widened back exactly.
    pub fn store(self, x: f32) -> f32 {
        match self {
            KvType::F32 => x,
            KvType::F16 => half::f16::from_f32(x).to_f32(),
        }
    }
}

impl std::fmt::Display for KvType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        KvType::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_anything_else_is_refused_naming_the_accepted_values() {
        for k in KvType::ALL {
            assert_eq!(KvType::parse(k.name()), Ok(k));
        }
        for bad in ["f64", "F16", "fp16", "half", "", " f16"] {
            let e = KvType::parse(bad).unwrap_err();
            assert!(e.contains("f32, f16"), "{e}");
        }
        assert_eq!(KvType::default(), KvType::F32);
    }

    #[test]
    fn f16_storage_rounds_to_nearest_even_and_f32_storage_is_the_identity() {
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
        let tie = 1.0 + f32::powi(2.0, -11);
        assert_eq!(KvType::F16.store(tie), 1.0);
        // 1 + 3·2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: even is 1 + 2^-9.
        let tie_up = 1.0 + 3.0 * f32::powi(2.0, -11);
        assert_eq!(KvType::F16.store(tie_up), 1.0 + f32::powi(2.0, -9));
        // Just above a tie rounds up.
        let above = f32::from_bits(tie.to_bits() + 1);
        assert_eq!(KvType::F16.store(above), 1.0 + f32::powi(2.0, -10));
        let x = 0.123_456_79_f32;
        assert_ne!(KvType::F16.store(x), x);
        assert_eq!(KvType::F32.store(x).to_bits(), x.to_bits());
        assert_eq!(KvType::F16.bytes() * 2, KvType::F32.bytes());
    }
}
