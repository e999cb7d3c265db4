//! What every record of a machine says at once, for the summary
//! (`GET /v1/<machine>/summary`, the page's view) and the metrics: one look at
//! each record ([`Store::for_each_record`]: on etcd, one snapshot; in memory,
//! in place, only the records held copied).

use std::time::SystemTime;

use fsm_etcd::AnyStore;
use fsm_runtime::{ObjectId, Record, Runtime, RuntimeError, Store};

/// Objects per state, those held by an action, and the records that could not
/// be read.
pub struct Census {
    /// How many objects are in each state, by the state's id.
    pub per_state: Vec<u64>,
    /// The objects an action holds (a visible or a hidden one), sorted by id.
    pub held: Vec<(ObjectId, Record)>,
    /// How many of those are held past their deadline (the healer's next pass
    /// rolls them back).
    pub stuck: u64,
    /// Records the store has but cannot read (say, written by a newer spec):
    /// counted nowhere else.
    pub unreadable: u64,
}

impl Census {
    /// Every object of `rt`'s store, `now` deciding which holds are past their
    /// deadline. The store failing to list its objects is the error.
    pub fn take(rt: &Runtime<AnyStore>, now: SystemTime) -> Result<Census, RuntimeError> {
        let m = rt.machine();
        let mut census = Census {
            per_state: vec![0; m.states().len()],
            held: Vec::new(),
            stuck: 0,
            unreadable: 0,
        };
        (rt.store())
            .for_each_record(|id, record| {
                let Ok(record) = record else {
                    census.unreadable += 1;
                    return;
                };
                census.per_state[record.state.0] += 1;
                let holders = || record.in_flight.iter().chain(&record.hidden);
                let overdue = holders().any(|h| {
                    m.deadline(h.action, record.state)
                        .is_some_and(|d| h.since + d < now)
                });
                census.stuck += u64::from(overdue);
                if holders().next().is_some() {
                    census.held.push((id.clone(), record.clone()));
                }
            })
            .map_err(RuntimeError::Store)?;
        census.held.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Ok(census)
    }

    /// How many objects were read.
    pub fn total(&self) -> u64 {
        self.per_state.iter().sum()
    }
}
