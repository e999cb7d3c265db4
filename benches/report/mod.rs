//! Ratios from criterion's own estimates, printed after a bench's run, and
//! the spread of ratios a bench measures itself in rounds.

#[allow(dead_code)] // not every bench measures in rounds
pub mod spread;

/// When this run began: [`start`] sets it, and only estimates criterion wrote
/// after it are read (a case a filter left out keeps its estimate from an
/// earlier run, which this run's report must not print).
static STARTED: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// Marks the start of the run, before criterion measures anything: the
/// report then reads only what this run measured.
pub fn start() {
    // Criterion's files carry the file system's times, which may be coarser
    // than the clock's: a second's margin, far less than any case takes.
    let now = std::time::SystemTime::now();
    STARTED.get_or_init(|| now - std::time::Duration::from_secs(1));
}

/// Criterion's mean estimate for `group/case` in ns per iteration, from this run.
pub fn mean(group: &str, case: &str) -> Option<f64> {
    // Criterion writes under the workspace's target directory; a member crate's
    // bench runs one level below it.
    let dirs: Vec<std::path::PathBuf> = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => vec![dir.into()],
        None => vec!["target".into(), "../target".into()],
    };
    let started = STARTED
        .get()
        .expect("report::start() before the benches run");
    estimate(&dirs, group, case, *started)
}

/// Criterion's mean estimate for `group/case` in ns per iteration, in the first
/// of `dirs` (target directories) that holds one written since `started`: an
/// estimate left by an earlier run is not this run's.
pub fn estimate(
    dirs: &[std::path::PathBuf],
    group: &str,
    case: &str,
    started: std::time::SystemTime,
) -> Option<f64> {
    let text = dirs.iter().find_map(|dir| {
        let path = dir
            .join("criterion")
            .join(group)
            .join(case)
            .join("new/estimates.json");
        let written = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
        (written >= started).then(|| std::fs::read_to_string(path).ok())?
    })?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

/// Prints, for each case of `group`, the time per unit of work (`units` per
/// iteration) and its ratio to the first case, the baseline.
pub fn print_ratios(group: &str, unit: &str, units: f64, cases: &[&str]) {
    let Some(baseline) = cases.first().and_then(|c| mean(group, c)) else {
        return;
    };
    println!(
        "\n{:<36} {:>14} {:>10}",
        group,
        format!("ns/{unit}"),
        "ratio"
    );
    for case in cases {
        if let Some(ns) = mean(group, case) {
            println!("{case:<36} {:>14.3} {:>10.2}", ns / units, ns / baseline);
        }
    }
}

/// Prints what `case` adds to `baseline` in `group`, per unit of work, and that
/// overhead as a multiple of the baseline: (case − baseline) ÷ baseline.
#[allow(dead_code)] // not every bench prints one
pub fn print_overhead(group: &str, unit: &str, baseline: &str, case: &str) {
    let (Some(base), Some(ns)) = (mean(group, baseline), mean(group, case)) else {
        return;
    };
    println!(
        "{group}: `{case}` adds {:.1} ns/{unit} to `{baseline}` ({:.1}): overhead {:.2}× it",
        ns - base,
        base,
        (ns - base) / base
    );
}
