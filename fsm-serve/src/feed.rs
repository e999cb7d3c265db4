//! Each machine's writes, as the watch stream and the counters see them: one task
//! reads the runtime's watcher, numbers every write, keeps the latest in a ring
//! (so a client can resume with `Last-Event-ID`) and hands them to the streams.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fsm_runtime::{EntryKind, Event, Lagged, Runtime};
use tokio::sync::broadcast;

use fsm_etcd::AnyStore;

/// What the feed hands the streams: a numbered write, or a gap the runtime's
/// watcher reported (then clients must re-read).
#[derive(Debug, Clone)]
pub enum Note {
    /// A write, as its event's JSON.
    Write { seq: u64, json: Arc<str> },
    /// Writes were missed: the stream says so.
    Gap { seq: u64 },
}

impl Note {
    /// The note's number.
    pub fn seq(&self) -> u64 {
        match self {
            Note::Write { seq, .. } | Note::Gap { seq } => *seq,
        }
    }
}

/// How many writes a feed keeps for clients that resume.
pub const KEPT: usize = 4096;

/// Counts of what happened on a machine since the service started.
#[derive(Debug, Default)]
pub struct Counters {
    /// Actions started.
    pub started: AtomicU64,
    /// Actions completed.
    pub completed: AtomicU64,
    /// Actions failed.
    pub failed: AtomicU64,
    /// Actions rolled back by the healer.
    pub healed: AtomicU64,
    /// Actions abandoned by their holder.
    pub abandoned: AtomicU64,
    /// Requests refused by a lost compare-and-set (409 conflict).
    pub conflicts: AtomicU64,
    /// Completions refused because the hold was revoked.
    pub revoked: AtomicU64,
}

/// One machine's feed.
#[derive(Debug)]
pub struct Feed {
    kept: std::sync::Mutex<VecDeque<Note>>,
    tx: broadcast::Sender<Note>,
    next: AtomicU64,
    /// The counters the feed keeps.
    pub counters: Counters,
}

impl Feed {
    /// A feed of `runtime`'s writes, read by a task on the current tokio runtime,
    /// which also lets go of the handles in `flights` of actions that others
    /// ended.
    pub fn start(
        machine: &str,
        runtime: &Runtime<AnyStore>,
        flights: Arc<crate::flights::Flights>,
    ) -> Result<Arc<Feed>, String> {
        let mut watcher = runtime
            .watch()
            .map_err(|e| format!("cannot watch machine `{machine}`: {e}"))?;
        let feed = Arc::new(Feed {
            kept: std::sync::Mutex::new(VecDeque::with_capacity(KEPT)),
            tx: broadcast::channel(1024).0,
            next: AtomicU64::new(1),
            counters: Counters::default(),
        });
        let (reader, runtime) = (feed.clone(), runtime.clone());
        let machine = machine.to_owned();
        tokio::spawn(async move {
            loop {
                let note = match watcher.recv_async().await {
                    Ok(event) => {
                        let stale = flights.ended(&machine, &event);
                        if !stale.is_empty() {
                            // Dropped, each handle tries to record its action
                            // abandoned, finds its hold gone, and writes
                            // nothing: a store call, off the async workers.
                            tokio::task::spawn_blocking(move || drop(stale));
                        }
                        reader.write(&runtime, &event)
                    }
                    Err(Lagged::Closed) => return,
                    Err(_) => Note::Gap {
                        seq: reader.next.fetch_add(1, Ordering::Relaxed),
                    },
                };
                reader.push(note);
            }
        });
        Ok(feed)
    }

    fn write(&self, runtime: &Runtime<AnyStore>, event: &Event) -> Note {
        let m = runtime.machine();
        let e = &event.entry;
        let counter = match e.kind {
            EntryKind::Started => Some(&self.counters.started),
            EntryKind::Completed => Some(&self.counters.completed),
            EntryKind::Failed => Some(&self.counters.failed),
            EntryKind::Healed => Some(&self.counters.healed),
            EntryKind::Abandoned => Some(&self.counters.abandoned),
            _ => None,
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let mut json = crate::json::entry_json(m, e);
        json.insert("seq".into(), seq.into());
        json.insert("id".into(), event.id.as_str().into());
        Note::Write {
            seq,
            json: serde_json::Value::Object(json).to_string().into(),
        }
    }

    fn push(&self, note: Note) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(note.clone());
        // Sent under the lock, so that a client that subscribes and then reads
        // what is kept misses nothing and sees nothing twice.
        let _ = self.tx.send(note);
    }

    /// A subscription to new notes, and the kept notes after `after` (all kept
    /// ones if `None`); `false` when notes after `after` were already dropped from
    /// the ring (the client must re-read).
    pub fn subscribe(&self, after: Option<u64>) -> (broadcast::Receiver<Note>, Vec<Note>, bool) {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let rx = self.tx.subscribe();
        let complete = match (after, kept.front()) {
            (Some(after), Some(first)) => after + 1 >= first.seq(),
            _ => true,
        };
        let replay = match after {
            Some(after) => kept.iter().filter(|n| n.seq() > after).cloned().collect(),
            None => Vec::new(),
        };
        (rx, replay, complete)
    }
}
