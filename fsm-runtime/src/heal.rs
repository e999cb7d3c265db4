//! Self-healing: holds whose holder is gone, or that passed a hard deadline, are
//! rolled back.
//!
//! A hold lives as long as its holder: in process, the [`InFlight`](crate::InFlight)
//! handle (dropped without an outcome, or unwound by a panic, it records the hold as
//! abandoned at once); across processes on etcd, the holding process's lease, which
//! it keeps alive (a process that dies or is cut off longer than the lease's time to
//! live shows its holds as abandoned). A hold whose holder lives is rolled back only
//! when it passes a hard deadline: the spec's (`deadline` on the action or on its
//! transition state), or one given to the healer. A slow action that is alive is
//! left alone.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use fsm_core::{StateId, UnknownState};

use crate::{Actor, ObjectId, Runtime, RuntimeError, Store};

/// One object the healer restored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Healed {
    /// The object.
    pub id: ObjectId,
    /// The action that was stuck.
    pub action: String,
    /// The state it was stuck in (for a hidden action, the status it kept).
    pub stuck_in: String,
    /// When the action started.
    pub since: SystemTime,
    /// The state restored: the static state the action started from.
    pub restored: String,
    /// Whether its holder was gone (a dropped handle, a dead process), rather
    /// than the hold having passed its deadline.
    pub abandoned: bool,
    /// The deadline the hold passed, when its holder was alive.
    pub deadline: Option<Duration>,
    /// Whether the stuck action was a hidden one.
    pub hidden: bool,
}

/// What one pass of the healer did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct HealReport {
    /// The objects restored.
    pub healed: Vec<Healed>,
    /// Objects whose action ended while the healer looked at them: left alone.
    pub finished_meanwhile: Vec<ObjectId>,
    /// Objects the healer could not read or write, and why.
    pub errors: Vec<(ObjectId, RuntimeError)>,
}

/// Finds objects held by an action whose holder is gone, or that passed its hard
/// deadline, and rolls each back to the static state its action started from, by
/// compare-and-set: an action that finishes meanwhile is never undone, and a worker
/// that comes back late finds its hold revoked (its completion is a `409 Conflict`,
/// its next queued step is refused).
///
/// ```
/// use std::sync::Arc;
/// use std::time::{Duration, SystemTime};
/// use fsm_runtime::{Actor, Healer, ManualClock, MemoryStore, Runtime};
///
/// let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
/// let vms = Runtime::builder(
///     fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"))?,
///     MemoryStore::new(),
/// ).clock(clock.clone()).build()?;
/// let user = Actor::new("user");
/// vms.create("vm-1", &user)?;
/// vms.run("vm-1", &user, "deploy")?;
/// let slow = vms.start("vm-1", &user, "pause")?; // a worker that is slow, but alive
///
/// let healer = Healer::new().deadline_for("PAUSING", Duration::from_secs(600));
/// clock.advance(Duration::from_secs(300));
/// assert!(healer.heal(&vms)?.healed.is_empty()); // alive, and within its deadline
/// clock.advance(Duration::from_secs(301));
/// let report = healer.heal(&vms)?;
/// assert_eq!(report.healed[0].stuck_in, "PAUSING");
/// assert_eq!(report.healed[0].restored, "RUNNING");
/// assert_eq!(vms.state_name("vm-1")?, "RUNNING");
/// assert!(slow.complete().is_err()); // the late worker's 409
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Healer {
    actor: Actor,
    default: Option<Duration>,
    /// By state name, as given, in order: resolved against the runtime's
    /// machine at each pass, where a later one for a state overrides an
    /// earlier.
    per_state: Vec<(String, Duration)>,
}

impl Default for Healer {
    fn default() -> Self {
        Self::new()
    }
}

impl Healer {
    /// A healer, acting as `healer`, that rolls back holds whose holder is gone and
    /// holds past the deadline the spec declares for their action or transition
    /// state.
    pub fn new() -> Self {
        Healer {
            actor: Actor::new("healer"),
            default: None,
            per_state: Vec::new(),
        }
    }

    /// A hard deadline for holds the spec gives none.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.default = Some(deadline);
        self
    }

    /// A hard deadline for holds in `state`, over the spec's. The state is
    /// named as the spec spells it, ignoring ASCII case
    /// ([`Machine::resolve_state`](fsm_core::Machine::resolve_state)); a later
    /// deadline for the same state replaces an earlier one. A name the
    /// runtime's machine does not have fails [`heal`](Self::heal) with
    /// [`RuntimeError::UnknownState`], which suggests the closest name: a
    /// typo is never a deadline that silently applies nowhere.
    pub fn deadline_for(mut self, state: impl Into<String>, deadline: Duration) -> Self {
        self.per_state.push((state.into(), deadline));
        self
    }

    /// Acts as `actor` (its name is in the histories of healed objects).
    pub fn actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// One pass over every object of `runtime`: each looked at where the
    /// store keeps it ([`Store::for_each_record`]; on etcd, all read at
    /// once), and those an action holds, and those that cannot be read, taken
    /// up in the order of their ids. Fails only when the store cannot list its
    /// objects; a failure on one object is in the report, and the pass goes on
    /// with the others, or when a deadline names a state the machine does not
    /// have ([`deadline_for`](Self::deadline_for)).
    pub fn heal<S: Store>(&self, runtime: &Runtime<S>) -> Result<HealReport, RuntimeError> {
        let machine = runtime.machine();
        let per_state = (self.per_state.iter())
            .map(|(name, deadline)| Ok((machine.resolve_state(name)?, *deadline)))
            .collect::<Result<HashMap<StateId, Duration>, UnknownState>>()?;
        let mut report = HealReport::default();
        // Copied: only the objects with something to judge.
        let mut records = Vec::new();
        (runtime.store())
            .for_each_record(|id, read| match read {
                Ok(r) if r.in_flight.is_none() && r.hidden.is_none() => {}
                read => records.push((id.clone(), read.cloned().map_err(Clone::clone))),
            })
            .map_err(RuntimeError::Store)?;
        records.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        let now = runtime.now();
        for (id, read) in records {
            let mut read = read.map_err(RuntimeError::Store);
            for hidden in [false, true] {
                let Ok(record) = &read else {
                    if let Err(e) = read {
                        report.errors.push((id.clone(), e));
                    }
                    break;
                };
                let holder = if hidden {
                    &record.hidden
                } else {
                    &record.in_flight
                };
                let Some(holder) = holder else { continue };
                let deadline = (per_state.get(&record.state).copied())
                    .or_else(|| machine.deadline(holder.action, record.state))
                    .or(self.default);
                let age = now.duration_since(holder.since).unwrap_or_default();
                let late = deadline.is_some_and(|d| age >= d);
                if !holder.abandoned && !late {
                    continue;
                }
                let result = if hidden {
                    runtime.release_hidden(id.clone(), record, &self.actor)
                } else {
                    runtime.roll_back(id.clone(), record, &self.actor)
                };
                // The object changed (healed here, or moved on meanwhile): its
                // hidden slot is judged on the object as it is now, read again.
                let changed = matches!(result, Ok(_) | Err(RuntimeError::Conflict { .. }));
                match result {
                    Ok(restored) => {
                        let healed = Healed {
                            id: id.clone(),
                            action: machine.action(holder.action).name.to_string(),
                            stuck_in: machine.state(record.state).name.to_string(),
                            since: holder.since,
                            restored: machine.state(restored.state).name.to_string(),
                            abandoned: holder.abandoned,
                            deadline: deadline.filter(|_| !holder.abandoned),
                            hidden,
                        };
                        tracing::warn!(
                            object = %id,
                            action = %healed.action,
                            stuck_in = %healed.stuck_in,
                            restored = %healed.restored,
                            "healed a stuck action"
                        );
                        report.healed.push(healed);
                    }
                    Err(RuntimeError::Conflict { .. }) => {
                        report.finished_meanwhile.push(id.clone())
                    }
                    Err(e) => report.errors.push((id.clone(), e)),
                }
                if changed && !hidden {
                    read = runtime.get(id.clone());
                }
            }
        }
        Ok(report)
    }

    /// Runs [`Healer::heal`] every `every` on a thread of its own, handing each
    /// outcome to `on_report`, until the returned handle is stopped or dropped.
    ///
    /// `every` is the pause after each pass, so passes never overlap however
    /// long one takes. A zero pause heals back to back and keeps a core busy
    /// reading every record; a pause of a fraction of the shortest deadline is
    /// what heals in time (`fsm serve` takes whole seconds, at least one).
    pub fn spawn<S: Store>(
        self,
        runtime: Runtime<S>,
        every: Duration,
        on_report: impl Fn(Result<HealReport, RuntimeError>) + Send + 'static,
    ) -> PeriodicHealer {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("fsm-healer".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    on_report(self.heal(&runtime));
                }
            })
            .expect("spawn the healer");
        PeriodicHealer {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

/// A healer running periodically; stopping or dropping it ends the thread.
#[derive(Debug)]
pub struct PeriodicHealer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl PeriodicHealer {
    /// Stops the healer and waits for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for PeriodicHealer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
