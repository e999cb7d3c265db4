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
    /// The number of this feed's first note: the time it started, in
    /// microseconds since the epoch (see [`Feed::start`]).
    first: u64,
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
        // Numbered from the time the feed starts, so that a later service (a
        // restart) or another one numbers past what an earlier one gave (unless
        // that one gave more than one note a microsecond): a client resuming
        // with another feed's number is told it missed writes (`subscribe`),
        // not handed this feed's notes as if they followed its own. (Below
        // 2^53 until the year 2255: exact as a JavaScript number.)
        let first = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |since| u64::try_from(since.as_micros()).unwrap_or(1))
            .max(1);
        let feed = Arc::new(Feed {
            kept: std::sync::Mutex::new(VecDeque::with_capacity(KEPT)),
            tx: broadcast::channel(1024).0,
            next: AtomicU64::new(first),
            first,
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

    /// A subscription to new notes from `after` on (a `Last-Event-ID`; `None`:
    /// from now).
    pub fn subscribe(&self, after: Option<u64>) -> Subscription {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let rx = self.tx.subscribe();
        // The newest note sent; a note numbered but not yet sent comes on `rx`.
        let newest = kept.back().map_or(self.first - 1, Note::seq);
        let (complete, replay, from) = match after {
            None => (true, Vec::new(), newest),
            // A number this feed has not given: an earlier service's (a
            // restart), another service's, or made up. What the client missed
            // is unknown: a gap, then what comes next.
            Some(after) if after > newest => (false, Vec::new(), newest),
            Some(after) => {
                let oldest = kept.front().map_or(newest + 1, Note::seq);
                let replay = kept.iter().filter(|n| n.seq() > after).cloned().collect();
                (after + 1 >= oldest, replay, after)
            }
        };
        Subscription {
            rx,
            replay,
            complete,
            from,
        }
    }
}

/// A stream's start: new notes, the kept ones to send first, and where it
/// stands.
#[derive(Debug)]
pub struct Subscription {
    /// The notes sent from now on.
    pub rx: broadcast::Receiver<Note>,
    /// The kept notes after the one the client named, oldest first.
    pub replay: Vec<Note>,
    /// `false` when notes the client has not seen were dropped from the ring,
    /// or its number is not this feed's: it must re-read (a `gap` first).
    pub complete: bool,
    /// The number the stream goes on after: notes up to it are not sent.
    pub from: u64,
}
