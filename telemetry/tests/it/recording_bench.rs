//! Measurements of the recording format on a 1B-shaped synthetic stream (132 workgroups ×
//! 114 stages, 82 levels): bytes per span, and write / read / export throughput in passes
//! per second. Not a correctness test: run it on purpose, in release, and copy the lines
//! into bench/rounds/sessions.md.
//!
//! `cargo test --release -p baro-telemetry --test it recording_bench:: -- --ignored --nocapture`
//! (`BARO_BENCH_PASSES`, default 300, sets the stream's length.)

#![allow(clippy::unwrap_used)]

use std::io::Cursor;
use std::time::Instant;

use baro_telemetry::recording::{export, Compression, Reader, RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::Telemetry;

/// Time this thread spent on a CPU (Linux schedstat), s: the machine is shared, so
/// throughput is reported per CPU-second beside the wall-clock one.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(f64::NAN, |ns| ns as f64 * 1e-9)
}

/// Wall and CPU seconds of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (t, c) = (Instant::now(), cpu_s());
    let v = f();
    (v, t.elapsed().as_secs_f64(), cpu_s() - c)
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture in release"]
fn measure_bytes_per_span_and_throughput_on_a_1b_shaped_stream() {
    let passes: u64 = std::env::var("BARO_BENCH_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let run = synthetic_run(132, 114, 82);
    let (frames, g_wall, _) = timed(|| {
        (0..passes)
            .map(|p| Telemetry::Frame(Box::new(synthetic_frame(&run, p, 1))))
            .collect::<Vec<_>>()
    });
    println!(
        "stream: {passes} passes of 132 WGs x 114 stages / 82 levels, generated in {g_wall:.2} s"
    );
    let rate = |wall: f64, cpu: f64| {
        format!(
            "{:.0} passes/s ({:.0} per CPU-s)",
            passes as f64 / wall,
            passes as f64 / cpu
        )
    };
    for c in [Compression::Lz4, Compression::None] {
        let header = RecordingHeader::new(run.clone(), "bench");
        let ((bytes, st), w_wall, w_cpu) = timed(|| {
            let mut w = Writer::new(Vec::with_capacity(64 << 20), &header)
                .unwrap()
                .with_compression(c);
            w.write(&Telemetry::Start(run.clone())).unwrap();
            for f in &frames {
                w.write(f).unwrap();
            }
            let st = w.stats();
            (w.finish().unwrap(), st)
        });
        println!(
            "{c:?}: {} bytes for {} spans (and {} barrier stamp pairs): {:.2} bytes/span in \
             the file, {:.2} before compression; {:.0} KiB/pass",
            bytes.len(),
            st.spans,
            passes * 132 * 81,
            bytes.len() as f64 / st.spans as f64,
            st.raw_bytes as f64 / st.spans as f64,
            bytes.len() as f64 / passes as f64 / 1024.0,
        );
        if let (Compression::None, Some(p)) = (c, std::env::var_os("BARO_BENCH_DUMP")) {
            std::fs::write(p, &bytes).unwrap();
        }
        let (n, r_wall, r_cpu) = timed(|| {
            let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
            r.by_ref()
                .filter(|m| matches!(m, Ok(Telemetry::Frame(_))))
                .count()
        });
        assert_eq!(n as u64, passes);
        let ((events, json_len), p_wall, p_cpu) = timed(|| {
            let mut out = Vec::with_capacity(1 << 30);
            let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
            let e =
                export::json_trace(&mut r, &mut out, &export::TraceOptions::everything()).unwrap();
            (e.events, out.len())
        });
        let (_, c_wall, c_cpu) = timed(|| {
            let mut out = Vec::new();
            export::csv(&mut Reader::new(Cursor::new(&bytes)).unwrap(), &mut out).unwrap();
        });
        println!("{c:?}: write {}", rate(w_wall, w_cpu));
        println!("{c:?}: read  {}", rate(r_wall, r_cpu));
        println!(
            "{c:?}: perfetto export {} ({} events, {:.1} MiB of JSON per pass)",
            rate(p_wall, p_cpu),
            events,
            json_len as f64 / passes as f64 / (1 << 20) as f64
        );
        println!("{c:?}: csv export {}", rate(c_wall, c_cpu));
    }
    // The same frames as JSON lines (the `--json` stream with spans), for scale.
    let json: usize = frames
        .iter()
        .map(|f| f.to_json_line().unwrap().len() + 1)
        .sum();
    let spans: u64 = frames
        .iter()
        .map(|f| match f {
            Telemetry::Frame(f) => f.spans.iter().count() as u64,
            _ => 0,
        })
        .sum();
    println!(
        "JSON lines for comparison: {:.2} bytes/span",
        json as f64 / spans as f64
    );
}
