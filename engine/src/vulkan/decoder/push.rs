//! The kernel's push constants: one dispatch's words in layout.glsl's `pc` order.

/// Words of the kernel's push constants (layout.glsl's `pc`, member for member: `Push`).
pub(super) const PUSH_WORDS: usize = 10;

/// One dispatch's push constants: layout.glsl's `pc` in its members' order, and a last word
/// that is always 0 — the shader ties its dot loops' scale unpacking to their quant loads
/// with it (decode.comp's `qscale_after`), a zero the driver's compiler cannot fold.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Push {
    pub token: u32,
    pub pos: u32,
    /// Multi: the level and stage this dispatch runs.
    pub level: u32,
    pub stage: u32,
    pub pass_id: u32,
    /// The spin timeout in device-clock ticks.
    pub timeout: u32,
    /// The (first) pass's chain slot.
    pub ring_slot: u32,
    pub flags: u32,
    /// Passes this dispatch runs (the pass loop's modules).
    pub npasses: u32,
}

impl Push {
    pub(super) fn words(&self) -> [u32; PUSH_WORDS] {
        [
            self.token,
            self.pos,
            self.level,
            self.stage,
            self.pass_id,
            self.timeout,
            self.ring_slot,
            self.flags,
            self.npasses,
            0,
        ]
    }
}

/// The push constants of a clock calibration (and warm-up) dispatch: flag 1, the rest 0.
pub(super) fn calibration_push() -> [u32; PUSH_WORDS] {
    Push {
        flags: 1,
        ..Push::default()
    }
    .words()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// layout.glsl's `Push` block: its members' names, in order.
    fn shader_push_members() -> Vec<String> {
        let src = include_str!("../../../../shaders/layout.glsl");
        let start = src
            .find("uniform Push {")
            .expect("layout.glsl declares the Push block");
        let body = &src[start..src[start..].find('}').map(|e| start + e).unwrap()];
        body.lines()
            .skip(1)
            .map(|l| l.split("//").next().unwrap().trim())
            .filter(|l| !l.is_empty())
            .map(|l| {
                assert!(
                    !l.starts_with('#'),
                    "a Push member under a preprocessor branch: {l}"
                );
                let l = l
                    .strip_prefix("uint ")
                    .expect("every Push member is a uint");
                l.trim_end_matches(';').trim().to_string()
            })
            .collect()
    }

    #[test]
    fn push_words_follow_the_shader_block_member_for_member_and_end_in_zero() {
        let members = shader_push_members();
        assert_eq!(members.len(), PUSH_WORDS, "{members:?}");
        let p = Push {
            token: 1,
            pos: 2,
            level: 3,
            stage: 4,
            pass_id: 5,
            timeout: 6,
            ring_slot: 7,
            flags: 8,
            npasses: 9,
        };
        let by_name = [
            ("token", 1),
            ("pos", 2),
            ("level", 3),
            ("stage", 4),
            ("pass_id", 5),
            ("timeout", 6),
            ("ring_slot", 7),
            ("flags", 8),
            ("npasses", 9),
            ("zero", 0),
        ];
        let w = p.words();
        for (i, name) in members.iter().enumerate() {
            let want = by_name.iter().find(|(n, _)| n == name);
            let want =
                want.unwrap_or_else(|| panic!("a Push member the host does not fill: {name}"));
            assert_eq!(w[i], want.1, "word {i} ({name})");
        }
        assert_eq!(
            calibration_push()[PUSH_WORDS - 1],
            0,
            "the zero word of a calibration"
        );
        assert_eq!(calibration_push()[7], 1, "a calibration's flag");
    }
}
