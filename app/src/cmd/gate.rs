//! `baro-top gate`: decode on the GPU next to the CPU reference and refuse unless every pass
//! is clean. Prints one line per pass with every mode's fail word, then a summary table.
//! Exit status: 0 all clean, 1 the gate refused, 2 could not run — also when the reader of
//! its output has gone (a closed pipe silences the lines, never the verdict).

use std::process::ExitCode;

use anyhow::Context;
use baro_engine::act::act_words;
use baro_engine::gate::{run_gate, GateConfig, GatePass, GateReport};
use baro_engine::model::Model;
use clap::Args;

use crate::args::{DispatchSet, GpuArgs, ModelArgs};

#[derive(Args, Debug)]
pub struct GateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Positions to decode, 1 up to the model's context.
    #[arg(long, default_value_t = 64, value_parser = crate::validate::positions, allow_negative_numbers = true)]
    pub steps: usize,
    /// Prompt text (encoded with BOS); after it, the reference's greedy token is fed back.
    #[arg(long, default_value = "")]
    pub prompt: String,
    /// Dispatch styles to check (both: their logits must also be bit-identical).
    #[arg(long, value_enum, default_value_t = DispatchSet::Both, alias = "modes")]
    pub dispatch: DispatchSet,
    /// Near-tie threshold on the reference's top-1/top-2 margin, a finite number >= 0.
    #[arg(long, default_value_t = 1e-3, value_parser = crate::validate::margin, allow_negative_numbers = true)]
    pub near_tie: f32,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

pub fn run(a: GateArgs) -> anyhow::Result<ExitCode> {
    // `gate | head -1`: the reader may go; the exit status must still be the verdict.
    crate::out::verdict_outlives_the_reader();
    if a.gpu.chain.is_some() {
        anyhow::bail!(
            "--chain: the gate compares one pass per submission (bench, live, run, record and serve chain passes)"
        );
    }
    if a.gpu.pass_loop == Some(true) && a.dispatch == DispatchSet::Multi {
        anyhow::bail!(
            "--pass-loop on: the multi dispatch has no pass loop (the gate checks the megakernel's with --dispatch mega or both)"
        );
    }
    let model = super::load_model(&a.model)?;
    crate::validate::positions_fit("--steps", a.steps, model.config.seq_len)?;
    let ctx = super::open_gpu(&a.gpu)?;
    let dispatches = a.dispatch.dispatches();
    let cfg = GateConfig {
        near_tie: a.near_tie,
        decoder: baro_engine::device::DecoderOptions {
            chain: 1,
            ..a.gpu
                .decoder_options(dispatches[0], a.steps, &model, ctx.info())
        },
        ..GateConfig::new(
            a.steps,
            dispatches,
            model.tokenizer.encode(a.prompt.as_bytes(), true, false),
        )
    };
    note_setup(&a, &model, &cfg);
    let mut grid_line = None;
    // The callback cannot return an error: keep the first stdout error for after the gate.
    let mut write_error: Option<std::io::Error> = None;
    let report = run_gate(&ctx, &model, &cfg, |p, d| {
        if grid_line.is_none() {
            grid_line = Some(format!(
                "grid {} x {} lanes, {} levels",
                d.grid,
                d.wg_size,
                d.levels.len()
            ));
            if let Err(e) = outln!("{}", grid_line.as_deref().unwrap_or_default()) {
                write_error.get_or_insert(e);
            }
            if let Some(why) = &d.device_clock_off {
                note!("gate: {why}");
            }
        }
        if let Err(e) = outln!("{}", pass_line(p)) {
            write_error.get_or_insert(e);
        }
    })
    .context("running the gate")?;
    if let Some(e) = write_error {
        return Err(e.into());
    }
    let ok = summary(&report, &cfg)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What the gate runs (stderr): the model, the steps, the dispatch styles, and what the
/// reference does for a rounded cache or quantised activations.
fn note_setup(a: &GateArgs, model: &Model, cfg: &GateConfig) {
    note!(
        "gate: model {} ({} layers, dim {}), {} steps, dispatch {}, KV cache {}, activations {}",
        model.source,
        model.config.n_layers,
        model.config.dim,
        a.steps,
        match a.dispatch {
            DispatchSet::Mega => "mega",
            DispatchSet::Multi => "multi",
            DispatchSet::Both => "mega and multi",
        },
        match (
            cfg.decoder.kv,
            baro_engine::kv::kv_words(cfg.decoder.kv, cfg.decoder.kv_auto)
        ) {
            (baro_engine::device::KvType::F32, w) => w,
            (k, w) => format!("{w} (the reference rounds its cache to {k} too)"),
        },
        match (
            cfg.decoder.act,
            act_words(cfg.decoder.act, cfg.decoder.act_auto)
        ) {
            (baro_engine::device::ActType::F32, w) => w,
            (_, w) => format!("{w} (the reference quantises its matvec inputs the same way)"),
        }
    );
}

/// One pass's line: every mode's token, distance and fail word, the bitwise comparison, and
/// the verdict.
fn pass_line(p: &GatePass) -> String {
    let modes: Vec<String> = p
        .modes
        .iter()
        .map(|m| {
            format!(
                "{} tok {} rel-l2 {:.1e} {}",
                m.dispatch.name(),
                m.argmax,
                m.rel_l2,
                m.fail_line
            )
        })
        .collect();
    let bw = match p.bitwise_equal {
        Some(true) => " mega==multi",
        Some(false) => " mega!=multi",
        None => "",
    };
    let verdict = if !p.failures.is_empty() {
        format!(" FAIL: {}", p.failures.join("; "))
    } else if p.near_tie {
        format!(
            " NEAR-TIE (margin {:.2e}): token comparison ends here",
            p.ref_margin
        )
    } else {
        String::new()
    };
    format!(
        "pass {:4} in {:6} ref {:6} margin {:8.4} | {}{bw}{verdict}",
        p.pos,
        p.token,
        p.ref_top1,
        p.ref_margin,
        modes.join(" | ")
    )
}

/// The summary table after the passes, ending with the verdict (and a residency hint where a
/// failure looks like an oversized grid); whether the gate passed.
fn summary(report: &GateReport, cfg: &GateConfig) -> anyhow::Result<bool> {
    let n = report.passes.len();
    let failed = report
        .passes
        .iter()
        .filter(|p| !p.failures.is_empty())
        .count();
    let max_l2 = report.max_rel_l2().unwrap_or(f64::NAN);
    let min_margin = report.min_margin().unwrap_or(f32::NAN);
    let fired = report
        .passes
        .iter()
        .flat_map(|p| &p.modes)
        .filter(|m| !m.fail.ok())
        .count();
    let bit = report
        .passes
        .iter()
        .filter_map(|p| p.bitwise_equal)
        .collect::<Vec<_>>();
    outln!()?;
    outln!("{:<28} result", "check")?;
    outln!("{:<28} {} of {} passes clean", "passes", n - failed, n)?;
    outln!(
        "{:<28} {}",
        "fail word fired",
        if fired == 0 {
            "never".to_string()
        } else {
            format!("{fired} times")
        }
    )?;
    // What the CPU reference quantised (or not): the run's resolved activation type.
    outln!(
        "{:<28} {}",
        "reference activations",
        act_words(cfg.decoder.act, cfg.decoder.act_auto)
    )?;
    outln!(
        "{:<28} {}",
        "tokens vs CPU reference",
        match report.first_token_mismatch() {
            Some(at) => format!("MISMATCH at pass {at}"),
            None if failed == 0 => "exact".to_string(),
            None => "equal where compared (other failures above)".to_string(),
        }
    )?;
    if let Some(at) = report.near_tie_at {
        outln!(
            "{:<28} near-tie at pass {at}: tokens compared up to there, other checks to the end",
            "near-tie"
        )?;
    }
    if !bit.is_empty() {
        outln!(
            "{:<28} {}/{} passes bit-identical",
            "mega == multi logits",
            bit.iter().filter(|&&b| b).count(),
            bit.len()
        )?;
    }
    if let Some(c) = &report.pass_loop {
        outln!(
            "{:<28} {}",
            "mega pass loop",
            match &c.failure {
                None if c.dispatches == c.passes => format!(
                    "not exercised: every position took its token from the host ({} passes, one dispatch each)",
                    c.passes
                ),
                None => format!(
                    "{}/{} passes bit-identical to one per submission ({} dispatches, {} passes a submission)",
                    c.equal, c.passes, c.dispatches, c.chain
                ),
                Some(f) => format!("DIFFERS: {f}"),
            }
        )?;
    }
    outln!(
        "{:<28} {max_l2:.2e} (bound {:.0e}{})",
        "max logits rel-L2 vs ref",
        cfg.max_rel_l2,
        if cfg.decoder.act == baro_engine::device::ActType::Q8 {
            ", or per pass twice the q8 reference's distance to the f32 path"
        } else {
            ""
        }
    )?;
    outln!("{:<28} {min_margin:.4}", "min reference margin")?;
    let ok = report.ok();
    outln!("{:<28} {}", "GATE", if ok { "PASS" } else { "REFUSED" })?;
    // Once, after the verdict: the first failure that looks like an oversized grid.
    if let Some(h) = report
        .passes
        .iter()
        .flat_map(|p| &p.modes)
        .find_map(|m| m.fail.residency_hint())
    {
        outln!("{:<28} {h}", "hint")?;
    }
    Ok(ok)
}
