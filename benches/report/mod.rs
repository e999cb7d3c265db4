//! Ratios from criterion's own estimates, printed after a bench's run.

/// Criterion's mean estimate for `group/case` in ns per iteration, from this run.
fn mean_ns(group: &str, case: &str) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| "target".into(), std::path::PathBuf::from);
    let path = dir
        .join("criterion")
        .join(group)
        .join(case)
        .join("new/estimates.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

/// Prints, for each case of `group`, the time per unit of work (`units` per
/// iteration) and its ratio to the first case, the baseline.
pub fn print_ratios(group: &str, unit: &str, units: f64, cases: &[&str]) {
    let Some(baseline) = cases.first().and_then(|c| mean_ns(group, c)) else {
        return;
    };
    println!(
        "\n{:<36} {:>14} {:>10}",
        group,
        format!("ns/{unit}"),
        "ratio"
    );
    for case in cases {
        if let Some(ns) = mean_ns(group, case) {
            println!("{case:<36} {:>14.3} {:>10.2}", ns / units, ns / baseline);
        }
    }
}
