//! The exposition as a specification: a fixed small stream and what it must render to.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baro_telemetry::fail::{bits, FailReport, FailWord};
use baro_telemetry::{
    BarrierTiming, DeviceKind, Dispatch, Frame, LevelDetails, PowerMode, RunDetails, SensorReading,
    SensorSample, StageDetails, StageKind, StageTiming, Telemetry,
};

use super::aggregate::Aggregator;
use super::catalog::{self, CATALOG};
use super::expose::{escape_label_value, render, seconds, Format};
use super::http::parse_head;

const MS: u64 = 1_000_000;

fn run_details(device: &str) -> RunDetails {
    let st = |id: u32, name: &str, level: u32, kind| StageDetails {
        id,
        name: name.into(),
        level,
        kind,
        rows: 8,
        units: 8,
        weight_bytes: 0,
    };
    let lv = |index: u32, name: &str, stages: Vec<u32>| LevelDetails {
        index,
        name: name.into(),
        stages,
    };
    RunDetails {
        schema_version: baro_telemetry::SCHEMA_VERSION,
        device: device.into(),
        driver: "NVIDIA 580.65".into(),
        device_kind: DeviceKind::Discrete,
        model: "llama-1b q4_0".into(),
        dispatch: Dispatch::Mega,
        grid: 132,
        wg_size: 512,
        stages: vec![
            st(0, "q.l0", 0, StageKind::Q),
            st(1, "k.l0", 0, StageKind::K),
            st(2, "attn.l0", 1, StageKind::Attn),
            st(3, "q.l1", 2, StageKind::Q),
        ],
        levels: vec![
            lv(0, "qk.l0", vec![0, 1]),
            lv(1, "attn.l0", vec![2]),
            lv(2, "q.l1", vec![3]),
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

/// `scale` multiplies every stage and barrier time.
fn frame(run: &RunDetails, pass: u64, mode: PowerMode, word: u32, scale: u64) -> Frame {
    let timing = |stage: u32, busy_ns: u64, charged_ns: u64| StageTiming {
        stage,
        name: Arc::clone(&run.stages[stage as usize].name),
        level: run.stages[stage as usize].level,
        busy_ns: busy_ns * scale,
        charged_ns: charged_ns * scale,
        max_busy_ns: busy_ns * scale,
    };
    let barrier = |level, a: u64, r: u64, e: u64| BarrierTiming {
        level,
        arrival_spread_ns: a * scale,
        release_ns: r * scale,
        exit_spread_ns: e * scale,
    };
    Frame {
        pass,
        wall_ns: 1_700_000 * scale,
        gpu_ns: Some(1_550_000 * scale),
        fail: FailReport::new(
            FailWord {
                bits: word,
                ..FailWord::clean(132)
            },
            |l| run.level_name(l).into_owned(),
        ),
        stages: vec![
            timing(0, 2_000, 3_000),
            timing(1, 600, 900),
            timing(2, 2_500, 10_000),
            timing(3, 1_800, 2_600),
        ],
        barriers: vec![barrier(0, 13_000, 1_000, 250), barrier(1, 800, 1_200, 300)],
        mode,
        ..Default::default()
    }
}

/// The fixed small stream: a start, a clean fast pass, a failed slow pass on a shared GPU
/// (bits 0x201, 2 frames dropped so far), a torn pass with an unnamed bit, one sensor round.
fn small_stream() -> Vec<Telemetry> {
    let run = run_details("NVIDIA H200");
    let f0 = frame(&run, 0, PowerMode::Fast, 0, 1);
    let mut f1 = frame(&run, 1, PowerMode::Slow, bits::TIMEOUT | bits::POISONED, 2);
    f1.contention.gpu_clients = 1;
    f1.dropped = 2;
    let f2 = Frame {
        pass: 2,
        wall_ns: 500_000,
        torn: true,
        mode: PowerMode::Fast,
        fail: FailReport::new(
            FailWord {
                bits: 0x8000,
                ..FailWord::clean(132)
            },
            |_| "x",
        ),
        dropped: 2,
        ..Default::default()
    };
    let sensor = |reading| {
        Telemetry::Sensor(SensorSample {
            host_ns: 0,
            reading,
        })
    };
    vec![
        Telemetry::Start(run),
        Telemetry::Frame(Box::new(f0)),
        Telemetry::Frame(Box::new(f1)),
        Telemetry::Frame(Box::new(f2)),
        sensor(SensorReading::GpuClocks {
            sm_mhz: 1980,
            mem_mhz: Some(3201),
            max_sm_mhz: Some(1980),
            pstate: Some(0),
        }),
        sensor(SensorReading::CpuBusy { fraction: 0.25 }),
        sensor(SensorReading::GpuClients {
            count: 1,
            clients: vec![],
        }),
        sensor(SensorReading::Throttle { reasons: 4 }),
        sensor(SensorReading::Mode {
            mode: PowerMode::Slow,
        }),
    ]
}

/// The small stream ingested at 0, 0.5 s, 1 s, …; rendered at 2 s.
fn aggregated(stream: &[Telemetry]) -> Aggregator {
    let mut a = Aggregator::new();
    for (i, m) in stream.iter().enumerate() {
        a.ingest(m, i as u64 * 500 * MS);
    }
    a
}

const NOW: u64 = 2_000 * MS;

fn exposition(format: Format) -> String {
    render(&aggregated(&small_stream()), NOW, format)
}

/// Samples of `name` (exact metric name) as `(labels text, value)`.
fn samples<'a>(text: &'a str, name: &str) -> Vec<(&'a str, &'a str)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            (n == name).then_some((labels, value))
        })
        .collect()
}

fn value(text: &str, name: &str, labels: &str) -> String {
    let found: Vec<_> = samples(text, name)
        .into_iter()
        .filter(|(l, _)| *l == labels)
        .collect();
    assert_eq!(found.len(), 1, "{name}{{{labels}}} in\n{text}");
    found[0].1.to_string()
}

fn golden(file: &str, actual: &str) {
    let path = format!("{}/src/metrics/golden/{file}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("BARO_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (BARO_BLESS=1 writes it)"));
    assert!(
        expected == actual,
        "{path} differs (BARO_BLESS=1 rewrites it); actual:\n{actual}"
    );
}

#[test]
fn exposition_of_the_small_stream_matches_the_golden_files() {
    golden("small_stream.prom", &exposition(Format::Prometheus));
    golden("small_stream.om.txt", &exposition(Format::OpenMetrics));
}

#[test]
fn passes_are_counted_by_dispatch_mode_and_contention_label() {
    let t = exposition(Format::Prometheus);
    let passes = samples(&t, "baro_passes_total");
    assert_eq!(
        passes,
        vec![
            (r#"dispatch="mega",mode="fast",contention="quiet""#, "2"),
            (
                r#"dispatch="mega",mode="slow",contention="gpu_shared""#,
                "1"
            ),
        ]
    );
}

#[test]
fn every_fail_bit_has_a_series_and_counts_the_passes_that_raised_it() {
    let t = exposition(Format::Prometheus);
    let got: Vec<(String, String)> = samples(&t, "baro_failed_passes_total")
        .into_iter()
        .map(|(l, v)| (l.to_string(), v.to_string()))
        .collect();
    let mut want: Vec<(String, String)> = bits::NAMES
        .iter()
        .map(|(b, n)| {
            let hit = *b == bits::TIMEOUT || *b == bits::POISONED;
            (format!("bit=\"{n}\""), if hit { "1" } else { "0" }.into())
        })
        .collect();
    want.push(("bit=\"unknown\"".into(), "1".into()));
    assert_eq!(got, want);
    assert_eq!(value(&t, "baro_torn_passes_total", ""), "1");
}

#[test]
fn stage_kinds_are_summed_over_a_pass_then_observed_once_per_pass() {
    let t = exposition(Format::Prometheus);
    // Fast pass: q.l0 + q.l1 busy 2000 + 1800 ns, charged 3000 + 2600 ns.
    let q_fast = r#"stage_kind="q",mode="fast""#;
    assert_eq!(value(&t, "baro_stage_busy_seconds_count", q_fast), "1");
    assert_eq!(
        value(&t, "baro_stage_busy_seconds_sum", q_fast),
        "0.0000038"
    );
    assert_eq!(
        value(&t, "baro_stage_charged_seconds_sum", q_fast),
        "0.0000056"
    );
    // 3.8 µs is above the 2.5 µs bound and within the 5 µs one.
    let le = |le: &str| format!(r#"stage_kind="q",mode="fast",le="{le}""#);
    assert_eq!(
        value(&t, "baro_stage_busy_seconds_bucket", &le("0.0000025")),
        "0"
    );
    assert_eq!(
        value(&t, "baro_stage_busy_seconds_bucket", &le("0.000005")),
        "1"
    );
    // The slow pass doubled every time.
    let attn_slow = r#"stage_kind="attn",mode="slow""#;
    assert_eq!(
        value(&t, "baro_stage_busy_seconds_sum", attn_slow),
        "0.000005"
    );
    // Kinds the run has no stage of are absent.
    assert!(!t.contains(r#"stage_kind="ffn_up""#), "{t}");
}

#[test]
fn histogram_buckets_are_cumulative_and_inf_equals_count() {
    let t = exposition(Format::Prometheus);
    let mut histograms = 0;
    for m in CATALOG
        .iter()
        .filter(|m| m.kind == catalog::Kind::Histogram)
    {
        let counts = samples(&t, &format!("{}_count", m.name));
        for (labels, count) in counts {
            histograms += 1;
            let prefix = if labels.is_empty() {
                String::new()
            } else {
                format!("{labels},")
            };
            let buckets: Vec<(&str, u64)> = samples(&t, &format!("{}_bucket", m.name))
                .into_iter()
                .filter_map(|(l, v)| {
                    let le = l.strip_prefix(prefix.as_str())?.strip_prefix("le=\"")?;
                    Some((le.strip_suffix('"')?, v.parse().ok()?))
                })
                .collect();
            assert_eq!(buckets.len(), catalog::BUCKETS_NS.len() + 1, "{m:?}");
            assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
            let last = buckets.last().unwrap();
            assert_eq!(last.0, "+Inf");
            assert_eq!(last.1.to_string(), count, "{} {labels}", m.name);
            let bounds: Vec<String> = catalog::BUCKETS_NS.iter().map(|&b| seconds(b)).collect();
            let les: Vec<&str> = buckets.iter().map(|b| b.0).collect();
            assert_eq!(&les[..les.len() - 1], bounds.as_slice());
        }
    }
    assert!(histograms >= 15, "{histograms} histogram series");
}

#[test]
fn label_values_escape_backslash_quote_and_newline() {
    assert_eq!(escape_label_value("GPU \"0\"\n\\x"), r#"GPU \"0\"\n\\x"#);
    let mut stream = small_stream();
    stream[0] = Telemetry::Start(run_details("GPU \"0\"\n\\x"));
    let t = render(&aggregated(&stream), NOW, Format::Prometheus);
    let info = samples(&t, "baro_info");
    assert_eq!(info.len(), 1, "{t}");
    assert!(
        info[0]
            .0
            .starts_with(r#"device="GPU \"0\"\n\\x",device_kind="discrete","#),
        "{info:?}"
    );
    assert_eq!(t.lines().filter(|l| l.starts_with("baro_info")).count(), 1);
}

#[test]
fn info_carries_the_run_and_version_and_sensors_are_in_base_units() {
    let t = exposition(Format::Prometheus);
    assert_eq!(
        samples(&t, "baro_info"),
        vec![(
            concat!(
                r#"device="NVIDIA H200",device_kind="discrete",driver="NVIDIA 580.65","#,
                r#"model="llama-1b q4_0",quant="q4_0",dispatch="mega",grid="132",kv="f32",act="f32","#,
                r#"version=""#,
                env!("CARGO_PKG_VERSION"),
                "\""
            ),
            "1"
        )]
    );
    assert_eq!(value(&t, "baro_up", ""), "1");
    assert_eq!(value(&t, "baro_gpu_sm_clock_hertz", ""), "1980000000");
    assert_eq!(value(&t, "baro_gpu_memory_clock_hertz", ""), "3201000000");
    assert_eq!(value(&t, "baro_cpu_busy_ratio", ""), "0.25");
    assert_eq!(value(&t, "baro_gpu_other_clients", ""), "1");
    assert_eq!(value(&t, "baro_gpu_throttle_reasons", ""), "4");
    assert_eq!(value(&t, "baro_power_mode", r#"mode="slow""#), "1");
    assert_eq!(value(&t, "baro_power_mode", r#"mode="fast""#), "0");
    assert_eq!(
        value(&t, "baro_dropped_frames_total", r#"sink="metrics""#),
        "2"
    );
}

/// A non-finite sensor value (a producer's bug, a crafted stream) is exposed as the formats
/// spell it, `+Inf`, `-Inf`, `NaN` (was `inf` and `-inf`: a line OpenMetrics parsers refuse).
#[test]
fn a_non_finite_gauge_is_written_nan_plus_inf_or_minus_inf() {
    for (v, want) in [
        (f32::INFINITY, "+Inf"),
        (f32::NEG_INFINITY, "-Inf"),
        (f32::NAN, "NaN"),
        (0.25, "0.25"),
    ] {
        let mut a = Aggregator::new();
        let s = Telemetry::Sensor(SensorSample {
            host_ns: 0,
            reading: SensorReading::CpuBusy { fraction: v },
        });
        a.ingest(&s, 0);
        for f in [Format::Prometheus, Format::OpenMetrics] {
            assert_eq!(
                value(&render(&a, 0, f), "baro_cpu_busy_ratio", ""),
                want,
                "{f:?}"
            );
        }
    }
}

#[test]
fn info_labels_an_f16_kv_run_f16() {
    let mut stream = small_stream();
    let mut run = run_details("NVIDIA H200");
    run.kv = baro_telemetry::KvType::F16;
    stream[0] = Telemetry::Start(run);
    let t = render(&aggregated(&stream), NOW, Format::Prometheus);
    let info = samples(&t, "baro_info");
    assert_eq!(info.len(), 1, "{t}");
    assert!(info[0].0.contains(r#",kv="f16","#), "{info:?}");
}

#[test]
fn info_labels_a_q8_activation_run_q8() {
    let mut stream = small_stream();
    let mut run = run_details("NVIDIA H200");
    run.act = baro_telemetry::ActType::Q8;
    stream[0] = Telemetry::Start(run);
    let t = render(&aggregated(&stream), NOW, Format::Prometheus);
    let info = samples(&t, "baro_info");
    assert_eq!(info.len(), 1, "{t}");
    assert!(info[0].0.contains(r#",kv="f32",act="q8","#), "{info:?}");
}

#[test]
fn before_a_run_only_up_zero_and_the_always_present_counters_are_exposed() {
    let t = render(&Aggregator::new(), 0, Format::Prometheus);
    assert_eq!(value(&t, "baro_up", ""), "0");
    assert!(samples(&t, "baro_info").is_empty());
    assert!(samples(&t, "baro_passes_total").is_empty());
    assert!(!t.contains("baro_gpu_sm_clock_hertz"), "absent, not 0: {t}");
    // One series per known fail bit, plus "unknown".
    assert_eq!(
        samples(&t, "baro_failed_passes_total").len(),
        baro_engine::telemetry::fail::bits::NAMES.len() + 1
    );
}

#[test]
fn the_end_of_a_run_sets_up_to_zero_and_dropped_frames_keep_growing_over_runs() {
    let mut a = aggregated(&small_stream());
    a.ingest(
        &Telemetry::End {
            passes: 3,
            dropped: 5,
            reason: baro_telemetry::EndReason::Completed,
        },
        NOW,
    );
    let t = render(&a, NOW, Format::Prometheus);
    assert_eq!(value(&t, "baro_up", ""), "0");
    assert_eq!(
        value(&t, "baro_dropped_frames_total", r#"sink="metrics""#),
        "5"
    );
    // A second run starts its own count at 0: the counter adds it to the first run's.
    a.ingest(&small_stream()[0], NOW);
    let f = Frame {
        dropped: 1,
        ..Default::default()
    };
    a.ingest(&Telemetry::Frame(Box::new(f)), NOW);
    let t = render(&a, NOW, Format::Prometheus);
    assert_eq!(value(&t, "baro_up", ""), "1");
    assert_eq!(
        value(&t, "baro_dropped_frames_total", r#"sink="metrics""#),
        "6"
    );
}

#[test]
fn every_catalog_family_is_exposed_once_with_help_and_type() {
    let t = exposition(Format::Prometheus);
    assert_eq!(
        t.lines().filter(|l| l.starts_with("# TYPE ")).count(),
        CATALOG.len()
    );
    for m in CATALOG {
        let ty = format!("# TYPE {} {}\n", m.name, m.kind.prometheus());
        let help = format!("# HELP {} {}\n", m.name, m.help);
        assert_eq!(t.matches(&ty).count(), 1, "{ty}");
        assert_eq!(t.matches(&help).count(), 1, "{help}");
        assert!(!m.help.contains(['"', '\n']), "{}", m.name);
        if let Some(u) = m.unit {
            assert!(m.name.ends_with(&format!("_{u}")), "{}", m.name);
        }
    }
}

#[test]
fn openmetrics_names_families_without_total_and_info_adds_units_and_ends_with_eof() {
    let t = exposition(Format::OpenMetrics);
    assert!(t.ends_with("\n# EOF\n"), "{t}");
    assert!(t.contains("# TYPE baro_passes counter\n"));
    assert!(t.contains("baro_passes_total{dispatch=\"mega\""));
    assert!(t.contains("# TYPE baro info\n"));
    assert!(t.contains("\nbaro_info{device=\"NVIDIA H200\""));
    assert!(t.contains(
        "# TYPE baro_stage_busy_seconds histogram\n# UNIT baro_stage_busy_seconds seconds\n"
    ));
    assert!(!exposition(Format::Prometheus).contains("# EOF"));
}

#[test]
fn accept_header_picks_openmetrics_only_when_ranked_above_text() {
    let prometheus_2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::negotiate(Some(prometheus_2)), Format::OpenMetrics);
    assert_eq!(
        Format::negotiate(Some("application/openmetrics-text")),
        Format::OpenMetrics
    );
    assert_eq!(Format::negotiate(None), Format::Prometheus);
    assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
    assert_eq!(
        Format::negotiate(Some("text/plain,application/openmetrics-text;q=0.5")),
        Format::Prometheus
    );
    assert_eq!(
        Format::negotiate(Some("application/openmetrics-text; q=0")),
        Format::Prometheus
    );
}

#[test]
fn seconds_are_exact_plain_decimals() {
    assert_eq!(seconds(250), "0.00000025");
    assert_eq!(seconds(1_000_000_000), "1");
    assert_eq!(seconds(2_500_000_000), "2.5");
    assert_eq!(seconds(0), "0");
}

#[test]
fn request_heads_parse_and_malformed_ones_are_refused() {
    let r = parse_head("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nACCEPT:  text/plain \r\n").unwrap();
    assert_eq!(
        (r.method.as_str(), r.path.as_str(), r.accept.as_deref()),
        ("GET", "/metrics", Some("text/plain"))
    );
    assert_eq!(parse_head("GET / HTTP/1.0").unwrap().accept, None);
    for bad in [
        "",
        "GET",
        "GET /metrics",
        "GET /metrics SPDY/3",
        "GET /metrics HTTP/1.1 extra",
        "GET / HTTP/1.1\r\nno colon here",
    ] {
        assert_eq!(parse_head(bad), None, "{bad:?}");
    }
}

#[test]
fn readme_metrics_table_matches_the_catalog() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let (begin, end) = ("<!-- metrics:begin -->\n", "<!-- metrics:end -->");
    let table = catalog::markdown_table();
    let (Some(b), Some(e)) = (readme.find(begin), readme.find(end)) else {
        panic!("docs/metrics.md has no {begin:?} … {end:?} block; it should hold:\n{table}");
    };
    let current = &readme[b + begin.len()..e];
    if current != table && std::env::var_os("BARO_BLESS").is_some() {
        let updated = format!("{}{table}{}", &readme[..b + begin.len()], &readme[e..]);
        std::fs::write(path, updated).unwrap();
        return;
    }
    assert_eq!(
        current, table,
        "docs/metrics.md's metrics table (BARO_BLESS=1 rewrites it)"
    );
}

// ---- the endpoint over a real socket: tests/endpoint.rs ----
mod endpoint;

// ---- ingest cost ----

/// Counts allocations made by the current thread (other tests' threads do not disturb it).
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is passed on.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

#[test]
fn ingesting_frames_and_sensor_samples_allocates_nothing() {
    let run = baro_telemetry::synth::synthetic_run(132, 114, 82);
    let msgs: Vec<Telemetry> = (0..64)
        .map(|p| {
            let mut f = baro_telemetry::synth::synthetic_frame(&run, p, 7);
            f.fail.word.bits = (p as u32) & 0x0203;
            Telemetry::Frame(Box::new(f))
        })
        .chain(small_stream().into_iter().skip(4))
        .collect();
    let mut a = Aggregator::new();
    a.ingest(&Telemetry::Start(run), 0);
    // The counter sees this thread's allocations (else the assertion below proves nothing).
    let probe = ALLOCATIONS.with(|c| c.get());
    drop(std::hint::black_box(vec![0u8; 16]));
    assert_eq!(ALLOCATIONS.with(|c| c.get()), probe + 1);
    let before = ALLOCATIONS.with(|c| c.get());
    for (i, m) in msgs.iter().enumerate() {
        a.ingest(m, i as u64 * MS);
    }
    let allocations = ALLOCATIONS.with(|c| c.get()) - before;
    assert_eq!(allocations, 0, "ingest allocated {allocations} times");
    // And the frames were counted (the loop did its work).
    let t = render(&a, 64 * MS, Format::Prometheus);
    assert!(
        t.contains("baro_stage_busy_seconds_count{stage_kind=\"ffn_up\",mode=\"slow\"} 8"),
        "{t}"
    );
}
