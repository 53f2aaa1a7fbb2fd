//! llama2.c checkpoint import: the legacy (version 0) `export.py` format that run.c reads.
//!
//! Little-endian. A header of 7 i32 (`dim, hidden_dim, n_layers, n_heads, n_kv_heads,
//! vocab_size, seq_len`; a negative `vocab_size` means the classifier is stored separately),
//! then f32 tensors, each kind stored for all layers in a row: token embedding, rms_att, wq, wk,
//! wv, wo, rms_ffn, w1, w2, w3, rms_final, the unused freq_cis_real and freq_cis_imag tables
//! (`seq_len * head_size / 2` floats each) and, when untied, the classifier.
//!
//! The file must be exactly that size. A file without the two freq_cis tables is accepted too
//! (run.c never reads them), but nothing else: no trailing bytes, no short files.
//! llama2.c's RoPE already rotates adjacent pairs, so wq and wk are taken as they are.

use crate::model::types::{Config, Layer, Tensor, Weights};
use crate::{Error, Result};

const HEADER_FIELDS: [&str; 7] = [
    "dim",
    "hidden_dim",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "vocab_size",
    "seq_len",
];
/// The u32 that export.py's versioned formats (1: f32, 2: Q8_0) start with: "ak42".
const VERSIONED_MAGIC: u32 = 0x616b_3432;
/// The u32 magics of llama.cpp's files from before GGUF (models and LoRA adapters).
const PRE_GGUF_MAGICS: [(u32, &str); 4] = [
    (0x6767_6d6c, "ggml"),
    (0x6767_6d66, "ggmf"),
    (0x6767_6a74, "ggjt"),
    (0x6767_6c61, "ggla"),
];
/// Bytes of the header (7 little-endian i32).
pub const HEADER_BYTES: usize = 4 * HEADER_FIELDS.len();

/// A llama2.c model: its shape and f32 weights.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// Shape, with `rope_theta` 10000 and `norm_eps` 1e-5 as run.c uses.
    pub config: Config,
    /// The weights, named in GGUF convention; `output` is `None` when tied to the embedding.
    pub weights: Weights,
}

fn err(m: String) -> Error {
    Error::Llama2c(format!("checkpoint: {m}"))
}

/// What a checkpoint's header says: its shape and the exact file sizes it allows.
#[derive(Clone, Debug)]
pub struct Header {
    /// The 7 header fields as stored.
    fields: [i32; 7],
    /// The shape.
    pub config: Config,
    /// The classifier is the embedding (positive `vocab_size`).
    pub shared: bool,
    /// Floats of each body section in file order.
    body: [u128; 11],
    /// Floats of one freq_cis table.
    freq: u128,
}

impl Header {
    /// Parse and validate the 28-byte header at the start of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Header> {
        if bytes.len() < HEADER_BYTES {
            return Err(err(format!(
                "file is {} bytes, shorter than the {HEADER_BYTES}-byte header",
                bytes.len()
            )));
        }
        let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        // llama2.c's export.py versions 1 and 2 start with the magic "ak42" and a version;
        // read as a legacy header they would be a 1.6-billion-wide model.
        if magic == VERSIONED_MAGIC {
            let v = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
            return Err(err(format!(
                "the file starts with llama2.c's magic \"ak42\" (export.py version {v} at byte 0x4): \
                 run.c reads only the legacy version-0 export (export.py --version 0), and so does baro-top"
            )));
        }
        if let Some((_, name)) = PRE_GGUF_MAGICS.iter().find(|(m, _)| *m == magic) {
            return Err(err(format!(
                "the file starts with the magic '{name}' of llama.cpp's format from before GGUF: \
                 convert it to GGUF (baro-top reads GGUF and llama2.c version-0 checkpoints)"
            )));
        }
        let mut h = [0i32; 7];
        for (i, (v, c)) in h.iter_mut().zip(bytes.chunks_exact(4)).enumerate() {
            *v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let at = 4 * i;
            let name = HEADER_FIELDS[i];
            if i == 5 {
                // Negative = untied classifier of |vocab_size| tokens; i32::MIN has no magnitude.
                if *v == 0 || *v == i32::MIN {
                    return Err(err(format!(
                        "header field {name} at byte {at:#x} is {v}: its magnitude must be from 1 to {} \
                         (the sign only says whether the classifier is stored separately)",
                        i32::MAX
                    )));
                }
            } else if *v <= 0 {
                return Err(err(format!(
                    "header field {name} at byte {at:#x} is {v}, must be positive"
                )));
            }
        }
        let u = |v: i32| v.unsigned_abs() as usize;
        let config = Config {
            dim: u(h[0]),
            hidden_dim: u(h[1]),
            n_layers: u(h[2]),
            n_heads: u(h[3]),
            n_kv_heads: u(h[4]),
            vocab_size: u(h[5]),
            seq_len: u(h[6]),
            rope_theta: 10000.0,
            norm_eps: 1e-5,
            arch: crate::model::types::Arch::Llama,
            head_dim: None,
            rope_scale: 1.0,
        };
        config
            .validate()
            .map_err(|e| err(format!("header {}: {e}", describe(&h))))?;
        // Sizes in u128: validate() bounds every factor by 2^20, so nothing here overflows.
        let w = |v: usize| v as u128;
        let (dim, hidden, layers, vocab) = (
            w(config.dim),
            w(config.hidden_dim),
            w(config.n_layers),
            w(config.vocab_size),
        );
        let kv_dim = w(config.kv_dim());
        let body = [
            vocab * dim,
            layers * dim,
            layers * dim * dim,
            layers * kv_dim * dim,
            layers * kv_dim * dim,
            layers * dim * dim,
            layers * dim,
            layers * hidden * dim,
            layers * dim * hidden,
            layers * hidden * dim,
            dim,
        ];
        Ok(Header {
            fields: h,
            freq: w(config.seq_len) * (w(config.head_size()) / 2),
            shared: h[5] > 0,
            config,
            body,
        })
    }

    fn body_floats(&self) -> u128 {
        self.body.iter().sum()
    }

    fn classifier_floats(&self) -> u128 {
        if self.shared {
            0
        } else {
            self.config.vocab_size as u128 * self.config.dim as u128
        }
    }

    /// File size in bytes with the two freq_cis tables (the larger of the two allowed sizes).
    pub fn size_with_freq(&self) -> u128 {
        HEADER_BYTES as u128 + 4 * (self.body_floats() + 2 * self.freq + self.classifier_floats())
    }

    /// File size in bytes without the freq_cis tables.
    pub fn size_without_freq(&self) -> u128 {
        HEADER_BYTES as u128 + 4 * (self.body_floats() + self.classifier_floats())
    }

    /// Check a file length against the header; returns the freq_cis floats the file holds.
    pub fn check_len(&self, len: u128) -> Result<u128> {
        let (with_freq, without_freq) = (self.size_with_freq(), self.size_without_freq());
        if len == with_freq {
            Ok(2 * self.freq)
        } else if len == without_freq {
            Ok(0)
        } else {
            Err(err(format!(
                "header {} needs a file of {with_freq} bytes ({without_freq} without the \
                 freq_cis tables), this one is {len} bytes{}",
                describe(&self.fields),
                if len > with_freq {
                    ": trailing bytes"
                } else {
                    ": truncated"
                }
            )))
        }
    }
}

/// The header fields by name, for messages.
fn describe(h: &[i32; 7]) -> String {
    HEADER_FIELDS
        .iter()
        .zip(h)
        .map(|(n, v)| format!("{n} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parse a llama2.c legacy checkpoint.
pub fn read_checkpoint(bytes: &[u8]) -> Result<Checkpoint> {
    let header = Header::parse(bytes)?;
    let freq_floats = header.check_len(bytes.len() as u128)?;
    let Header {
        config,
        shared,
        body,
        ..
    } = header;
    let w = |v: usize| v as u128;
    let (dim, vocab) = (w(config.dim), w(config.vocab_size));
    let body_floats: u128 = body.iter().sum();

    // Sizes are checked, so every slice below is in range and fits usize.
    let floats = |start: u128, n: u128| -> Vec<f32> {
        let s = HEADER_BYTES + 4 * start as usize;
        bytes[s..s + 4 * n as usize]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    // Start (in floats) of each section.
    let mut starts = [0u128; 11];
    for i in 1..starts.len() {
        starts[i] = starts[i - 1] + body[i - 1];
    }
    let (d, hd, kv) = (config.dim, config.hidden_dim, config.kv_dim());
    // Tensor `l` of section `sec`, `rows x cols`.
    let tensor = |name: String, sec: usize, l: usize, rows: usize, cols: usize| {
        let n = w(rows * cols);
        Tensor::from_f32(name, rows, cols, &floats(starts[sec] + w(l) * n, n))
    };
    let mut layer_list = Vec::with_capacity(config.n_layers);
    for l in 0..config.n_layers {
        let name = |s: &str| format!("blk.{l}.{s}.weight");
        layer_list.push(Layer {
            attn_norm: tensor(name("attn_norm"), 1, l, 1, d)?,
            wq: tensor(name("attn_q"), 2, l, d, d)?,
            wk: tensor(name("attn_k"), 3, l, kv, d)?,
            wv: tensor(name("attn_v"), 4, l, kv, d)?,
            wo: tensor(name("attn_output"), 5, l, d, d)?,
            ffn_norm: tensor(name("ffn_norm"), 6, l, 1, d)?,
            w_gate: tensor(name("ffn_gate"), 7, l, hd, d)?,
            w_down: tensor(name("ffn_down"), 8, l, d, hd)?,
            w_up: tensor(name("ffn_up"), 9, l, hd, d)?,
            q_bias: None,
            k_bias: None,
            v_bias: None,
            q_norm: None,
            k_norm: None,
        });
    }
    let output = if shared {
        None
    } else {
        let start = body_floats + freq_floats;
        Some(Tensor::from_f32(
            "output.weight",
            config.vocab_size,
            d,
            &floats(start, vocab * dim),
        )?)
    };
    let weights = Weights {
        token_embd: tensor("token_embd.weight".into(), 0, 0, config.vocab_size, d)?,
        rope_freqs: None,
        layers: layer_list,
        output_norm: tensor("output_norm.weight".into(), 10, 0, 1, d)?,
        output,
    };
    weights.validate(&config).map_err(|e| err(e.to_string()))?;
    Ok(Checkpoint { config, weights })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STORIES: &[u8] = include_bytes!("../models/stories260K/stories260K.bin");

    fn f32_at(bytes: &[u8], float_index: usize) -> f32 {
        let s = HEADER_BYTES + 4 * float_index;
        f32::from_le_bytes([bytes[s], bytes[s + 1], bytes[s + 2], bytes[s + 3]])
    }

    fn with_header(h: [i32; 7], floats: usize) -> Vec<u8> {
        let mut b: Vec<u8> = h.iter().flat_map(|v| v.to_le_bytes()).collect();
        b.extend((0..floats).flat_map(|i| (i as f32).to_le_bytes()));
        b
    }

    fn header_err(h: [i32; 7]) -> String {
        read_checkpoint(&with_header(h, 0))
            .expect_err("bad header")
            .to_string()
    }

    #[test]
    fn reads_stories260k() {
        let c = read_checkpoint(STORIES).expect("stories260K.bin parses");
        let cfg = &c.config;
        assert_eq!(
            (
                cfg.dim,
                cfg.hidden_dim,
                cfg.n_layers,
                cfg.n_heads,
                cfg.n_kv_heads,
                cfg.vocab_size,
                cfg.seq_len
            ),
            (64, 172, 5, 8, 4, 512, 512)
        );
        assert_eq!((cfg.rope_theta, cfg.norm_eps), (10000.0, 1e-5));
        let w = &c.weights;
        assert!(w.output.is_none(), "stories260K ties the classifier");
        let names: Vec<&str> = w.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 1 + 5 * 9 + 1);
        assert_eq!(
            &names[..4],
            [
                "token_embd.weight",
                "blk.0.attn_norm.weight",
                "blk.0.attn_q.weight",
                "blk.0.attn_k.weight"
            ]
        );
        assert_eq!(names[9], "blk.0.ffn_up.weight");
        assert_eq!(names[45], "blk.4.ffn_up.weight");
        assert_eq!(names[46], "output_norm.weight");
        assert_eq!((w.layers[2].wk.rows, w.layers[2].wk.cols), (32, 64));
        assert_eq!(
            (w.layers[2].w_down.rows, w.layers[2].w_down.cols),
            (64, 172)
        );

        // Values come from the right offsets: section starts in floats.
        let (d, h, kv, v, l) = (64usize, 172usize, 32usize, 512usize, 5usize);
        let emb = w.token_embd.to_f32();
        assert_eq!(emb[0], f32_at(STORIES, 0));
        assert_eq!(emb[v * d - 1], f32_at(STORIES, v * d - 1));
        let rms_att = v * d;
        let wq = rms_att + l * d;
        let wk = wq + l * d * d;
        let wv = wk + l * kv * d;
        let wo = wv + l * kv * d;
        let rms_ffn = wo + l * d * d;
        let w1 = rms_ffn + l * d;
        let w2 = w1 + l * h * d;
        let w3 = w2 + l * d * h;
        let rms_final = w3 + l * h * d;
        assert_eq!(
            w.layers[3].attn_norm.to_f32()[5],
            f32_at(STORIES, rms_att + 3 * d + 5)
        );
        assert_eq!(
            w.layers[1].wq.to_f32()[70],
            f32_at(STORIES, wq + d * d + 70)
        );
        assert_eq!(w.layers[4].wk.to_f32()[0], f32_at(STORIES, wk + 4 * kv * d));
        assert_eq!(w.layers[0].wv.to_f32()[7], f32_at(STORIES, wv + 7));
        assert_eq!(
            w.layers[2].wo.to_f32()[9],
            f32_at(STORIES, wo + 2 * d * d + 9)
        );
        assert_eq!(
            w.layers[4].ffn_norm.to_f32()[63],
            f32_at(STORIES, rms_ffn + 4 * d + 63)
        );
        assert_eq!(
            w.layers[1].w_gate.to_f32()[3],
            f32_at(STORIES, w1 + h * d + 3)
        );
        assert_eq!(
            w.layers[1].w_down.to_f32()[3],
            f32_at(STORIES, w2 + d * h + 3)
        );
        assert_eq!(
            w.layers[4].w_up.to_f32()[h * d - 1],
            f32_at(STORIES, rms_final - 1)
        );
        assert_eq!(w.output_norm.to_f32()[0], f32_at(STORIES, rms_final));
        // The freq_cis tables (512 x 4 floats each) fill the rest of the file.
        assert_eq!(
            STORIES.len(),
            HEADER_BYTES + 4 * (rms_final + d + 2 * 512 * 4)
        );
    }

    #[test]
    fn size_must_be_exact() {
        for n in [0, 4, 27, 28, 1000, STORIES.len() - 4, STORIES.len() - 1] {
            let e = read_checkpoint(&STORIES[..n])
                .expect_err("truncated")
                .to_string();
            assert!(
                e.contains("llama2.c") && (e.contains("truncated") || e.contains("header")),
                "{n}: {e}"
            );
        }
        let mut long = STORIES.to_vec();
        long.extend_from_slice(&[0; 4]);
        let e = read_checkpoint(&long).expect_err("trailing").to_string();
        assert!(e.contains("trailing bytes"), "{e}");
        long.truncate(STORIES.len() + 1);
        assert!(read_checkpoint(&long).is_err());
        // Without the two freq_cis tables (run.c never reads them) the file is still usable.
        let short = &STORIES[..STORIES.len() - 2 * 512 * 4 * 4];
        let c = read_checkpoint(short).expect("no freq_cis tables");
        assert_eq!(
            c.weights.output_norm.to_f32(),
            read_checkpoint(STORIES)
                .expect("ok")
                .weights
                .output_norm
                .to_f32()
        );
    }

    #[test]
    fn header_fields_are_validated() {
        let good = [64, 172, 5, 8, 4, 512, 512];
        for i in 0..7 {
            let mut h = good;
            h[i] = 0;
            let e = header_err(h);
            assert!(e.contains(HEADER_FIELDS[i]), "{e}");
            if i != 5 {
                h[i] = -3;
                let e = header_err(h);
                assert!(
                    e.contains(&format!("{} at byte {:#x} is -3", HEADER_FIELDS[i], 4 * i)),
                    "{e}"
                );
            }
        }
        let mut h = good;
        h[5] = i32::MIN;
        assert!(header_err(h).contains("vocab_size"));
        let e = header_err([64, 172, 5, 7, 7, 512, 512]);
        assert!(e.contains("not a multiple of n_heads"), "{e}");
        let e = header_err([64, 172, 5, 8, 3, 512, 512]);
        assert!(e.contains("n_kv_heads"), "{e}");
        let e = header_err([24, 172, 5, 8, 8, 512, 512]);
        assert!(e.contains("odd"), "{e}");
        // Huge shapes are refused before anything is allocated.
        assert!(
            header_err([1 << 30, 1 << 30, 1 << 30, 1, 1, i32::MAX, i32::MAX]).contains("larger")
        );
        assert!(
            header_err([1 << 20, 1 << 20, 1 << 20, 2, 1, -(1 << 20), 1 << 20])
                .contains("needs a file of")
        );
        // The good header alone is a truncated file.
        assert!(header_err(good).contains("truncated"));
    }

    #[test]
    fn versioned_exports_and_pre_gguf_files_are_refused_by_their_magic_not_read_as_huge_legacy_headers(
    ) {
        // export.py --version 1: u32 magic "ak42", i32 version, then the parameters.
        for version in [1, 2] {
            let e = header_err([0x616b_3432, version, 64, 172, 5, 8, 4]);
            assert!(
                e.contains("\"ak42\"") && e.contains(&format!("version {version}")),
                "{e}"
            );
            assert!(!e.contains("larger than"), "{e}");
        }
        // Nor is a llama.cpp file from before GGUF (magic written as a little-endian u32).
        for (magic, name) in [(0x6767_6a74u32, "'ggjt'"), (0x6767_6d6c, "'ggml'")] {
            let e = header_err([magic as i32, 3, 64, 172, 5, 8, 4]);
            assert!(e.contains(name) && e.contains("GGUF"), "{e}");
        }
    }

    #[test]
    fn untied_classifier_follows_the_freq_tables() {
        // dim 8, hidden 4, 1 layer, 2 heads (head 4), 1 kv head (kv 4), vocab 3, seq 2.
        let (d, h, kv, v, seq) = (8usize, 4usize, 4usize, 3usize, 2usize);
        let body = v * d + d + d * d + 2 * kv * d + d * d + d + 3 * h * d + d;
        let freq = 2 * seq * (d / 2) / 2;
        let hdr = [8, 4, 1, 2, 1, -3, 2];
        let c = read_checkpoint(&with_header(hdr, body + freq + v * d)).expect("untied");
        let out = c
            .weights
            .output
            .as_ref()
            .expect("untied classifier")
            .to_f32();
        assert_eq!(c.weights.classifier().name, "output.weight");
        assert_eq!(out[0], (body + freq) as f32);
        assert_eq!(out[v * d - 1], (body + freq + v * d - 1) as f32);
        assert_eq!(c.weights.token_embd.to_f32()[1], 1.0);
        assert_eq!(c.weights.output_norm.to_f32()[0], (body - d) as f32);
        // Without the freq tables the classifier follows the body directly.
        let c = read_checkpoint(&with_header(hdr, body + v * d)).expect("untied, no freq");
        assert_eq!(
            c.weights.output.as_ref().expect("untied").to_f32()[0],
            body as f32
        );
        // Missing classifier: neither size matches.
        assert!(read_checkpoint(&with_header(hdr, body + freq)).is_err());
        assert!(read_checkpoint(&with_header(hdr, body + freq + v * d - 1)).is_err());
        // The same layout tied has no classifier.
        let tied = [8, 4, 1, 2, 1, 3, 2];
        let c = read_checkpoint(&with_header(tied, body + freq)).expect("tied");
        assert!(c.weights.output.is_none());
    }
}
