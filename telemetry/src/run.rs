//! Static details of a run, sent first and again when they change
//! ([`crate::Telemetry::Start`]), and referred to by id in every frame: the device, the
//! dispatch style, the grid, and the program's stages and levels.
//!
//! Names are `Arc<str>`: a frame's stage timings share them with these details instead of
//! copying every name every pass.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Index of a stage in [`RunDetails::stages`] (also its index in the shader's stage table and
/// in the ring).
pub type StageId = u32;

/// How a pass is dispatched. (Not the power-state mode: see [`crate::PowerMode`].)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dispatch {
    /// One persistent dispatch per token; levels separated by the software grid barrier.
    Mega,
    /// One dispatch per stage (the "thirty-odd launches per token" baseline).
    Multi,
}

impl Dispatch {
    /// `mega` or `multi` (the CLI's `--mode` spelling and the serialised form).
    pub fn name(self) -> &'static str {
        match self {
            Dispatch::Mega => "mega",
            Dispatch::Multi => "multi",
        }
    }
}

impl fmt::Display for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of device the run is on, as Vulkan reports it (a CPU device must never pass for
/// a GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// A discrete GPU.
    Discrete,
    /// An integrated GPU.
    Integrated,
    /// A virtual GPU.
    Virtual,
    /// A CPU implementation (lavapipe, SwiftShader).
    Cpu,
    /// Anything else.
    Other,
}

impl DeviceKind {
    /// Whether this is a CPU implementation.
    pub fn is_cpu(self) -> bool {
        self == DeviceKind::Cpu
    }
}

/// What a stage computes (the shader's `K_*` constants, in the same order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
pub enum StageKind {
    /// Query rows with RoPE.
    #[serde(rename = "q")]
    Q = 0,
    /// Key rows with RoPE, into the cache.
    #[serde(rename = "k")]
    K = 1,
    /// Value rows, into the cache.
    #[serde(rename = "v")]
    V = 2,
    /// Attention: a (head, position chunk) per workgroup (up to 4 chunks of at least 64
    /// positions), unnormalised; the output projection's prologue combines the chunks.
    #[serde(rename = "attn")]
    Attn = 3,
    /// Output projection plus residual.
    #[serde(rename = "wo")]
    Wo = 4,
    /// FFN gate and up with the SiLU product.
    #[serde(rename = "ffn_up")]
    Ffn = 5,
    /// FFN down plus residual.
    #[serde(rename = "ffn_down")]
    Down = 6,
    /// Classifier rows and per-workgroup argmax partials.
    #[serde(rename = "head")]
    Head = 7,
    /// Final argmax over the partials (one workgroup: the tail of the last barrier).
    #[serde(rename = "argmax")]
    Argmax = 8,
}

impl StageKind {
    /// Every kind, in shader order.
    pub const ALL: [StageKind; 9] = [
        StageKind::Q,
        StageKind::K,
        StageKind::V,
        StageKind::Attn,
        StageKind::Wo,
        StageKind::Ffn,
        StageKind::Down,
        StageKind::Head,
        StageKind::Argmax,
    ];

    /// Short name (the serialised form and the prefix of stage names, e.g. `q` in `q.l3`).
    pub fn name(self) -> &'static str {
        match self {
            StageKind::Q => "q",
            StageKind::K => "k",
            StageKind::V => "v",
            StageKind::Attn => "attn",
            StageKind::Wo => "wo",
            StageKind::Ffn => "ffn_up",
            StageKind::Down => "ffn_down",
            StageKind::Head => "head",
            StageKind::Argmax => "argmax",
        }
    }

    /// The shader's `K_*` value.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The kind with shader value `code`.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.get(code as usize).copied()
    }
}

impl fmt::Display for StageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Static description of a stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageDetails {
    /// Id (its index in [`RunDetails::stages`]).
    pub id: StageId,
    /// Display name, e.g. `q.l3`.
    pub name: Arc<str>,
    /// Index of the level it belongs to.
    pub level: u32,
    /// What it computes.
    pub kind: StageKind,
    /// Weight rows it reads (0 for attention and argmax).
    pub rows: u32,
    /// Work units distributed over the workgroups (rows, row pairs or heads).
    pub units: u32,
    /// Bytes of weights it streams per pass (its effective bandwidth is this over its busy
    /// time); 0 for attention and argmax, and in streams from before the field existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// Static description of a level: stages that run between two grid barriers (megakernel) or
/// pipeline barriers (multi).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelDetails {
    /// Index (its position in [`RunDetails::levels`]).
    pub index: u32,
    /// Display name, e.g. `qkv.l3`.
    pub name: Arc<str>,
    /// Its stages, in execution order on each workgroup.
    pub stages: Vec<StageId>,
}

/// Static description of a run, sent before any frame (and again when it changes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunDetails {
    /// [`crate::SCHEMA_VERSION`] of the producer.
    pub schema_version: u32,
    /// Device name.
    pub device: String,
    /// Driver name and version.
    pub driver: String,
    /// Device kind.
    pub device_kind: DeviceKind,
    /// Model description.
    pub model: String,
    /// Dispatch style.
    pub dispatch: Dispatch,
    /// Workgroups (G).
    pub grid: u32,
    /// Lanes per workgroup.
    pub wg_size: u32,
    /// Stages, indexed by [`StageId`].
    pub stages: Vec<StageDetails>,
    /// Levels, in execution order.
    pub levels: Vec<LevelDetails>,
    /// Whether the kernel writes the event ring (stage spans); the fail word is always there.
    pub instrumented: bool,
    /// Which passes a live reference checks; `None`: no live reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<crate::CheckPlan>,
    /// How the KV cache stores keys and values; absent (older recordings, and every f32 run,
    /// so their bytes do not change) means f32, the reference path.
    #[serde(default, skip_serializing_if = "crate::KvType::is_f32")]
    pub kv: crate::KvType,
    /// `kv` was chosen by `--kv auto` (f16 where the run is q8, the model at least 4096 wide
    /// and the device stores f16, else f32) rather than asked for by name; absent (older
    /// recordings, and every run given `--kv f32` or `--kv f16`) means it was asked for. `kv`
    /// is the type the run used either way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kv_auto: bool,
    /// What the quantised matrices multiplied against; absent (older recordings, and every
    /// f32 run) means f32, the reference path.
    #[serde(default, skip_serializing_if = "crate::ActType::is_f32")]
    pub act: crate::ActType,
    /// `act` was chosen by `--act auto` (q8 where the model and device can run it, else f32)
    /// rather than asked for by name; absent (older recordings, and every run given
    /// `--act f32` or `--act q8`) means it was asked for. `act` is the type the run used
    /// either way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub act_auto: bool,
    /// Megakernel: the read-ahead budget, MiB, that the workgroups idle in an attention level
    /// read into L2 (`--prefetch-mib`; the frames carry the bytes each pass read); absent
    /// (older recordings, multi and CPU-device runs) means 0, none. It moves no value.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub prefetch_mib: u32,
    /// Megakernel: ns that the workgroups idle in an attention level wait after arriving at
    /// its barrier before they poll (`--idle-wait-ns`); absent (older recordings, multi
    /// and CPU-device runs) means 0, none. It moves no value.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub idle_wait_ns: u32,
    /// Megakernel: chained passes ran as one dispatch each run of them, a loop over passes
    /// in the kernel (`--pass-loop on`); absent (older recordings, multi, the default)
    /// means one dispatch a pass. It moves no value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pass_loop: bool,
    /// The pipelines ran without the driver's bounds checks on storage and uniform buffers
    /// (`--robust-buffers off`, VK_EXT_pipeline_robustness); absent (older recordings, and
    /// every run with the driver's default) means the driver's default. It moves no value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub robust_buffers_off: bool,
    /// What the driver's compiler reported for the run's pipelines
    /// (VK_KHR_pipeline_executable_properties): registers, spills. Empty where the device
    /// lacks the extension (and in older recordings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipelines: Vec<crate::PipelineStats>,
    /// Why the run has no stage or barrier times though its device has a clock (the clock
    /// does not count ns, e.g. "the device clock ticks at 100.0 MHz …"); absent (older
    /// recordings, and every run whose clock counts ns or that has none) means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_clock_off: Option<String>,
}

/// `word`, followed by ` (auto)` where an `auto` choice (`--act auto`, `--kv auto`) picked it:
/// how runs, labels and logs name a resolved type.
pub fn auto_words(word: impl std::fmt::Display, auto: bool) -> String {
    match auto {
        true => format!("{word} (auto)"),
        false => word.to_string(),
    }
}

impl RunDetails {
    /// What puts this run off the f32 reference path (`kv f16`, `act q8`, each with ` (auto)`
    /// where `--kv auto` / `--act auto` chose it), in that order; empty for a reference-path
    /// run. Every screen and log shows these.
    pub fn path_labels(&self) -> Vec<String> {
        self.kv
            .label()
            .map(|l| auto_words(l, self.kv_auto))
            .into_iter()
            .chain(self.act.label().map(|l| auto_words(l, self.act_auto)))
            .collect()
    }

    /// The activation type as a run's options line says it: `q8`, or `q8 (auto)` where
    /// `--act auto` chose it.
    pub fn act_line(&self) -> String {
        auto_words(self.act, self.act_auto)
    }

    /// The KV cache type as a run's options line says it: `f16`, or `f16 (auto)` where
    /// `--kv auto` chose it.
    pub fn kv_line(&self) -> String {
        auto_words(self.kv.name(), self.kv_auto)
    }

    /// Name of level `i` (`#i` when out of range): what [`crate::FailWord::line`] wants.
    pub fn level_name(&self, i: u32) -> Cow<'_, str> {
        self.levels
            .get(i as usize)
            .map_or_else(|| Cow::Owned(format!("#{i}")), |l| Cow::Borrowed(&*l.name))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Three stages in two levels (`a`, `b` | `c`), G = 2.
    pub(crate) fn details() -> RunDetails {
        let st = |id: u32, name: &str, level: u32, kind| StageDetails {
            id,
            name: name.into(),
            level,
            kind,
            rows: 8,
            units: 8,
            weight_bytes: 0,
        };
        RunDetails {
            schema_version: crate::SCHEMA_VERSION,
            device: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
            driver: "llvmpipe Mesa 22.3.6".into(),
            device_kind: DeviceKind::Cpu,
            model: "stories260K".into(),
            dispatch: Dispatch::Mega,
            grid: 2,
            wg_size: 64,
            stages: vec![
                st(0, "q.l0", 0, StageKind::Q),
                st(1, "k.l0", 0, StageKind::K),
                st(2, "attn.l0", 1, StageKind::Attn),
            ],
            levels: vec![
                LevelDetails {
                    index: 0,
                    name: "qkv.l0".into(),
                    stages: vec![0, 1],
                },
                LevelDetails {
                    index: 1,
                    name: "attn.l0".into(),
                    stages: vec![2],
                },
            ],
            instrumented: true,
            check: None,
            kv: Default::default(),
            kv_auto: false,
            act: Default::default(),
            act_auto: false,
            prefetch_mib: 0,
            idle_wait_ns: 0,
            pass_loop: false,
            robust_buffers_off: false,
            device_clock_off: None,
            pipelines: Vec::new(),
        }
    }

    #[test]
    fn run_details_round_trip_with_closed_sets_as_snake_case() {
        let d = details();
        let j = serde_json::to_string(&d).unwrap();
        assert!(j.contains(r#""device_kind":"cpu""#), "{j}");
        assert!(j.contains(r#""dispatch":"mega""#), "{j}");
        assert!(j.contains(r#""kind":"attn""#), "{j}");
        assert_eq!(serde_json::from_str::<RunDetails>(&j).unwrap(), d);
    }

    #[test]
    fn the_kv_type_is_written_only_off_f32_and_absent_reads_as_f32() {
        let d = details();
        let j = serde_json::to_string(&d).unwrap();
        assert!(
            !j.contains("\"kv\""),
            "an f32 run's bytes do not change: {j}"
        );
        let mut f16 = d.clone();
        f16.kv = crate::KvType::F16;
        let j16 = serde_json::to_string(&f16).unwrap();
        assert!(j16.contains("\"kv\":\"f16\""), "{j16}");
        assert_eq!(serde_json::from_str::<RunDetails>(&j16).unwrap(), f16);
        assert_eq!(
            serde_json::from_str::<RunDetails>(&j).unwrap().kv,
            crate::KvType::F32
        );
    }

    #[test]
    fn the_act_type_is_written_only_off_f32_and_absent_reads_as_f32() {
        let d = details();
        let j = serde_json::to_string(&d).unwrap();
        assert!(
            !j.contains("\"act\""),
            "an f32 run's bytes do not change: {j}"
        );
        let mut q8 = d.clone();
        q8.act = crate::ActType::Q8;
        let jq = serde_json::to_string(&q8).unwrap();
        assert!(jq.contains("\"act\":\"q8\""), "{jq}");
        assert_eq!(serde_json::from_str::<RunDetails>(&jq).unwrap(), q8);
        assert_eq!(
            serde_json::from_str::<RunDetails>(&j).unwrap().act,
            crate::ActType::F32
        );
    }

    #[test]
    fn act_auto_is_written_only_when_auto_chose_and_labels_say_auto_beside_the_resolved_type() {
        let d = details();
        let j = serde_json::to_string(&d).unwrap();
        assert!(
            !j.contains("act_auto"),
            "an asked-for act writes no flag: {j}"
        );
        assert!(!serde_json::from_str::<RunDetails>(&j).unwrap().act_auto);
        let mut auto = d.clone();
        auto.act = crate::ActType::Q8;
        auto.act_auto = true;
        let ja = serde_json::to_string(&auto).unwrap();
        assert!(
            ja.contains("\"act\":\"q8\""),
            "act stays the resolved type: {ja}"
        );
        assert!(ja.contains("\"act_auto\":true"), "{ja}");
        assert_eq!(serde_json::from_str::<RunDetails>(&ja).unwrap(), auto);
        assert_eq!(auto.path_labels(), vec!["act q8 (auto)".to_string()]);
        assert_eq!(auto.act_line(), "q8 (auto)");
        // auto that chose f32 is on the reference path: no label, but the line says auto.
        let mut f = d.clone();
        f.act_auto = true;
        assert!(f.path_labels().is_empty());
        assert_eq!(f.act_line(), "f32 (auto)");
        assert_eq!(d.act_line(), "f32");
    }

    #[test]
    fn kv_auto_is_written_only_when_auto_chose_and_labels_say_auto_beside_the_resolved_type() {
        let d = details();
        let j = serde_json::to_string(&d).unwrap();
        assert!(
            !j.contains("kv_auto"),
            "an asked-for kv writes no flag: {j}"
        );
        assert!(!serde_json::from_str::<RunDetails>(&j).unwrap().kv_auto);
        let mut auto = d.clone();
        auto.kv = crate::KvType::F16;
        auto.kv_auto = true;
        auto.act = crate::ActType::Q8;
        auto.act_auto = true;
        let ja = serde_json::to_string(&auto).unwrap();
        assert!(
            ja.contains("\"kv\":\"f16\""),
            "kv stays the resolved type: {ja}"
        );
        assert!(ja.contains("\"kv_auto\":true"), "{ja}");
        assert_eq!(serde_json::from_str::<RunDetails>(&ja).unwrap(), auto);
        assert_eq!(
            auto.path_labels(),
            vec!["kv f16 (auto)".to_string(), "act q8 (auto)".to_string()]
        );
        assert_eq!(auto.kv_line(), "f16 (auto)");
        // An asked-for f16 says so without auto; auto that chose f32 has no label.
        let mut asked = auto.clone();
        asked.kv_auto = false;
        assert_eq!(asked.path_labels()[0], "kv f16");
        let mut f = d.clone();
        f.kv_auto = true;
        assert!(f.path_labels().is_empty());
        assert_eq!(f.kv_line(), "f32 (auto)");
        assert_eq!(d.kv_line(), "f32");
    }

    #[test]
    fn unchecked_buffers_are_written_only_when_off_and_absent_reads_as_the_driver_default() {
        let d = details();
        let j = serde_json::to_string(&d).unwrap();
        assert!(
            !j.contains("robust_buffers_off"),
            "a default run's bytes do not change: {j}"
        );
        assert!(
            !serde_json::from_str::<RunDetails>(&j)
                .unwrap()
                .robust_buffers_off
        );
        let mut off = d.clone();
        off.robust_buffers_off = true;
        let jo = serde_json::to_string(&off).unwrap();
        assert!(jo.contains("\"robust_buffers_off\":true"), "{jo}");
        assert_eq!(serde_json::from_str::<RunDetails>(&jo).unwrap(), off);
    }

    #[test]
    fn stage_and_level_details_round_trip_on_their_own() {
        let d = details();
        for s in &d.stages {
            let j = serde_json::to_string(s).unwrap();
            assert_eq!(&serde_json::from_str::<StageDetails>(&j).unwrap(), s);
        }
        for l in &d.levels {
            let j = serde_json::to_string(l).unwrap();
            assert_eq!(&serde_json::from_str::<LevelDetails>(&j).unwrap(), l);
        }
    }

    #[test]
    fn stage_kind_serialises_as_its_name_and_codes_follow_the_shader() {
        for (i, k) in StageKind::ALL.into_iter().enumerate() {
            assert_eq!(k.code(), i as u32);
            assert_eq!(StageKind::from_code(i as u32), Some(k));
            let j = serde_json::to_string(&k).unwrap();
            assert_eq!(j, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<StageKind>(&j).unwrap(), k);
        }
        assert_eq!(StageKind::from_code(9), None);
    }

    #[test]
    fn dispatch_and_device_kind_round_trip() {
        for d in [Dispatch::Mega, Dispatch::Multi] {
            let j = serde_json::to_string(&d).unwrap();
            assert_eq!(j, format!("\"{d}\""));
            assert_eq!(serde_json::from_str::<Dispatch>(&j).unwrap(), d);
        }
        for k in [
            DeviceKind::Discrete,
            DeviceKind::Integrated,
            DeviceKind::Virtual,
            DeviceKind::Cpu,
            DeviceKind::Other,
        ] {
            let j = serde_json::to_string(&k).unwrap();
            assert_eq!(serde_json::from_str::<DeviceKind>(&j).unwrap(), k);
        }
        assert!(DeviceKind::Cpu.is_cpu() && !DeviceKind::Discrete.is_cpu());
    }

    #[test]
    fn level_name_of_an_unknown_level_is_its_index() {
        let d = details();
        assert_eq!(d.level_name(1), "attn.l0");
        assert_eq!(d.level_name(7), "#7");
    }
}
