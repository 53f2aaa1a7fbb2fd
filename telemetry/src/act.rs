//! The matrix-vector products' activation type: f32 (the reference path, bit-exact against
//! every golden) or q8 (each 32-element block of a matvec's input vector quantised to int8 with
//! a power-of-two scale, multiplied against quantised weights with exact integer dot products).
//!
//! Only the matvecs over quantised weights (Q4_0, Q8_0) change: norms, RoPE, attention, the
//! residual stream and every sum across blocks stay f32. The CPU reference quantises the same
//! way when asked (`baro_engine::act`), so a q8 run is checked against a q8 reference.

use serde::{Deserialize, Serialize};

/// What a quantised matrix is multiplied against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActType {
    /// The input vector in f32, each weight widened to f32: the reference path. Logits match
    /// the goldens bit for bit, and mega and multi agree bitwise.
    #[default]
    F32,
    /// The input vector quantised per 32-element block to int8 with a power-of-two scale
    /// `2^e` (the least `e` with `max|x| · 2^-e ≤ 127`; each element `x · 2^-e` rounded to
    /// nearest, ties to even — exact arithmetic, so every device and the CPU reference
    /// quantise identically), and each block's sum taken as an exact integer dot product of
    /// the weight quants with the activation quants (4-way packed int8 dot products), then
    /// scaled by the two blocks' scales in f32. Gives up the f32 path's bits (one matvec moves
    /// by ≈ 1 % relative) for a matvec that spends a fraction of the instructions per weight.
    /// Mega and multi still agree bitwise. Needs shaderIntegerDotProduct and every matrix in
    /// a quantised type (F32, F16 and BF16 have no int8 dot product).
    Q8,
}

impl ActType {
    /// Every type, in the order the CLI lists them.
    pub const ALL: [ActType; 2] = [ActType::F32, ActType::Q8];

    /// The name the CLI, bench rows and run details use (`f32`, `q8`).
    pub fn name(self) -> &'static str {
        match self {
            ActType::F32 => "f32",
            ActType::Q8 => "q8",
        }
    }

    /// Parse a name exactly as [`ActType::name`] writes it; anything else is refused with a
    /// message naming the accepted values.
    pub fn parse(s: &str) -> Result<ActType, String> {
        ActType::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "activation type '{s}': expected one of {}",
                    ActType::ALL.map(|k| k.name()).join(", ")
                )
            })
    }

    /// The reference type (what a run without the field in its details used).
    pub fn is_f32(&self) -> bool {
        *self == ActType::F32
    }

    /// `act q8` for a run off the reference path (what screens and logs show); `None` for f32.
    pub fn label(self) -> Option<String> {
        (!self.is_f32()).then(|| format!("act {}", self.name()))
    }
}

impl std::fmt::Display for ActType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ActType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ActType::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn act_names_round_trip_and_anything_else_is_refused_naming_the_accepted_values() {
        for k in ActType::ALL {
            assert_eq!(ActType::parse(k.name()), Ok(k));
            assert_eq!(k.to_string().parse::<ActType>(), Ok(k));
        }
        for bad in ["q8_0", "Q8", "int8", "i8", "", " q8", "f16"] {
            let e = ActType::parse(bad).unwrap_err();
            assert!(e.contains("f32, q8"), "{e}");
        }
        assert_eq!(ActType::default(), ActType::F32);
        assert_eq!(ActType::F32.label(), None);
        assert_eq!(ActType::Q8.label().as_deref(), Some("act q8"));
    }
}
