//! `GET /metrics`: Prometheus text, no token.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use fsm_runtime::Store;

use crate::Service;

/// The metrics of every machine: objects per state, actions started, completed,
/// failed, healed, abandoned and revoked, conflicts, and objects stuck past
/// their deadline.
pub async fn render(service: &Service) -> String {
    let mut out = String::new();
    let counters: [(&str, &str); 7] = [
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
        (
            "fsm_conflicts_total",
            "Compare-and-sets lost: requests answered 409 conflict, and patches without If-Match retried on newer data.",
        ),
    ];
    let mut states = Vec::new();
    for (name, m) in &service.machines {
        let rt = m.runtime.clone();
        let counted = tokio::task::spawn_blocking(move || {
            let m = rt.machine();
            let mut per_state = vec![0u64; m.states().len()];
            let mut stuck = 0u64;
            let now = SystemTime::now();
            let records = rt.store().records().unwrap_or_default();
            for record in records.iter().filter_map(|(_, r)| r.as_ref().ok()) {
                per_state[record.state.0] += 1;
                let overdue = record.in_flight.iter().chain(&record.hidden).any(|h| {
                    m.deadline(h.action, record.state)
                        .is_some_and(|d| h.since + d < now)
                });
                stuck += u64::from(overdue);
            }
            (per_state, stuck)
        })
        .await
        .unwrap_or_default();
        states.push((name.clone(), m.clone(), counted));
    }
    out.push_str("# HELP fsm_objects Objects per machine and state.\n# TYPE fsm_objects gauge\n");
    for (name, m, (per_state, _)) in &states {
        for (i, n) in per_state.iter().enumerate() {
            let state = &m.runtime.machine().states()[i].name;
            let _ = writeln!(
                out,
                "fsm_objects{{machine=\"{name}\",state=\"{state}\"}} {n}"
            );
        }
    }
    out.push_str(
        "# HELP fsm_objects_stuck Objects held past their deadline (the healer's next pass rolls them back).\n# TYPE fsm_objects_stuck gauge\n",
    );
    for (name, _, (_, stuck)) in &states {
        let _ = writeln!(out, "fsm_objects_stuck{{machine=\"{name}\"}} {stuck}");
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
                &c.conflicts,
            ][i]
                .load(Ordering::Relaxed);
            let _ = writeln!(out, "{metric}{{machine=\"{name}\"}} {value}");
        }
    }
    out
}
