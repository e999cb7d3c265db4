//! Each machine's writes, as the watch stream and the counters see them: one task
//! reads the runtime's watcher, numbers every write, keeps the latest in a ring
//! (so a client can resume with `Last-Event-ID`) and hands them to the streams.
//!
//! A write's number is the store's position of it where the store has one
//! (etcd's revision: the same on every service of the store, so a client
//! resumes on any of them), and otherwise the feed's own count from its start
//! time. Either way numbers grow but need not be consecutive. A gap (writes the
//! watcher missed) is numbered one past the write before it and stands for the
//! numbers up to the write after it: a client that names one of those saw a
//! write this feed missed, and is told of the gap.

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
    /// Writes were missed: the stream says so. Numbered one past the write
    /// before it (a write after it may have the same number).
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
    /// Objects removed.
    pub removed: AtomicU64,
    /// Requests refused by a lost compare-and-set (409 conflict).
    pub conflicts: AtomicU64,
    /// Completions refused because the hold was revoked.
    pub revoked: AtomicU64,
}

/// One machine's feed.
#[derive(Debug)]
pub struct Feed {
    kept: std::sync::Mutex<Kept>,
    tx: broadcast::Sender<Note>,
    /// The counters the feed keeps.
    pub counters: Counters,
    /// The requests waiting for a busy object, told of its writes.
    pub turns: crate::turns::Turns,
}

/// The notes a feed keeps for clients that resume, and where it stands.
#[derive(Debug)]
struct Kept {
    notes: VecDeque<Note>,
    /// The number of the newest write numbered (at first, the feed's start:
    /// every write numbered past it reaches the feed).
    newest: u64,
    /// The feed has every write numbered past this: its start, then past the
    /// notes it let go.
    whole_from: u64,
}

/// Where a subscription starts (see [`Kept::resume`]).
#[derive(Debug)]
struct Resume {
    complete: bool,
    /// The kept notes to send first.
    replay: Vec<Note>,
    from: u64,
}

impl Kept {
    fn new(start: u64) -> Kept {
        Kept {
            notes: VecDeque::with_capacity(KEPT),
            newest: start,
            whole_from: start,
        }
    }

    /// The number of a write the store placed at `position` (or, without
    /// one, the next); `None` for a write placed at or before the newest,
    /// which the store placed before the feed started: no stream sends it.
    fn number(&self, position: Option<u64>) -> Option<u64> {
        match position {
            Some(p) => (p > self.newest).then_some(p),
            None => Some(self.newest + 1),
        }
    }

    /// Keeps `note`, letting the oldest go when full.
    fn keep(&mut self, note: Note) {
        if self.notes.len() == KEPT
            && let Some(gone) = self.notes.pop_front()
        {
            // A gap let go stands for the numbers up to the note after it.
            let past = match gone {
                Note::Write { seq, .. } => seq,
                Note::Gap { seq } => {
                    (self.notes.front()).map_or(seq, |n| n.seq().saturating_sub(1).max(seq))
                }
            };
            self.whole_from = self.whole_from.max(past);
        }
        if let Note::Write { seq, .. } = note {
            self.newest = seq;
        }
        self.notes.push_back(note);
    }

    /// A stream resumed after `after` (`None`: from now), `known` the highest
    /// number a write may have (the newest, or the store's position now):
    /// whether the stream has every write the client missed (else it starts
    /// with a gap), which kept notes to send first, and the
    /// number after which the stream goes on.
    fn resume(&self, after: Option<u64>, known: u64) -> Resume {
        let Some(after) = after else {
            return Resume {
                complete: true,
                replay: Vec::new(),
                from: self.newest,
            };
        };
        // A number past any a write has: an earlier service's (a restart, in
        // memory), another store's, or made up. What the client missed is
        // unknown: a gap, then what comes next.
        if after > known.max(self.newest) {
            return Resume {
                complete: false,
                replay: Vec::new(),
                from: self.newest,
            };
        }
        // Complete when every write past `after` is still kept, and `after`
        // does not fall in a gap (a write this feed missed).
        let in_gap = self
            .notes
            .iter()
            .rev()
            .find(|n| n.seq() <= after)
            .is_some_and(|n| matches!(n, Note::Gap { .. }));
        Resume {
            complete: after >= self.whole_from && !in_gap,
            replay: (self.notes.iter())
                .filter(|n| n.seq() > after)
                .cloned()
                .collect(),
            // Past the newest: a number another service gave, of writes this
            // feed has yet to see. The client has seen them.
            from: after,
        }
    }
}

impl Feed {
    /// A feed of `runtime`'s writes, read by a task on the current tokio runtime,
    /// which also lets go of the handles in `flights` of actions that others
    /// ended.
    ///
    /// On etcd a note's number is the write's revision. In memory the feed
    /// numbers its notes from the time it starts, in microseconds since the
    /// epoch, so that a later service (a restart) numbers past what an earlier
    /// one gave (unless that one gave more than one note a microsecond): a
    /// client resuming with another feed's number is told it missed writes
    /// (`subscribe`), not handed this feed's notes as if they followed its
    /// own. (Below 2^53 until the year 2255: exact as a JavaScript number.)
    pub fn start(
        machine: &str,
        runtime: &Runtime<AnyStore>,
        flights: Arc<crate::flights::Flights>,
    ) -> Result<Arc<Feed>, String> {
        let mut watcher = runtime
            .watch()
            .map_err(|e| format!("cannot watch machine `{machine}`: {e}"))?;
        // Read once the watcher exists: every write placed past it reaches it.
        let position = runtime
            .store()
            .position()
            .map_err(|e| format!("cannot watch machine `{machine}`: {e}"))?;
        let start = position.unwrap_or_else(|| {
            let first = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |since| u64::try_from(since.as_micros()).unwrap_or(1));
            first.max(1) - 1
        });
        let feed = Arc::new(Feed {
            kept: std::sync::Mutex::new(Kept::new(start)),
            tx: broadcast::channel(1024).0,
            counters: Counters::default(),
            turns: crate::turns::Turns::default(),
        });
        let (reader, runtime) = (feed.clone(), runtime.clone());
        let machine = machine.to_owned();
        tokio::spawn(async move {
            loop {
                match watcher.recv_async().await {
                    Ok(event) => {
                        let stale = flights.ended(&machine, &event);
                        if !stale.is_empty() {
                            // Dropped, each handle tries to record its action
                            // abandoned, finds its hold gone, and writes
                            // nothing: a store call, off the async workers.
                            tokio::task::spawn_blocking(move || drop(stale));
                        }
                        reader.count(&event);
                        reader.turns.wrote(event.id.as_str());
                        reader.push(|kept| {
                            let seq = kept.number(event.position)?;
                            Some(reader.write(&runtime, &event, seq))
                        });
                    }
                    Err(Lagged::Closed) => return,
                    Err(_) => {
                        reader.turns.missed_writes();
                        reader.push(|kept| {
                            Some(Note::Gap {
                                seq: kept.newest + 1,
                            })
                        })
                    }
                }
            }
        });
        Ok(feed)
    }

    fn count(&self, event: &Event) {
        let counter = match event.entry.kind {
            EntryKind::Started => Some(&self.counters.started),
            EntryKind::Completed => Some(&self.counters.completed),
            EntryKind::Failed => Some(&self.counters.failed),
            EntryKind::Healed => Some(&self.counters.healed),
            EntryKind::Abandoned => Some(&self.counters.abandoned),
            EntryKind::Removed => Some(&self.counters.removed),
            _ => None,
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn write(&self, runtime: &Runtime<AnyStore>, event: &Event, seq: u64) -> Note {
        let mut json = crate::json::entry_json(runtime.machine(), &event.entry);
        json.insert("seq".into(), seq.into());
        json.insert("id".into(), event.id.as_str().into());
        Note::Write {
            seq,
            json: serde_json::Value::Object(json).to_string().into(),
        }
    }

    /// Keeps and sends the note `make` numbers on what is kept, if any.
    fn push(&self, make: impl FnOnce(&Kept) -> Option<Note>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let Some(note) = make(&kept) else { return };
        kept.keep(note.clone());
        // Sent under the lock, so that a client that subscribes and then reads
        // what is kept misses nothing and sees nothing twice.
        let _ = self.tx.send(note);
    }

    /// The number of the newest write numbered so far (at first, the feed's
    /// start). Read before a list reads the store, it is where a watch
    /// resumes to meet every write the list may not show: each write numbered
    /// past it, and no write the list was read too early for is numbered at
    /// or before it.
    pub fn last_numbered(&self) -> u64 {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).newest
    }

    /// A subscription to new notes from `after` on (a `Last-Event-ID`; `None`:
    /// from now). `store_at`: the store's position now, where it has one
    /// ([`AnyStore::position`]: etcd's revision), so that a number another
    /// service gave, past what this one has seen yet, is known for one.
    pub fn subscribe(&self, after: Option<u64>, store_at: Option<u64>) -> Subscription {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let rx = self.tx.subscribe();
        let Resume {
            complete,
            replay,
            from,
        } = kept.resume(after, store_at.unwrap_or(0));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(seq: u64) -> Note {
        Note::Write {
            seq,
            json: Arc::from(""),
        }
    }

    /// The numbers of the notes `resume` replays.
    fn replayed(resume: &Resume) -> Vec<u64> {
        resume.replay.iter().map(Note::seq).collect()
    }

    #[test]
    fn a_feed_numbered_by_itself_resumes_where_the_client_was() {
        let mut kept = Kept::new(99);
        for _ in 0..3 {
            let seq = kept.number(None).unwrap();
            kept.keep(write(seq));
        }
        let resume = kept.resume(Some(100), 0);
        assert_eq!(replayed(&resume), [101, 102]);
        assert!(resume.complete);
        // From before the feed started (a restart) or past its newest: a gap.
        assert!(!kept.resume(Some(98), 0).complete);
        let unknown = kept.resume(Some(103), 0);
        assert_eq!((unknown.complete, unknown.from), (false, 102));
        // From now.
        let now = kept.resume(None, 0);
        assert_eq!(
            (now.complete, replayed(&now), now.from),
            (true, vec![], 102)
        );
    }

    #[test]
    fn a_positioned_feed_goes_on_from_a_number_it_has_yet_to_see() {
        let mut kept = Kept::new(10);
        // Placed before the feed started: no note.
        assert_eq!(kept.number(Some(9)), None);
        for position in [12, 15] {
            let seq = kept.number(Some(position)).unwrap();
            kept.keep(write(seq));
        }
        // 13 and 14 are other keys' revisions: nothing missed.
        let resume = kept.resume(Some(13), 20);
        assert_eq!((resume.complete, replayed(&resume)), (true, vec![15]));
        // Another service gave 18, not yet seen here: go on after it.
        let ahead = kept.resume(Some(18), 20);
        assert_eq!((ahead.complete, ahead.from), (true, 18));
        // Past the store's revision: none a service gave.
        assert!(!kept.resume(Some(21), 20).complete);
    }

    #[test]
    fn a_number_in_a_gap_is_told_of_it() {
        let mut kept = Kept::new(10);
        kept.keep(write(12));
        kept.keep(Note::Gap { seq: 13 });
        kept.keep(write(20));
        // After 12: the gap, then 20.
        let resume = kept.resume(Some(12), 20);
        assert_eq!((resume.complete, replayed(&resume)), (true, vec![13, 20]));
        // 16: a write this feed missed (another service saw it). What else
        // was missed is unknown here.
        let missed = kept.resume(Some(16), 20);
        assert_eq!((missed.complete, replayed(&missed)), (false, vec![20]));
        assert!(kept.resume(Some(20), 20).complete);
    }

    #[test]
    fn notes_let_go_leave_a_gap_for_those_who_needed_them() {
        let mut kept = Kept::new(0);
        kept.keep(write(1));
        kept.keep(Note::Gap { seq: 2 });
        for seq in 0..KEPT as u64 - 1 {
            kept.keep(write(10 + seq));
        }
        // The write 1 let go: a client after 0 missed it.
        assert!(!kept.resume(Some(0), 0).complete);
        assert!(kept.resume(Some(1), 0).complete);
        // The gap let go too: after 1 (or in it), writes were missed.
        kept.keep(write(10 + KEPT as u64));
        assert!(!kept.resume(Some(1), 0).complete);
        assert!(!kept.resume(Some(5), 0).complete);
        assert!(kept.resume(Some(9), 0).complete);

        // Numbered by the feed, the write after a gap has the gap's number:
        // a client after the write before it was told of nothing.
        let mut kept = Kept::new(0);
        kept.keep(write(1));
        kept.keep(Note::Gap { seq: 2 });
        kept.keep(write(2));
        let resume = kept.resume(Some(1), 0);
        assert_eq!((resume.complete, replayed(&resume)), (true, vec![2, 2]));
        for _ in 0..KEPT - 1 {
            let seq = kept.number(None).unwrap();
            kept.keep(write(seq));
        }
        assert!(!kept.resume(Some(1), 0).complete);
        assert!(kept.resume(Some(2), 0).complete);
    }
}
