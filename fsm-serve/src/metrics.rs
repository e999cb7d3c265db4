//! `GET /metrics`: Prometheus text, no token.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use crate::Service;
use crate::census::Census;

/// A gauge each machine has while its store answers: its name, its help, and
/// its value in a census.
type Gauge = (&'static str, &'static str, fn(&Census) -> u64);

/// The metrics of every machine: whether its store answered, objects per state,
/// objects stuck past their deadline and records that cannot be read, requests
/// waiting for a busy object, actions
/// started, completed, failed, healed, abandoned and revoked, objects removed,
/// and conflicts.
pub async fn render(service: &Service) -> String {
    let mut out = String::new();
    let counters: [(&str, &str); 8] = [
        (
            "fsm_actions_started_total",
            "Actions started since the service started.",
        ),
        ("fsm_actions_completed_total", "Actions completed."),
        ("fsm_actions_failed_total", "Actions failed."),
        (
            "fsm_actions_healed_total",
            "Actions rolled back by the healer.",
        ),
        (
            "fsm_actions_abandoned_total",
            "Actions whose holder went away.",
        ),
        (
            "fsm_actions_revoked_total",
            "Completions refused: the hold was revoked.",
        ),
        ("fsm_objects_removed_total", "Objects removed."),
        (
            "fsm_conflicts_total",
            "Compare-and-sets lost: requests answered 409 conflict, and patches without If-Match retried on newer data.",
        ),
    ];
    // Each machine's census; `None` when its store could not list its objects
    // (etcd down): its object gauges are then left out, as unknown, rather
    // than reported as zero, and `fsm_store_up` says why.
    let mut censuses = Vec::new();
    for (name, m) in &service.machines {
        let rt = m.runtime.clone();
        let census = tokio::task::spawn_blocking(move || Census::take(&rt, SystemTime::now()))
            .await
            .ok()
            .and_then(Result::ok);
        censuses.push((name, m, census));
    }
    let taken = || {
        censuses
            .iter()
            .filter_map(|(name, m, census)| Some((name, m, census.as_ref()?)))
    };
    out.push_str(
        "# HELP fsm_store_up Whether the machine's store could be read for this scrape (1) or not (0: its object gauges are left out).\n# TYPE fsm_store_up gauge\n",
    );
    for (name, _, census) in &censuses {
        let up = u8::from(census.is_some());
        let _ = writeln!(out, "fsm_store_up{{machine=\"{name}\"}} {up}");
    }
    out.push_str("# HELP fsm_objects Objects per machine and state.\n# TYPE fsm_objects gauge\n");
    for (name, m, census) in taken() {
        for (i, n) in census.per_state.iter().enumerate() {
            let state = &m.runtime.machine().states()[i].name;
            let _ = writeln!(
                out,
                "fsm_objects{{machine=\"{name}\",state=\"{state}\"}} {n}"
            );
        }
    }
    let gauges: [Gauge; 2] = [
        (
            "fsm_objects_stuck",
            "Objects held past their deadline (the healer's next pass rolls them back).",
            |census| census.stuck,
        ),
        (
            "fsm_objects_unreadable",
            "Records the store holds but cannot read (say, written by a newer spec).",
            |census| census.unreadable,
        ),
    ];
    for (metric, help, value) in gauges {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge");
        for (name, _, census) in taken() {
            let _ = writeln!(out, "{metric}{{machine=\"{name}\"}} {}", value(census));
        }
    }
    out.push_str(
        "# HELP fsm_requests_waiting Requests (starts, data changes, removals) waiting for a busy object (?wait=SECONDS) on this service.\n# TYPE fsm_requests_waiting gauge\n",
    );
    for (name, m) in &service.machines {
        let waiting = m.feed.turns.waiting();
        let _ = writeln!(out, "fsm_requests_waiting{{machine=\"{name}\"}} {waiting}");
    }
    for (i, (metric, help)) in counters.iter().enumerate() {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} counter");
        for (name, m) in &service.machines {
            let c = &m.feed.counters;
            let value = [
                &c.started,
                &c.completed,
                &c.failed,
                &c.healed,
                &c.abandoned,
                &c.revoked,
                &c.removed,
                &c.conflicts,
            ][i]
                .load(Ordering::Relaxed);
            let _ = writeln!(out, "{metric}{{machine=\"{name}\"}} {value}");
        }
    }
    out
}
