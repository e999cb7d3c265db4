//! The benches' report (`benches/report`): it prints only what the run that
//! prints it measured, and the spread of the ratios it measures in rounds.

#[path = "../benches/report/mod.rs"]
#[allow(dead_code)] // the printing half is the benches'
mod report;

use std::path::Path;
use std::time::Duration;

/// A target directory holding criterion's estimate for `group/case`, as
/// criterion writes it, and when it was written.
fn written(dir: &Path, group: &str, case: &str, mean: f64) -> std::time::SystemTime {
    let at = dir.join("criterion").join(group).join(case).join("new");
    std::fs::create_dir_all(&at).unwrap();
    let file = at.join("estimates.json");
    let json = format!(
        r#"{{"mean":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":{mean},"upper_bound":{mean}}},"point_estimate":{mean},"standard_error":0.1}}}}"#
    );
    std::fs::write(&file, json).unwrap();
    std::fs::metadata(&file).unwrap().modified().unwrap()
}

#[test]
fn an_estimate_is_read_only_if_this_run_wrote_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let at = written(dir, "queue", "direct", 129.5);
    let dirs = [dir.to_path_buf()];
    // Written during the run: read.
    let before = at - Duration::from_secs(1);
    assert_eq!(
        report::estimate(&dirs, "queue", "direct", before),
        Some(129.5)
    );
    // Left by an earlier run (a case this run's filter left out): not read.
    let after = at + Duration::from_secs(1);
    assert_eq!(report::estimate(&dirs, "queue", "direct", after), None);
    // A case never measured: nothing.
    assert_eq!(report::estimate(&dirs, "queue", "queued", before), None);
}

#[test]
fn a_stale_estimate_in_one_target_directory_gives_way_to_a_fresh_one() {
    // `target` holds an hour-old estimate, `../target` this run's.
    let (stale_dir, fresh_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (stale, fresh) = (stale_dir.path(), fresh_dir.path());
    let old = written(stale, "g", "c", 1.0);
    let an_hour_ago = old - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(stale.join("criterion/g/c/new/estimates.json"))
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    let new = written(fresh, "g", "c", 2.0);
    let dirs = [stale.to_path_buf(), fresh.to_path_buf()];
    let started = new - Duration::from_secs(60);
    assert_eq!(report::estimate(&dirs, "g", "c", started), Some(2.0));
    // Before the stale one was written, the first directory answers.
    let earlier = an_hour_ago - Duration::from_secs(1);
    assert_eq!(report::estimate(&dirs, "g", "c", earlier), Some(1.0));
}

#[test]
fn a_spread_gives_the_median_the_middle_half_and_the_extremes() {
    let mut rounds = [0.9, 1.3, 0.7, 1.1, 1.0];
    let s = report::spread::spread(&mut rounds);
    assert_eq!(s.median, 1.0);
    assert_eq!(s.middle, (0.9, 1.1));
    assert_eq!(s.all, (0.7, 1.3));
    // Between two neighbours when the quartile falls between rounds.
    let mut even = [1.0, 2.0, 3.0, 4.0];
    let s = report::spread::spread(&mut even);
    assert_eq!(s.median, 2.5);
    assert_eq!(s.middle, (1.75, 3.25));
}

#[test]
fn rounds_split_by_their_round_trips_keep_their_own_figures() {
    // Each round's slowdown beside its round trip: split at 60 ns, each
    // slowdown goes with its own round, whatever the order of the rounds.
    let trips = [41.0, 230.0, 60.0, 112.0, 38.0];
    let slowdowns = [2.7, 9.1, 3.3, 4.1, 2.6];
    let (shorter, longer) = report::spread::split_by(&trips, &slowdowns, 60.0);
    assert_eq!(shorter, [2.7, 3.3, 2.6]);
    assert_eq!(longer, [9.1, 4.1]);
    // Every round on one side when the bound is past them all.
    let (all, none) = report::spread::split_by(&trips, &slowdowns, 1e9);
    assert_eq!((all.len(), none.len()), (5, 0));
}
