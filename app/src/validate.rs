//! One validation per command-line parameter, shared by every subcommand that takes it.
//!
//! Each `value_parser` here rejects what baro-top cannot honour, saying what the limit is and
//! why; clap puts the flag and the value in front (`invalid value '-1' for '--temp <TEMP>'`)
//! and exits with status 2. Nothing is clamped or silently replaced. Limits that depend on the
//! model or the device (positions vs the model's context, workgroup size vs the device) are
//! checked by the functions at the bottom, once the model or device is known.

use anyhow::bail;

/// Largest grid the decoder dispatches (Vulkan's guaranteed `maxComputeWorkGroupCount[0]`).
pub const MAX_GRID: u32 = 65535;

fn parse<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.trim().parse().map_err(|_| format!("'{s}' is not {what}"))
}

/// A whole number in `min..=max`; `why` says what the bound is for.
fn whole(s: &str, min: u64, max: u64, why: &str) -> Result<u64, String> {
    let v: i128 = parse(s, "a whole number")?;
    if v < i128::from(min) {
        return Err(format!("{v} is too small: must be at least {min} ({why})"));
    }
    if v > i128::from(max) {
        return Err(format!("{v} is too large: must be at most {max} ({why})"));
    }
    Ok(v as u64)
}

/// [`whole`] within `min..=max` of u32 (so the value fits).
fn whole_u32(s: &str, min: u32, max: u32, why: &str) -> Result<u32, String> {
    whole(s, min.into(), max.into(), why).map(|v| v as u32)
}

/// A number read as run.c reads `-t` and `-p` (`float v = atof(s)`): the decimal rounded to
/// the nearest double, then that double to the nearest float. Parsing straight to f32 rounds
/// once and can give the neighbouring float (`1.00000005960464478` is 1.0000001 directly,
/// 1.0 through the double), so the same flag would sample another text than run.c.
fn c_float(s: &str) -> Result<f32, String> {
    parse::<f64>(s, "a number").map(|v| v as f32)
}

/// `--temp`: a finite number >= 0 (0 = greedy).
pub fn temperature(s: &str) -> Result<f32, String> {
    let v = c_float(s)?;
    if !v.is_finite() || v < 0.0 {
        // The text as given: a value past the float's range reads `inf` once converted.
        let shown = if v.is_infinite() && !s.trim().to_ascii_lowercase().contains("inf") {
            format!("{} (past the largest float)", s.trim())
        } else {
            v.to_string()
        };
        return Err(format!(
            "{shown} is not a temperature: must be a finite number >= 0 (0 = greedy argmax; logits are divided by it)"
        ));
    }
    Ok(v)
}

/// `--topp`: a probability in [0, 1] (0 or 1 = plain sampling, no nucleus).
pub fn top_p(s: &str) -> Result<f32, String> {
    let v = c_float(s)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!(
            "{v} is not a top-p: must be a probability from 0 to 1 (the nucleus keeps the tokens whose probabilities sum to it; 0 or 1 = no nucleus)"
        ));
    }
    Ok(v)
}

/// `--seed`: a whole number >= 0; 0 = the current time (see [`resolve_seed`]).
pub fn seed(s: &str) -> Result<u64, String> {
    whole(s, 0, u64::MAX, "a 64-bit RNG seed; 0 = the current time")
}

/// `--near-tie`: a finite margin >= 0.
pub fn margin(s: &str) -> Result<f32, String> {
    let v: f32 = parse(s, "a number")?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "{v} is not a margin: must be a finite number >= 0 (a top-1/top-2 logit gap)"
        ));
    }
    Ok(v)
}

/// `bench --depth`: positions of context before every prompt, 0 or more; the model's context
/// bounds it with the prompt and the generated tokens (checked when the prompts are read).
pub fn depth(s: &str) -> Result<usize, String> {
    whole(
        s,
        0,
        1 << 20,
        "positions of context before the prompt; no model has more than 2^20",
    )
    .map(|v| v as usize)
}

/// A count of positions (`gate --steps`, `run --ctx`, `bench --tokens`): at least 1; the upper
/// bound is the model's context, checked by [`positions_fit`].
pub fn positions(s: &str) -> Result<usize, String> {
    whole(
        s,
        1,
        1 << 20,
        "a decode needs at least one position; no model has more than 2^20",
    )
    .map(|v| v as usize)
}

/// A count of repetitions (`bench --runs`, `run --passes`): at least 1.
pub fn repetitions(s: &str) -> Result<u64, String> {
    whole(s, 1, u64::MAX, "nothing to measure or show with none")
}

/// The largest model dimension baro-top supports (the engine's `Config::validate` cap).
pub const MAX_MODEL_DIM: u64 = 1 << 20;

/// `model gen --dim/--hidden/--layers/--heads/--kv-heads/--vocab/--seq/--head-dim`: a shape
/// size, 1..=2^20 (the engine refuses any larger shape; the memory a shape needs is checked
/// once it is known).
pub fn model_dim(s: &str) -> Result<usize, String> {
    whole(
        s,
        1,
        MAX_MODEL_DIM,
        "a model dimension: at least 1, at most 2^20 as the loader",
    )
    .map(|v| v as usize)
}

/// `model gen --rope-scale`: a linear RoPE scaling factor, finite, 1/1024..=1024.
pub fn rope_scale(s: &str) -> Result<f32, String> {
    let v: f32 = parse(s, "a number")?;
    if !(v.is_finite() && (1.0 / 1024.0..=1024.0).contains(&v)) {
        return Err(format!(
            "{v} is out of range: a RoPE scale is 1/1024..=1024"
        ));
    }
    Ok(v)
}

/// `model gen --margin-steps`: greedy steps of the CPU reference, 0..=4096 (0 = skip).
pub fn margin_steps(s: &str) -> Result<usize, String> {
    whole(
        s,
        0,
        4096,
        "greedy steps on the CPU reference; 0 skips them",
    )
    .map(|v| v as usize)
}

/// `generate -n`: positions, prompt included, any whole number from 0; 0 or more than the
/// model's context is the context, as run.c clamps it (`generate::effective_steps`).
pub fn steps(s: &str) -> Result<usize, String> {
    whole(
        s,
        0,
        u64::MAX,
        "positions; 0 or more than the model's context = the context",
    )
    .map(|v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// Hidden `--inject-stall-wg`: a workgroup index, 0..=65534 (below the largest grid).
pub fn stall_wg(s: &str) -> Result<u32, String> {
    whole_u32(
        s,
        0,
        MAX_GRID - 1,
        "a workgroup index of a grid of at most 65535",
    )
}

/// Hidden `--inject-producer-panic`: passes before the injected panic, 1..=1,000,000.
pub fn inject_panic_after(s: &str) -> Result<u64, String> {
    whole(s, 1, 1_000_000, "passes forwarded before the test panic")
}

/// `--grid`: 1 ..= 65535 workgroups.
pub fn grid(s: &str) -> Result<u32, String> {
    whole_u32(
        s,
        1,
        MAX_GRID,
        "workgroups in a pass: at least one; Vulkan guarantees dispatches of 65535",
    )
}

/// `--probe-max`: the largest grid the residency probe tries, 1 ..= 65535.
pub fn probe_max(s: &str) -> Result<u32, String> {
    grid(s)
}

/// `--wg-size`: at least 1 lane; the device's limit is checked by [`wg_size_fits`].
pub fn wg_size(s: &str) -> Result<u32, String> {
    whole_u32(s, 1, u32::MAX, "lanes in a workgroup")
}

/// `--chain`: passes per submission, 1..=64 (the engine's `MAX_CHAIN`).
pub fn chain(s: &str) -> Result<u32, String> {
    whole_u32(
        s,
        1,
        baro_engine::device::MAX_CHAIN,
        "passes per submission",
    )
}

/// `--ring-every`: stamp every N-th pass, 1..=1,000,000.
pub fn ring_every(s: &str) -> Result<u32, String> {
    whole_u32(s, 1, 1_000_000, "passes between ring frames")
}

/// `--rows`: weight rows a team streams at once, 1, 2 or 4.
pub fn rows(s: &str) -> Result<u32, String> {
    match whole(s, 1, 4, "rows a team streams at once")? {
        v @ (1 | 2 | 4) => Ok(v as u32),
        v => Err(format!("{v}: a team streams 1, 2 or 4 rows at once")),
    }
}

/// `--idle-wait-ns`: ns an idle workgroup of an attention level waits before it polls,
/// 0..=100000 (0: none).
pub fn idle_wait_ns(s: &str) -> Result<u32, String> {
    whole_u32(
        s,
        0,
        baro_engine::device::MAX_IDLE_WAIT_NS,
        "ns of idle wait",
    )
}

/// `--prefetch-mib`: MiB of weights read ahead into L2 during the attention levels,
/// 0..=4096 (0: none).
pub fn prefetch_mib(s: &str) -> Result<u32, String> {
    whole_u32(
        s,
        0,
        baro_engine::device::MAX_PREFETCH_MIB,
        "MiB read ahead",
    )
}

/// `--prefetch-skew`: attention levels later whose stream the read-ahead reads instead
/// (a control), 0..=64.
pub fn prefetch_skew(s: &str) -> Result<u32, String> {
    whole_u32(
        s,
        0,
        baro_engine::device::MAX_PREFETCH_SKEW,
        "attention levels of skew",
    )
}

/// `--kv`: how the KV cache stores keys and values, exactly `auto`, `f32` or `f16` (no other
/// spelling, no case folding).
pub fn kv(s: &str) -> Result<baro_engine::kv::KvChoice, String> {
    baro_engine::kv::KvChoice::parse(s)
}

/// `--robust-buffers`: the driver's bounds checks on the decoder's buffers, exactly `default`
/// or `off`.
pub fn robust_buffers(s: &str) -> Result<baro_engine::device::RobustBuffers, String> {
    baro_engine::device::RobustBuffers::parse(s)
}

/// `--act`: what quantised matrices multiply against, exactly `auto`, `f32` or `q8` (no other
/// spelling, no case folding).
pub fn act(s: &str) -> Result<baro_engine::act::ActChoice, String> {
    baro_engine::act::ActChoice::parse(s)
}

/// `--pass-loop`: exactly `on` or `off` (no other spelling, no case folding).
pub fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{s:?}: expected on or off")),
    }
}

/// `--spin-timeout-ms`: 1 ms to 2000 ms. The kernel compares the low 32 bits of the device
/// clock (ns), which wrap every 4.29 s; a difference is only unambiguous below half of that.
pub fn spin_timeout_ms(s: &str) -> Result<u64, String> {
    whole(
        s,
        1,
        2000,
        "a spin needs time to wait, and the kernel's 32-bit device clock (ns) bounds it at 2 s",
    )
}

/// `--watchdog-ms`: the host's limit on one pass, 100 ms to one hour (default: automatic,
/// the expected pass time plus the spin timeout plus 1 s).
pub fn watchdog_ms(s: &str) -> Result<u64, String> {
    whole(
        s,
        100,
        // The same hour replay takes as the longest pass any run records.
        crate::ui::replay::MAX_PACED_PASS_NS / 1_000_000,
        "the host watchdog on one pass: long enough for a pass, short enough to notice a hang",
    )
}

/// Seed 0 means "the current time" (run.c's rule), for every command that samples.
pub fn resolve_seed(seed: u64) -> u64 {
    if seed != 0 {
        return seed;
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs());
    // xorshift's state must not be 0: that would make every draw 0.
    t.max(1)
}

/// `n` positions (flag `flag`) must fit the model's context of `seq_len` positions.
pub fn positions_fit(flag: &str, n: usize, seq_len: usize) -> anyhow::Result<()> {
    if n > seq_len {
        bail!("{flag} {n} is larger than the model's context of {seq_len} positions (the KV cache holds one entry per position)");
    }
    Ok(())
}

/// `--wg-size` against the device it will run on.
pub fn wg_size_fits(wg: u32, info: &baro_engine::device::DeviceInfo) -> anyhow::Result<()> {
    let sg = info.subgroup_size.max(1);
    let max = baro_engine::device::max_wg_size(info);
    if wg > max || !wg.is_multiple_of(sg) {
        bail!(
            "--wg-size {wg}: {} takes a multiple of its subgroup size {sg} up to {max} lanes (at most 60 subgroups for the kernel's reductions, device limit {})",
            info.name,
            info.max_wg
        );
    }
    Ok(())
}

/// `--speed`: a finite replay speed factor, 0 (as fast as possible) or 0.0001 up to 1000
/// (slow motion of 10,000× at most: a smaller factor stretches a pass of a recording into
/// hours, 1e-300 into forever).
pub fn speed(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !v.is_finite() || !(v == 0.0 || (0.0001..=1000.0).contains(&v)) {
        return Err(format!(
            "'{s}': the replay speed is 0 (as fast as possible) or a factor from 0.0001 to 1000"
        ));
    }
    Ok(v)
}

/// `live --synthetic --rate`: passes per second, 0.1 to 10,000 (below, the first pass would
/// not come for minutes; above, faster than any decoder and than the dashboard can show).
pub fn rate(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !v.is_finite() || !(0.1..=10_000.0).contains(&v) {
        return Err(format!(
            "'{s}': the synthetic rate is 0.1 to 10000 passes per second"
        ));
    }
    Ok(v)
}

/// The largest grid the synthetic producers draw (`bench ui --workgroups`, `live --synthetic
/// --grid`): every pass holds spans for each workgroup and stage, and the dashboard keeps a
/// history of passes; a real grid is at most ≈ 1,100 (an H200's).
pub const MAX_SYNTHETIC_GRID: u32 = 4096;

/// `bench ui --workgroups`: 1 ..= [`MAX_SYNTHETIC_GRID`].
pub fn synthetic_grid(s: &str) -> Result<u32, String> {
    whole_u32(
        s,
        1,
        MAX_SYNTHETIC_GRID,
        "synthetic workgroups: each pass holds every workgroup's spans",
    )
}

/// `export --span-budget`: at least 1 span.
pub fn span_budget(s: &str) -> Result<u64, String> {
    whole(s, 1, u64::MAX / 2, "workgroup spans a trace keeps at most")
}

/// `--spans-every`: keep the spans of one pass in N, N from 1 (every pass).
pub fn spans_every(s: &str) -> Result<u64, String> {
    whole(
        s,
        1,
        u32::MAX.into(),
        "one pass in N keeps its spans; 1 keeps every pass's",
    )
}

/// `bench rec --block`: at least 10 passes per block (a switch's transition is excluded from
/// each block, so a shorter block leaves too few measured passes).
pub fn rec_block(s: &str) -> Result<u64, String> {
    whole(
        s,
        10,
        u64::MAX / 4,
        "passes per block: the first of each are a switch's transition",
    )
}

/// `--metrics ADDR`: `IP:PORT`, with a message that says so.
pub fn addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not IP:PORT (e.g. 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)")
    })
}

/// `--check`: which passes the shadow CPU reference judges: `auto`, `all`, `off`, or the
/// first N (at least 1) positions of every sequence.
pub fn check(v: &str) -> Result<baro_engine::session::Check, String> {
    use baro_engine::session::Check;
    use baro_engine::telemetry::CheckPlan;
    match v {
        "auto" => Ok(Check::Auto),
        "all" => Ok(Check::Plan(CheckPlan::All)),
        "off" => Ok(Check::Off),
        n => match n.parse::<u32>() {
            Ok(p) if p >= 1 => Ok(Check::Plan(CheckPlan::Prefix { positions: p })),
            _ => Err(format!(
                "'{n}': auto, all, off, or a number of positions per sequence (at least 1)"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robust_buffers_takes_exactly_default_and_off() {
        use baro_engine::device::RobustBuffers;
        assert_eq!(robust_buffers("default"), Ok(RobustBuffers::DeviceDefault));
        assert_eq!(robust_buffers("off"), Ok(RobustBuffers::Off));
        for bad in ["", "on", "OFF", "Default", "none", "0"] {
            let e = robust_buffers(bad).expect_err("accepted");
            assert!(e.contains("one of default, off"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn generate_steps_take_any_whole_number_from_0_and_leave_the_clamp_to_the_context() {
        assert_eq!(steps("0"), Ok(0));
        assert_eq!(steps("1048577"), Ok(1_048_577));
        assert_eq!(steps("18446744073709551615"), Ok(usize::MAX));
        for bad in ["-1", "18446744073709551616", "1.5", "", "ten"] {
            assert!(steps(bad).is_err(), "{bad}");
        }
        assert_eq!(baro_engine::generate::effective_steps(usize::MAX, 512), 512);
    }

    #[test]
    fn on_off_takes_exactly_on_and_off() {
        assert_eq!(on_off("on"), Ok(true));
        assert_eq!(on_off("off"), Ok(false));
        for bad in ["On", "1", "true", "", " on"] {
            assert!(on_off(bad).expect_err(bad).contains("on or off"), "{bad}");
        }
    }

    #[test]
    fn temperature_and_top_p_round_through_a_double_as_run_c_atof_does() {
        // Each decimal sits just past the midpoint between two floats: straight to f32 it
        // rounds away from run.c's value, through the double it lands on the midpoint and
        // rounds to even, as `float t = atof(s)` does.
        assert_eq!(temperature("1.00000005960464478"), Ok(1.0));
        assert_eq!(temperature("0.50000002980232239"), Ok(0.5));
        assert_eq!(top_p("0.99999997019767761"), Ok(1.0));
        assert_eq!(top_p("0.90000000596046448"), Ok(0.9));
        // The range is checked on the float run.c uses: 1.00000001 is 1.
        assert_eq!(top_p("1.00000001"), Ok(1.0));
        assert_eq!(temperature("1e-50"), Ok(0.0));
        // Overflowing the float is not a temperature, and the message shows what was given.
        let e = temperature("1e39").expect_err("1e39");
        assert!(e.starts_with("1e39 (past the largest float) is not"), "{e}");
        assert!(temperature("inf")
            .expect_err("inf")
            .starts_with("inf is not"));
    }

    #[test]
    fn parsers_reject_what_they_cannot_honour() {
        assert!(temperature("nan").is_err());
        assert!(temperature("inf").is_err());
        assert!(temperature("-1").is_err());
        assert_eq!(temperature("0.5"), Ok(0.5));
        assert!(top_p("1.5").is_err());
        assert!(positions("0").expect_err("0").contains("at least 1"));
        assert!(positions("-3").expect_err("-3").contains("at least 1"));
        assert!(grid("65536").expect_err("65536").contains("at most 65535"));
        assert!(margin("nan").is_err());
        assert_eq!(seed("0"), Ok(0));
        assert_eq!(kv("f16"), Ok(baro_engine::kv::KvChoice::F16));
        assert_eq!(kv("auto"), Ok(baro_engine::kv::KvChoice::Auto));
        assert!(kv("f64").expect_err("f64").contains("auto, f32, f16"));
        assert_eq!(act("q8"), Ok(baro_engine::act::ActChoice::Q8));
        assert_eq!(act("f32"), Ok(baro_engine::act::ActChoice::F32));
        assert_eq!(act("auto"), Ok(baro_engine::act::ActChoice::Auto));
        for bad in ["Q8", "q8_0", "int8", "", "Auto", "bogus"] {
            assert!(act(bad).expect_err(bad).contains("auto, f32, q8"), "{bad}");
        }
        assert!(speed("1e-300").is_err());
        assert_eq!(speed("0"), Ok(0.0));
        assert!(rate("1e-15").is_err());
        assert!(rate("1e-300").is_err());
        assert!(rate("nan").is_err());
        assert_eq!(rate("60"), Ok(60.0));
        assert!(synthetic_grid("65535").is_err());
        assert_ne!(resolve_seed(0), 0);
        assert_eq!(resolve_seed(7), 7);
    }
}
