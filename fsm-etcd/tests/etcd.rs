//! The store suite that the in-memory store passes, against a real etcd.
//!
//! The endpoint comes from `FSM_ETCD_ENDPOINTS` (comma-separated, default
//! `127.0.0.1:2379`). Without a reachable etcd the tests fail, saying how to get
//! one (`scripts/test` starts its own); `FSM_SKIP_ETCD=1` skips them instead, and
//! each skip is counted in the test command's closing line.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fsm_etcd::EtcdStore;
use fsm_runtime::testing::{check_store, machine};
use fsm_runtime::{
    Actor, EntryKind, Healer, Lagged, Runtime, RuntimeError, Store, StoreError, Watcher,
    check_history,
};

use support::{block_on, common, endpoints, fresh_prefix, store, store_at, with_etcd};

#[test]
fn etcd_passes_the_store_suite() {
    if store().is_none() {
        return;
    }
    check_store(|| store().expect("etcd was reachable a moment ago"));
}

#[test]
fn objects_on_etcd_survive_an_edited_spec() {
    let prefix = fresh_prefix();
    if store_at(&prefix).is_none() {
        return;
    }
    fsm_runtime::testing::specs_evolve(|| store_at(&prefix).expect("etcd was reachable"));
}

#[test]
fn removals_on_etcd_outlive_specs_that_cannot_read_them() {
    let prefix = fresh_prefix();
    if store_at(&prefix).is_none() {
        return;
    }
    fsm_runtime::testing::removals_outlive_specs_that_cannot_read_them(|| {
        store_at(&prefix).expect("etcd was reachable")
    });
}

#[test]
fn ids_with_slashes_keep_their_histories_apart() {
    let Some(store) = store() else { return };
    let rt = Runtime::new(machine(), store).unwrap();
    let user = Actor::new("user");
    rt.create("a", &user).unwrap();
    rt.create("a/b", &user).unwrap();
    rt.run("a/b", &user, "start").unwrap();
    assert_eq!(rt.history("a").unwrap().len(), 1);
    assert_eq!(rt.history("a/b").unwrap().len(), 3);
    let mut ids: Vec<String> = rt
        .store()
        .ids()
        .unwrap()
        .iter()
        .map(|i| i.to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["a", "a/b"]);
}

#[test]
fn two_stores_on_one_prefix_see_each_other() {
    let Some(first) = store() else { return };
    // The runtime's async calls await etcd's and run starts detached, as
    // `fsm_etcd::AnyStore` says for it too.
    assert!(!first.never_waits() && first.runs_detached());
    let any = fsm_etcd::AnyStore::Etcd(first.clone());
    assert!(!any.never_waits() && any.runs_detached());
    let second = EtcdStore::connect(endpoints(), first.prefix()).unwrap();
    let (a, b) = (
        Runtime::new(machine(), first).unwrap(),
        Runtime::new(machine(), second).unwrap(),
    );
    let mut watcher = b.watch().unwrap();
    let user = Actor::new("user");
    a.create("x", &user).unwrap();
    assert_eq!(b.state_name("x").unwrap(), "HALTED");
    // The second process's stale view loses the race.
    let flight = a.start("x", &user, "start").unwrap();
    assert!(b.start("x", &user, "start").is_err());
    flight.complete().unwrap();
    let event = watcher.recv().unwrap();
    assert_eq!((event.id.as_str(), event.entry.version), ("x", 1));
}

#[test]
fn an_unreachable_etcd_is_a_typed_error() {
    let err =
        EtcdStore::connect(["127.0.0.1:1"], "/nowhere/").expect_err("nothing listens on port 1");
    assert!(
        matches!(
            err,
            StoreError::Unavailable {
                retryable: true,
                ..
            }
        ),
        "{err:?}"
    );
}

/// The prefix a parent test hands its child processes.
const CHILD_PREFIX: &str = "FSM_ETCD_CHILD_PREFIX";

/// Runs the ignored test `name` of this binary as a child process on `prefix`.
fn child(name: &str, prefix: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            name,
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_PREFIX, prefix)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

const OBJECTS: [&str; 4] = ["obj-0", "obj-1", "obj-2", "obj-3"];

/// Races on `OBJECTS` under the parent's prefix and prints how many actions it
/// completed.
#[test]
#[ignore = "a child process of several_processes_never_lose_a_write"]
fn child_races() {
    let Ok(prefix) = std::env::var(CHILD_PREFIX) else {
        return;
    };
    let rt = Runtime::new(machine(), EtcdStore::connect(endpoints(), &prefix).unwrap()).unwrap();
    let actor = Actor::new(format!("process-{}", std::process::id()));
    let mut completed = 0;
    for i in 0..120 {
        let id = OBJECTS[(i * 7 + std::process::id() as usize) % OBJECTS.len()];
        let action = ["start", "stop", "resize", "reboot"][i % 4];
        if let Ok(flight) = rt.start(id, &actor, action)
            && flight.complete().is_ok()
        {
            completed += 1;
        }
    }
    println!("completed={completed}");
}

#[test]
fn several_processes_never_lose_a_write() {
    let Some(store) = store() else { return };
    let prefix = store.prefix().to_owned();
    let rt = Runtime::new(machine(), store).unwrap();
    for id in OBJECTS {
        rt.create(id, &Actor::new("admin")).unwrap();
    }
    let children: Vec<_> = (0..3).map(|_| child("child_races", &prefix)).collect();
    let mut completed = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let out = String::from_utf8_lossy(&out.stdout);
        let n: usize = out
            .lines()
            .find_map(|l| l.split("completed=").nth(1))
            .and_then(|n| n.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("child said: {out}"));
        completed += n;
    }
    assert!(completed > 0);
    let mut in_histories = 0;
    for id in OBJECTS {
        let history = rt.history(id).unwrap();
        check_history(rt.machine(), &history).unwrap();
        let record = rt.get(id).unwrap();
        assert_eq!(Some(record.state), history.last().map(|e| e.to));
        assert_eq!(record.version, history.len() as u64);
        in_histories += history
            .iter()
            .filter(|e| e.kind == EntryKind::Completed)
            .count();
    }
    assert_eq!(
        in_histories, completed,
        "every completed action, and only those"
    );
}

/// Starts an action and dies without finishing it or saying so.
#[test]
#[ignore = "a child process of a_dead_process_is_healed_once_its_lease_expires"]
fn child_dies_holding_an_action() {
    let Ok(prefix) = std::env::var(CHILD_PREFIX) else {
        return;
    };
    let store = EtcdStore::builder(endpoints(), &prefix)
        .lease_ttl(Duration::from_secs(1))
        .connect()
        .unwrap();
    let rt = Runtime::new(machine(), store).unwrap();
    let flight = rt.start("vm", &Actor::new("doomed"), "start").unwrap();
    std::mem::forget(flight);
    println!("started");
    std::process::exit(0);
}

#[test]
fn a_dead_process_is_healed_once_its_lease_expires() {
    let Some(store) = store() else { return };
    let prefix = store.prefix().to_owned();
    let rt = Runtime::new(machine(), store).unwrap();
    rt.create("vm", &Actor::new("admin")).unwrap();
    let out = child("child_dies_holding_an_action", &prefix)
        .wait_with_output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("started"));
    assert_eq!(rt.state_name("vm").unwrap(), "STARTING");

    // Until the lease expires the action is held; then it shows abandoned.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !rt.get("vm").unwrap().in_flight.unwrap().abandoned {
        assert!(Instant::now() < deadline, "the lease never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    match rt.start("vm", &Actor::new("user"), "stop") {
        Err(RuntimeError::Busy {
            abandoned, holder, ..
        }) => {
            assert!(abandoned);
            assert_eq!(holder, "doomed");
        }
        other => panic!("{other:?}"),
    }
    // The healer does not wait for its timeout on an abandoned action.
    let report = Healer::new()
        .deadline(Duration::from_secs(3600))
        .heal(&rt)
        .unwrap();
    assert_eq!(report.healed.len(), 1, "{report:?}");
    assert!(report.healed[0].abandoned);
    assert_eq!(report.healed[0].restored, "HALTED");
    assert_eq!(rt.state_name("vm").unwrap(), "HALTED");
    check_history(rt.machine(), &rt.history("vm").unwrap()).unwrap();
}

/// An etcd server of the test's own, on its own ports and data directory.
struct OwnEtcd {
    process: std::process::Child,
    dir: std::path::PathBuf,
    client_port: u16,
}

impl OwnEtcd {
    /// Starts (or restarts, on the same data) etcd in `dir`; `None` when there is
    /// no `etcd` binary and `FSM_SKIP_ETCD` is set.
    fn start(dir: &std::path::Path, client_port: u16) -> Option<OwnEtcd> {
        let url = |port: u16| format!("http://127.0.0.1:{port}");
        let peer = client_port + 10;
        let process = std::process::Command::new("etcd")
            .args(["--name", "fault", "--data-dir"])
            .arg(dir.join("data"))
            .args(["--listen-client-urls", &url(client_port)])
            .args(["--advertise-client-urls", &url(client_port)])
            .args(["--listen-peer-urls", &url(peer)])
            .args(["--initial-advertise-peer-urls", &url(peer)])
            .args(["--initial-cluster", &format!("fault={}", url(peer))])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let process = match process {
            Ok(p) => p,
            Err(e) => {
                common::missing(
                    "FSM_SKIP_ETCD",
                    &format!("cannot run the `etcd` binary ({e})"),
                    "scripts/test installs it (Debian: etcd-server)",
                );
                return None;
            }
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", client_port)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(OwnEtcd {
            process,
            dir: dir.to_owned(),
            client_port,
        })
    }

    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Kills it the hard way.
    fn kill(mut self) -> std::path::PathBuf {
        let _ = self.process.kill();
        let _ = self.process.wait();
        self.dir.clone()
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[test]
fn killing_etcd_mid_run_loses_no_accepted_action() {
    let dir = std::env::temp_dir().join(format!("fsm-etcd-fault-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(etcd) = OwnEtcd::start(&dir, 23795) else {
        return;
    };
    // A fresh etcd may take a moment to answer its first requests.
    let deadline = Instant::now() + Duration::from_secs(20);
    let store = loop {
        match EtcdStore::builder([etcd.endpoint()], "/fault/")
            .timeout(Duration::from_secs(1))
            .connect()
        {
            Ok(store) => break store,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("etcd never answered: {e}"),
        }
    };
    let rt = Runtime::new(machine(), store).unwrap();
    for id in OBJECTS {
        rt.create(id, &Actor::new("admin")).unwrap();
    }
    let completed = AtomicUsize::new(0);
    let ambiguous = AtomicUsize::new(0);
    let refused_retryable = AtomicUsize::new(0);
    let restarted = std::sync::atomic::AtomicBool::new(false);
    let mut watcher = rt.watch().unwrap();
    let mut seen = Vec::new();
    let done = std::sync::atomic::AtomicBool::new(false);
    let etcd = std::thread::scope(|s| {
        // A watcher reads throughout, across the restart.
        let (watcher, seen, done) = (&mut watcher, &mut seen, &done);
        s.spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if !read_some(watcher, seen) {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        });
        let mut actors = Vec::new();
        for t in 0..3 {
            let (rt, completed, ambiguous, refused, restarted) =
                (&rt, &completed, &ambiguous, &refused_retryable, &restarted);
            actors.push(s.spawn(move || {
                let actor = Actor::new(format!("actor-{t}"));
                let mut i = 0;
                // Until some time after the restart.
                let mut after = 0;
                while after < 100 {
                    i += 1;
                    if restarted.load(Ordering::Relaxed) {
                        after += 1;
                    }
                    let id = OBJECTS[(i * 7 + t) % OBJECTS.len()];
                    let action = ["start", "stop", "resize", "reboot"][i % 4];
                    match rt.start(id, &actor, action) {
                        Ok(flight) => match flight.complete() {
                            Ok(_) => {
                                completed.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(RuntimeError::Store(e)) => {
                                assert!(e.is_retryable(), "{e}");
                                ambiguous.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => {}
                        },
                        Err(RuntimeError::Store(e)) => {
                            assert!(e.is_retryable(), "a lost etcd is retryable: {e}");
                            refused.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(_) => {}
                    }
                }
            }));
        }
        // Kill etcd in the middle of the run, then start it again on its data.
        while completed.load(Ordering::Relaxed) < 60 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let dir = etcd.kill();
        std::thread::sleep(Duration::from_millis(500));
        let etcd = OwnEtcd::start(&dir, 23795).expect("etcd restarts");
        restarted.store(true, Ordering::Relaxed);
        for actor in actors {
            actor.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        etcd
    });
    assert!(
        refused_retryable.load(Ordering::Relaxed) + ambiguous.load(Ordering::Relaxed) > 0,
        "the actors never noticed etcd was gone"
    );
    // Actions whose handles were lost with the connection are abandoned: heal them.
    Healer::new()
        .deadline(Duration::from_secs(3600))
        .heal(&rt)
        .unwrap();
    // The watcher saw each object's versions one after the other across the
    // restart (or was told of a gap), up to the last.
    let last: Vec<(String, u64)> = OBJECTS
        .iter()
        .map(|&id| (id.to_string(), rt.get(id).unwrap().version))
        .collect();
    read_until(&mut watcher, &mut seen, &last);
    assert_contiguous_or_lagged(&seen);
    let mut in_histories = 0;
    for id in OBJECTS {
        let history = rt.history(id).unwrap();
        check_history(rt.machine(), &history).unwrap_or_else(|e| panic!("{id}: {e}"));
        let record = rt.get(id).unwrap();
        assert_eq!(Some(record.state), history.last().map(|e| e.to), "{id}");
        assert_eq!(record.version, history.len() as u64, "{id}");
        in_histories += history
            .iter()
            .filter(|e| e.kind == EntryKind::Completed)
            .count();
    }
    // Every accepted completion is stored; an ambiguous one (the answer was lost
    // with the connection) may or may not be.
    let (ok, maybe) = (completed.into_inner(), ambiguous.into_inner());
    assert!(
        ok <= in_histories && in_histories <= ok + maybe,
        "{ok} accepted, {maybe} ambiguous, {in_histories} in the histories"
    );
    drop(etcd);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_foreign_value_under_the_prefix_is_a_clear_error() {
    let Some(store) = store() else { return };
    let key = format!("{}obj/x", store.prefix());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = etcd_client::Client::connect(endpoints(), None)
            .await
            .unwrap();
        client
            .put(key.as_str(), "not a record", None)
            .await
            .unwrap();
    });
    let rt = Runtime::new(machine(), store).unwrap();
    match rt.store().load(&"x".into()) {
        Err(e @ StoreError::Unreadable { .. }) => {
            assert!(!e.is_retryable());
            let message = e.to_string();
            assert!(message.contains(&key), "{message}");
            assert!(message.contains("not what fsm stores"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// A TCP proxy between one client and etcd that can cut the client off: a network
/// partition of that client alone, while others still reach etcd directly.
struct Partition {
    addr: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Partition {
    /// A proxy to `upstream` (`host:port`), passing traffic until cut.
    fn to(upstream: &str) -> Partition {
        use std::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::<TcpStream>::new()));
        let (upstream, accepting_cut, accepting_open) =
            (upstream.to_owned(), cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                // Cut off: the connection goes nowhere.
                if accepting_cut.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let mut open = accepting_open.lock().unwrap();
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server.try_clone().unwrap(), client.try_clone().unwrap()),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
                open.extend([client, server]);
            }
        });
        Partition { addr, cut, open }
    }

    fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    /// Cuts the client off: its connections close and new ones go nowhere.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Lets the client through again.
    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// A process cut off from etcd for longer than its lease: a healer in another
/// process rolls its action back, and when the partition heals, the original
/// holder learns it was revoked (by whom) and its completion is a `409 Conflict`
/// that writes nothing.
#[test]
fn a_partition_longer_than_the_lease_is_healed_elsewhere_and_fenced_off() {
    let Some(healer_store) = store() else { return };
    let prefix = healer_store.prefix().to_owned();
    let partition = Partition::to(&endpoints()[0]);
    let cut_off_store = EtcdStore::builder([partition.endpoint()], &prefix)
        .lease_ttl(Duration::from_secs(1))
        .timeout(Duration::from_millis(500))
        .connect()
        .unwrap();
    let elsewhere = Runtime::new(machine(), healer_store).unwrap();
    let cut_off = Runtime::new(machine(), cut_off_store).unwrap();
    let admin = Actor::new("admin");
    cut_off.create("vm", &admin).unwrap();
    cut_off.create("other", &admin).unwrap();
    let flight = cut_off
        .start("vm", &Actor::new("slow-worker"), "start")
        .unwrap();
    let fence = flight.fence();
    let before = elsewhere.get("vm").unwrap();
    assert!(before.in_flight.as_ref().is_some_and(|h| !h.abandoned));

    partition.cut();
    // Cut off, the process can neither read nor write: a retryable error.
    match cut_off.start("other", &admin, "start") {
        Err(RuntimeError::Store(e)) => assert!(e.is_retryable(), "{e}"),
        other => panic!("a cut-off start answered {other:?}"),
    }
    // Elsewhere, once the lease has expired, the action reads as abandoned...
    let deadline = Instant::now() + Duration::from_secs(30);
    while !elsewhere.get("vm").unwrap().in_flight.unwrap().abandoned {
        assert!(Instant::now() < deadline, "the cut-off lease never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    // ...and a healer there rolls it back at once.
    let report = Healer::new()
        .deadline(Duration::from_secs(3600))
        .heal(&elsewhere)
        .unwrap();
    assert_eq!(report.healed.len(), 1, "{report:?}");
    assert!(report.healed[0].abandoned);
    assert_eq!(elsewhere.state_name("vm").unwrap(), "HALTED");
    let healed = elsewhere.get("vm").unwrap();
    let history_len = elsewhere.history("vm").unwrap().len();

    partition.heal();
    // Back on the network, the holder finds out it no longer holds the object.
    let deadline = Instant::now() + Duration::from_secs(30);
    let revoked = loop {
        match flight.still_held() {
            Err(RuntimeError::Store(e)) if e.is_retryable() => {
                assert!(Instant::now() < deadline, "never reconnected: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            other => break other,
        }
    };
    match revoked {
        Err(RuntimeError::Revoked {
            fence: revoked, by, ..
        }) => {
            assert_eq!(revoked, fence);
            assert_eq!(by.expect("the history says who").by, "healer");
        }
        other => panic!("expected Revoked, got {other:?}"),
    }
    // Its completion loses the compare-and-set and writes nothing.
    match flight.complete() {
        Err(RuntimeError::Conflict { .. }) => {}
        other => panic!("expected a 409 Conflict, got {other:?}"),
    }
    let after = elsewhere.get("vm").unwrap();
    assert_eq!(after, healed, "the late completion changed the record");
    assert_eq!(elsewhere.history("vm").unwrap().len(), history_len);
    check_history(elsewhere.machine(), &elsewhere.history("vm").unwrap()).unwrap();
    // And the process works again.
    cut_off.run("other", &admin, "start").unwrap();
}

/// What a watcher read: an event's object and version, or why it had none.
type Seen = Result<(String, u64), Lagged>;

/// Reads what `watcher` has buffered into `seen`; whether there was anything.
fn read_some(watcher: &mut Watcher, seen: &mut Vec<Seen>) -> bool {
    let mut any = false;
    loop {
        match watcher.try_recv() {
            Ok(Some(event)) => seen.push(Ok((event.id.to_string(), event.entry.version))),
            Ok(None) => return any,
            Err(lag) => seen.push(Err(lag)),
        }
        any = true;
    }
}

/// Reads `watcher` until it has seen every `(object, version)` of `last`.
fn read_until(watcher: &mut Watcher, seen: &mut Vec<Seen>, last: &[(String, u64)]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !last
        .iter()
        .all(|want| seen.iter().any(|s| s.as_ref() == Ok(want)))
    {
        assert!(
            Instant::now() < deadline,
            "the watcher never saw {last:?}; it saw {seen:?}"
        );
        if !read_some(watcher, seen) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Each object's versions follow one another, except across a lag the watcher
/// was told of.
fn assert_contiguous_or_lagged(seen: &[Seen]) {
    let mut last = std::collections::HashMap::new();
    for (at, s) in seen.iter().enumerate() {
        match s {
            Ok((id, version)) => {
                if let Some(before) = last.insert(id, *version) {
                    assert_eq!(
                        *version,
                        before + 1,
                        "{id} went from {before} to {version} unannounced (read {at} of {seen:?})"
                    );
                }
            }
            Err(Lagged::Closed) => panic!("the watcher closed: {seen:?}"),
            Err(_) => last.clear(),
        }
    }
}

/// Held by the test that compacts etcd and by those whose watches begin
/// again on purpose, which a compaction between would cut off.
fn apart_from_compactions() -> std::sync::MutexGuard<'static, ()> {
    static COMPACTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    COMPACTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Puts each of `keys` (as another program would), then compacts everything
/// etcd has written so far.
fn compact_everything(keys: &[String]) {
    block_on(async {
        let mut client = etcd_client::Client::connect(endpoints(), None)
            .await
            .unwrap();
        for key in keys {
            client.put(key.as_str(), "not fsm's", None).await.unwrap();
        }
        let now = client.get("/", None).await.unwrap();
        let revision = now.header().unwrap().revision();
        client.compact(revision, None).await.unwrap();
    });
}

/// A watcher cut off while etcd compacts away the revisions it would resume from
/// is told of the gap, then goes on with the events etcd kept.
#[test]
fn a_watch_resumed_past_a_compaction_reports_the_gap() {
    let _apart = apart_from_compactions();
    let Some(writer) = store() else { return };
    let prefix = writer.prefix().to_owned();
    let partition = Partition::to(&endpoints()[0]);
    let watching = EtcdStore::builder([partition.endpoint()], &prefix)
        .timeout(Duration::from_millis(500))
        .connect()
        .unwrap();
    let writer = Runtime::new(machine(), writer).unwrap();
    let watching = Runtime::new(machine(), watching).unwrap();
    let mut watcher = watching.watch().unwrap();
    let mut seen = Vec::new();
    let admin = Actor::new("admin");
    writer.create("vm", &admin).unwrap();
    read_until(&mut watcher, &mut seen, &[("vm".into(), 1)]);

    partition.cut();
    writer.run("vm", &admin, "start").unwrap();
    compact_everything(&[]);
    partition.heal();
    writer.run("vm", &admin, "stop").unwrap();

    read_until(&mut watcher, &mut seen, &[("vm".into(), 5)]);
    assert_contiguous_or_lagged(&seen);
    let gap = seen.iter().position(|s| *s == Err(Lagged::Gap));
    let gap = gap.unwrap_or_else(|| panic!("no gap reported: {seen:?}"));
    assert_eq!(seen[..gap], [Ok(("vm".to_string(), 1))]);
    // Versions 2 and 3 were compacted away (the last write of the compacted
    // range may survive it); 4 and 5 follow.
    assert!(!seen.contains(&Ok(("vm".into(), 2))), "{seen:?}");
    assert!(
        seen.ends_with(&[Ok(("vm".into(), 4)), Ok(("vm".into(), 5))]),
        "{seen:?}"
    );
}

/// A feed begun again (here by a reconnection) past a compaction of
/// others' writes only, its prefix's last write seen, tells no gap: nothing
/// of the prefix was lost, and its watchers go on with the next write. (Its
/// watch is refused all the same: the revision it resumes from is gone.)
#[test]
fn a_feed_begun_again_past_a_compaction_of_others_writes_tells_no_gap() {
    let _apart = apart_from_compactions();
    let Some((rt, prefix, admin)) = created(&["vm"]) else {
        return;
    };
    let mut watcher = rt.watch().unwrap();
    rt.run("vm", &admin, "start").unwrap();
    let mut seen = Vec::new();
    read_until(&mut watcher, &mut seen, &[("vm".into(), 3)]);
    // Others write, then etcd compacts everything: the revision after the
    // prefix's last write is gone.
    let elsewhere = format!("{}-elsewhere/", prefix.trim_end_matches('/'));
    let others: Vec<String> = (0..5).map(|n| format!("{elsewhere}{n}")).collect();
    compact_everything(&others);
    rt.store()
        .reconnect(&fsm_etcd::EtcdAccess::new(endpoints()))
        .unwrap();
    rt.run("vm", &admin, "stop").unwrap();
    read_until(&mut watcher, &mut seen, &[("vm".into(), 5)]);
    assert_eq!(
        seen,
        (2..=5)
            .map(|v| Ok(("vm".to_string(), v)))
            .collect::<Vec<_>>()
    );
}

/// A task of the current runtime that counts its turns, yielding after each:
/// the count moves only while the thread is left to other tasks.
fn counting_turns() -> (std::sync::Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let turns = std::sync::Arc::new(AtomicUsize::new(0));
    let counting = turns.clone();
    let counter = tokio::spawn(async move {
        loop {
            counting.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    });
    (turns, counter)
}

/// A store's first watch reads etcd's revision (its feed starts there):
/// awaited through `watch_async`, it leaves the thread to other tasks, as
/// `awaited_etcd_calls_leave_the_thread_to_other_tasks` below shows of the
/// other calls (a fresh store for each try: only its first watch asks etcd).
#[test]
fn a_first_awaited_watch_leaves_the_thread_to_other_tasks() {
    let thread = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut most = 0;
    for _ in 0..20 {
        let Some(store) = store() else { return };
        let rt = Runtime::new(machine(), store).unwrap();
        let turns = thread.block_on(async {
            let (turns, counter) = counting_turns();
            let before = turns.load(Ordering::Relaxed);
            let mut watcher = rt.watch_async().await.unwrap();
            let during = turns.load(Ordering::Relaxed) - before;
            counter.abort();
            // The watch works: it sees the next write.
            rt.create_async("w", &Actor::new("user")).await.unwrap();
            let event = tokio::time::timeout(Duration::from_secs(10), watcher.recv_async())
                .await
                .expect("the creation is told")
                .unwrap();
            assert_eq!(event.entry.kind, EntryKind::Created);
            during
        });
        most = most.max(turns);
        if most > 0 {
            break;
        }
    }
    assert!(
        most > 0,
        "the counting task never ran during a first watch_async in 20 tries"
    );
}

/// An awaited call on etcd leaves the caller's thread to its other tasks: on a
/// current-thread runtime, a task counting its turns goes on counting while
/// `create_async`, `start_async`, `complete_async`, `state_async` and
/// `ids_async` wait for etcd. A call that blocked the thread would leave the
/// count where it was every time; a call that does not may still find its
/// answer ready when first polled (the thread was preempted meanwhile, on a
/// loaded machine), so each kind of call gets up to 20 tries to show a turn.
#[test]
fn awaited_etcd_calls_leave_the_thread_to_other_tasks() {
    let Some(store) = store() else { return };
    let rt = Runtime::new(machine(), store).unwrap();
    let thread = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    thread.block_on(async {
        let (turns, counter) = counting_turns();
        let user = Actor::new("user");
        let turns_now = || turns.load(Ordering::Relaxed);
        const CALLS: [&str; 5] = [
            "create_async",
            "start_async",
            "complete_async",
            "state_async",
            "ids_async",
        ];
        let mut most = [0; CALLS.len()];
        for n in 0..20 {
            let id = format!("a{n}");
            let mut during = Vec::new();
            let before = turns_now();
            rt.create_async(id.as_str(), &user).await.unwrap();
            during.push(turns_now() - before);
            let before = turns_now();
            let flight = rt.start_async(id.as_str(), &user, "start").await.unwrap();
            during.push(turns_now() - before);
            let before = turns_now();
            let record = flight.complete_async().await.unwrap();
            during.push(turns_now() - before);
            let before = turns_now();
            let state = rt.state_async(id.as_str()).await.unwrap();
            during.push(turns_now() - before);
            let before = turns_now();
            let ids = rt.store().ids_async().await.unwrap();
            during.push(turns_now() - before);
            assert_eq!((state, ids.len()), (record.state, n + 1));
            assert_eq!(rt.machine().state(record.state).name, "RUNNING");
            for (most, turns) in most.iter_mut().zip(during) {
                *most = (*most).max(turns);
            }
            if most.iter().all(|&t| t > 0) {
                break;
            }
        }
        counter.abort();
        for (what, turns) in CALLS.iter().zip(most) {
            assert!(
                turns > 0,
                "the counting task never ran during {what} in 20 tries: {most:?}"
            );
        }
    });
}

/// The keys of objects under `prefix` (no process's `live/` key), in order.
fn object_keys(prefix: &str) -> Vec<String> {
    let mut keys = keys_under(prefix);
    keys.retain(|k| !k.starts_with("live/"));
    keys.sort();
    keys
}

/// The keys under `prefix`, without it.
fn keys_under(prefix: &str) -> Vec<String> {
    with_etcd(|mut client| async move {
        let got = client
            .get(
                prefix,
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_keys_only(),
                ),
            )
            .await
            .unwrap();
        got.kvs()
            .iter()
            .map(|kv| {
                kv.key_str()
                    .unwrap()
                    .strip_prefix(prefix)
                    .unwrap()
                    .to_owned()
            })
            .collect()
    })
}

fn etcd_value(key: &str) -> String {
    with_etcd(|mut client| async move {
        let got = client.get(key, None).await.unwrap();
        got.kvs()[0].value_str().unwrap().to_owned()
    })
}

fn etcd_put(key: &str, value: &str) {
    with_etcd(|mut client| async move { client.put(key, value, None).await.unwrap() });
}

/// A runtime on a fresh prefix with `ids` created, the prefix and an actor.
fn created(ids: &[&str]) -> Option<(Runtime<EtcdStore>, String, Actor)> {
    let store = store()?;
    let prefix = store.prefix().to_owned();
    let rt = Runtime::new(machine(), store).unwrap();
    let admin = Actor::new("admin");
    for id in ids {
        rt.create(*id, &admin).unwrap();
    }
    Some((rt, prefix, admin))
}

/// A start writes the record and its entry and nothing per object besides: the
/// holder names the process's session, whose one key lives on the process's
/// lease.
#[test]
fn a_holder_names_its_process_session_and_nothing_else_is_written() {
    let Some((rt, prefix, admin)) = created(&["vm"]) else {
        return;
    };
    let flight = rt.start("vm", &admin, "start").unwrap();
    let holder = rt.get("vm").unwrap().in_flight.unwrap();
    let session = holder.session.expect("the start named its session");
    assert!(!holder.abandoned);
    let mut keys = keys_under(&prefix);
    keys.sort();
    assert_eq!(
        keys,
        [
            "hist/vm/00000000000000000001".to_owned(),
            "hist/vm/00000000000000000002".to_owned(),
            format!("live/{session:x}"),
            "obj/vm".to_owned(),
        ]
    );
    let record = flight.complete().unwrap();
    assert!(record.in_flight.is_none());
    assert_eq!(
        keys_under(&prefix).len(),
        5,
        "only the completion's entry more"
    );
}

/// A removal leaves no record or history key of the object behind, only its
/// emptied `obj/` key (the id's next object goes on from it) and `gone/` (the removal's
/// entry, which every process reads); the entry
/// watchers get was written to etcd: a second store's watcher, on its own
/// watch of etcd, gets it. A last history key left by a removal whose second
/// request failed is deleted by the next creation of the id, numbered after
/// the removal, in whichever process creates it.
#[test]
fn a_removal_leaves_no_key_and_a_creation_clears_what_one_left() {
    let Some((rt, prefix, admin)) = created(&["vm", "other"]) else {
        return;
    };
    let second = EtcdStore::connect(endpoints(), &prefix).unwrap();
    let elsewhere = Runtime::new(machine(), second).unwrap();
    let mut watcher = elsewhere.watch().unwrap().only("vm");
    rt.run("vm", &admin, "start").unwrap();
    let removed = rt.remove("vm", &admin).unwrap_err();
    assert!(
        matches!(removed, RuntimeError::NotRemovable { .. }),
        "{removed}"
    );
    rt.run("vm", &admin, "stop").unwrap();
    // The last entry, as stored, made the removal's (what a removal puts).
    let mut left: serde_json::Value = serde_json::from_str(&etcd_value(&format!(
        "{prefix}hist/vm/00000000000000000005"
    )))
    .unwrap();
    left["kind"] = "Removed".into();
    left["version"] = 6.into();
    left.as_object_mut().unwrap().remove("action");
    let removed = rt.remove("vm", &admin).unwrap();
    assert_eq!((removed.kind, removed.version), (EntryKind::Removed, 6));
    let keys = object_keys(&prefix);
    assert_eq!(
        keys,
        [
            "gone/vm",
            "hist/other/00000000000000000001",
            "obj/other",
            "obj/vm"
        ]
    );
    assert_eq!(etcd_value(&format!("{prefix}obj/vm")), "", "emptied");
    assert_eq!(
        elsewhere.store().ids().unwrap(),
        [fsm_runtime::ObjectId::from("other")],
        "listed by no one"
    );
    let kinds: Vec<(u64, EntryKind)> = (0..5)
        .map(|_| watcher.recv().unwrap().entry)
        .map(|e| (e.version, e.kind))
        .collect();
    assert_eq!(kinds.last(), Some(&(6, EntryKind::Removed)), "{kinds:?}");
    assert!(
        elsewhere.get("vm").is_err(),
        "the other store reads it gone"
    );
    assert_eq!(
        elsewhere.removal_of("vm").unwrap(),
        Some(removed),
        "the other store reads how it went"
    );
    // An earlier version of the store left `gone/` empty: no removal to tell.
    etcd_put(&format!("{prefix}gone/vm"), "");
    assert_eq!(rt.removal_of("vm").unwrap(), None);

    // What a removal leaves when its second request fails: its last key. The
    // absent object shows no history all the same, and a creation deletes it.
    etcd_put(
        &format!("{prefix}hist/vm/00000000000000000006"),
        &left.to_string(),
    );
    assert_eq!(rt.history("vm").unwrap(), []);
    // Created by the process that did not remove it (and kept nothing of it).
    let created = elsewhere.create("vm", &admin).unwrap();
    assert_eq!(created.version, 7, "numbered after the removal");
    let history = rt.history("vm").unwrap();
    assert_eq!(
        history
            .iter()
            .map(|e| (e.version, e.kind))
            .collect::<Vec<_>>(),
        [(7, EntryKind::Created)]
    );
    check_history(rt.machine(), &history).unwrap();
    let keys = object_keys(&prefix);
    assert_eq!(
        keys,
        [
            "hist/other/00000000000000000001",
            "hist/vm/00000000000000000007",
            "obj/other",
            "obj/vm"
        ],
        "the mark and the left key gone"
    );
    assert_eq!(
        rt.get("vm").unwrap().version,
        7,
        "the other process reads it"
    );
}

#[test]
fn etcd_forgets_removals_and_keeps_versions_apart() {
    let Some(store) = store() else { return };
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    fsm_runtime::testing::forgotten_removals_keep_versions_apart(store, |store| {
        store.forget_removals(later).unwrap()
    });
}

/// Forgetting removals deletes what the removals made before the time given
/// left (the emptied `obj/` key, `gone/`, a last history key its clean-up
/// left), no other removal's (a later one; one made by an earlier version of
/// the store, whose `gone/` is empty, with no time to go by; one that cannot
/// be read, which stops no other's forgetting), and raises the
/// key `floor` to the highest version forgotten first. A process that never
/// read the floor creates a new id past it all the same, and so does one
/// creating the forgotten id.
#[test]
fn forgetting_deletes_the_old_removals_keys_and_raises_the_floor() {
    let Some(store) = store() else { return };
    let prefix = store.prefix().to_owned();
    let start = std::time::UNIX_EPOCH + Duration::from_secs(1 << 30);
    let clock = std::sync::Arc::new(fsm_runtime::ManualClock::new(start));
    let rt = Runtime::builder(machine(), store)
        .clock(clock.clone())
        .build()
        .unwrap();
    let admin = Actor::new("admin");
    for id in ["old", "older-format", "garbled", "new"] {
        rt.create(id, &admin).unwrap();
    }
    rt.run("old", &admin, "resize").unwrap();
    let old = rt.remove("old", &admin).unwrap();
    let older_format = rt.remove("older-format", &admin).unwrap();
    etcd_put(&format!("{prefix}gone/older-format"), "");
    // A removal that cannot be read is kept, and stops no other's forgetting.
    rt.remove("garbled", &admin).unwrap();
    etcd_put(&format!("{prefix}gone/garbled"), "{not json");
    // What the old removal's clean-up would have left, had it failed.
    etcd_put(
        &format!("{prefix}hist/old/00000000000000000004"),
        &etcd_value(&format!("{prefix}gone/old")),
    );
    clock.advance(Duration::from_secs(60));
    let between = fsm_runtime::Clock::now(&*clock);
    clock.advance(Duration::from_secs(60));
    let new = rt.remove("new", &admin).unwrap();

    assert_eq!(rt.store().forget_removals(between).unwrap(), 1);
    assert_eq!(
        object_keys(&prefix),
        [
            "floor",
            "format",
            "gone/garbled",
            "gone/new",
            "gone/older-format",
            "obj/garbled",
            "obj/new",
            "obj/older-format"
        ]
    );
    assert_eq!(
        etcd_value(&format!("{prefix}floor")),
        old.version.to_string()
    );
    assert_eq!(
        etcd_value(&format!("{prefix}format")),
        fsm_etcd::FORMAT.to_string(),
        "the prefix marked as of the format that forgets"
    );
    assert_eq!(rt.removal_of("old").unwrap(), None);
    assert_eq!(rt.removal_of("new").unwrap(), Some(new.clone()));
    assert_eq!(
        rt.store().forget_removals(between).unwrap(),
        0,
        "none left that old"
    );

    // Another process, which never read the floor, then this one, which
    // raised it.
    let elsewhere = Runtime::new(machine(), store_at(&prefix).unwrap()).unwrap();
    let created = [
        (&elsewhere, "fresh", old.version),
        (&elsewhere, "old", old.version),
        (&elsewhere, "new", new.version),
        (&elsewhere, "older-format", older_format.version),
        (&rt, "fresh-here", old.version),
    ];
    for (runtime, id, past) in created {
        let version = runtime.create(id, &admin).unwrap().version;
        assert_eq!(version, past + 1, "{id}");
        check_history(rt.machine(), &rt.history(id).unwrap()).unwrap();
    }
}

/// Two processes create, move and remove the same ids over and over, while a
/// third forgets every removal again and again: each id's writes, as a
/// fourth process's watch delivers them (in the order etcd applied them),
/// only ever go up in version, across every object of the id. Asserts the
/// races: requests lost to the other process, removals forgotten, and
/// objects created past the floor (raised by another id's removal) rather
/// than past their own id's removal.
#[test]
fn processes_creating_removing_and_forgetting_at_once_never_repeat_a_version() {
    let Some(first) = store() else { return };
    let prefix = first.prefix().to_owned();
    let open = || Runtime::new(machine(), store_at(&prefix).unwrap()).unwrap();
    let (a, b, forgetter) = (Runtime::new(machine(), first).unwrap(), open(), open());
    let watching = open();
    let mut watcher = watching.watch().unwrap();
    let ids = ["r-0", "r-1", "r-2"];
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    let working = AtomicUsize::new(2);
    let (forgotten, lost, written) = std::thread::scope(|s| {
        let forgets = s.spawn(|| {
            let mut forgotten = 0;
            while working.load(Ordering::SeqCst) > 0 {
                forgotten += forgetter.store().forget_removals(later).unwrap();
            }
            forgotten
        });
        let workers = [&a, &b].map(|rt| {
            let working = &working;
            s.spawn(move || {
                let user = Actor::new("user");
                let (mut lost, mut written) = (0, 0);
                let mut count = |result: Result<(), RuntimeError>| match result {
                    Ok(()) => written += 1,
                    Err(
                        RuntimeError::Exists { .. }
                        | RuntimeError::NotFound { .. }
                        | RuntimeError::Conflict { .. }
                        | RuntimeError::VersionMismatch { .. }
                        | RuntimeError::Busy { .. },
                    ) => lost += 1,
                    Err(e) => panic!("{e}"),
                };
                for _ in 0..30 {
                    for id in ids {
                        count(rt.create(id, &user).map(drop));
                        // The first id's objects go further, and raise the floor past the others'.
                        if id == "r-0" {
                            count(rt.run(id, &user, "resize").map(drop));
                        }
                        count(rt.remove(id, &user).map(drop));
                    }
                }
                working.fetch_sub(1, Ordering::SeqCst);
                (lost, written)
            })
        });
        let [(lost_a, written_a), (lost_b, written_b)] = workers.map(|w| w.join().unwrap());
        (
            forgets.join().unwrap(),
            lost_a + lost_b,
            written_a + written_b,
        )
    });
    let mut last: std::collections::HashMap<String, (u64, EntryKind)> = Default::default();
    let (mut events, mut from_floor) = (0, 0);
    while events < written {
        let event = watcher.recv().expect("no gap in a few hundred events");
        let entry = &event.entry;
        if let Some((version, kind)) = last.get(event.id.as_str()) {
            assert!(
                entry.version > *version,
                "{}: version {} ({:?}) after {version} ({kind:?})",
                event.id,
                entry.version,
                entry.kind
            );
            from_floor += usize::from(
                entry.kind == EntryKind::Created
                    && *kind == EntryKind::Removed
                    && entry.version > version + 1,
            );
        }
        last.insert(event.id.to_string(), (entry.version, entry.kind));
        events += usize::from(matches!(
            entry.kind,
            EntryKind::Created | EntryKind::Removed
        ));
        events += usize::from(entry.kind == EntryKind::Completed);
    }
    assert!(lost > 0, "no request lost to the other process");
    assert!(forgotten > 0, "nothing forgotten");
    assert!(from_floor > 0, "no object created past the floor");
}

/// A floor key that is not a version (written by hand) is an error naming
/// it, for a creation that must be numbered past it and for forgetting
/// alike: never a creation numbered as if there were no floor.
#[test]
fn a_floor_that_is_not_a_version_is_an_error_naming_its_key() {
    let Some((rt, prefix, admin)) = created(&["vm"]) else {
        return;
    };
    rt.remove("vm", &admin).unwrap();
    etcd_put(&format!("{prefix}floor"), "not a number");
    let expected =
        format!("{prefix}floor cannot be read: not a version (the floor of forgotten removals)");
    match rt.create("fresh", &admin) {
        Err(RuntimeError::Store(e @ StoreError::Unreadable { .. })) => {
            assert_eq!(e.to_string(), expected)
        }
        other => panic!("{other:?}"),
    }
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    match rt.store().forget_removals(later) {
        Err(e @ StoreError::Unreadable { .. }) => assert_eq!(e.to_string(), expected),
        other => panic!("{other:?}"),
    }
    assert!(rt.removal_of("vm").unwrap().is_some(), "nothing forgotten");
}

/// Removals are forgotten many to a transaction; one whose keys are no longer
/// as it left them (here its `gone/` key written again, as a creation and a
/// removal of the id meanwhile would) spoils its batch's transaction, and the
/// batch is forgotten one by one instead: every other removal is forgotten,
/// across batches, and that one kept.
#[test]
fn forgetting_in_batches_keeps_only_a_removal_that_changed() {
    let ids: Vec<String> = (0..70).map(|i| format!("vm-{i:02}")).collect();
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    let Some((rt, prefix, admin)) = created(&names) else {
        return;
    };
    for id in &ids {
        rt.remove(id.as_str(), &admin).unwrap();
    }
    let changed = format!("{prefix}gone/vm-40");
    etcd_put(&changed, &etcd_value(&changed));
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    assert_eq!(rt.store().forget_removals(later).unwrap(), ids.len() - 1);
    assert_eq!(
        object_keys(&prefix),
        ["floor", "format", "gone/vm-40", "obj/vm-40"]
    );
    assert!(rt.removal_of("vm-40").unwrap().is_some());
    assert_eq!(rt.removal_of("vm-39").unwrap(), None);
}

/// A prefix marked as stored in a format newer than this store reads is
/// refused, saying which and what to do, before anything is read or written
/// there: by a runtime opened over it, and by forgetting; so is a mark that is
/// not a number.
#[test]
fn a_prefix_of_a_newer_format_is_refused() {
    let Some((rt, prefix, admin)) = created(&["vm"]) else {
        return;
    };
    rt.remove("vm", &admin).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    let newer = fsm_etcd::FORMAT + 1;
    etcd_put(&format!("{prefix}format"), &newer.to_string());
    let reason = format!(
        "{prefix}format: the prefix is stored in format {newer}, and this version of fsm-etcd \
         reads formats up to {}: upgrade every process on the prefix",
        fsm_etcd::FORMAT
    );
    match Runtime::new(machine(), store_at(&prefix).unwrap()) {
        Err(RuntimeError::Store(e @ StoreError::Incompatible { .. })) => assert_eq!(
            e.to_string(),
            format!("the store cannot serve machine `server`: {reason}")
        ),
        other => panic!("{:?}", other.map(|_| "a runtime")),
    }
    match rt.store().forget_removals(later) {
        Err(e @ StoreError::Unreadable { .. }) => assert_eq!(
            e.to_string(),
            reason.replacen("format: ", "format cannot be read: ", 1)
        ),
        other => panic!("{other:?}"),
    }
    assert!(rt.removal_of("vm").unwrap().is_some(), "nothing forgotten");
    assert_eq!(etcd_value(&format!("{prefix}format")), newer.to_string());

    etcd_put(&format!("{prefix}format"), "two");
    match Runtime::new(machine(), store_at(&prefix).unwrap()) {
        Err(RuntimeError::Store(e @ StoreError::Incompatible { .. })) => assert_eq!(
            e.to_string(),
            format!(
                "the store cannot serve machine `server`: {prefix}format: not a format (a number)"
            )
        ),
        other => panic!("{:?}", other.map(|_| "a runtime")),
    }
}

/// A store cut off from etcd when a runtime binds it cannot read the prefix's
/// format: the runtime is refused with the store's retryable error, not told
/// the store is incompatible (which no retry mends); once etcd answers, it binds.
#[test]
fn a_store_cut_off_at_bind_is_retryable_not_incompatible() {
    let Some(store) = store() else { return };
    let partition = Partition::to(&endpoints()[0]);
    let cut_off = EtcdStore::builder([partition.endpoint()], store.prefix())
        .timeout(Duration::from_millis(500))
        .connect()
        .unwrap();
    partition.cut();
    match Runtime::new(machine(), cut_off.clone()) {
        Err(RuntimeError::Store(e)) => assert!(
            e.is_retryable() && !matches!(e, StoreError::Incompatible { .. }),
            "{e:?}"
        ),
        other => panic!("{:?}", other.map(|_| "a runtime")),
    }
    partition.heal();
    let deadline = Instant::now() + Duration::from_secs(30);
    let rt = loop {
        match Runtime::new(machine(), cut_off.clone()) {
            Err(RuntimeError::Store(e)) if e.is_retryable() => {
                assert!(Instant::now() < deadline, "never bound: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            other => break other.unwrap(),
        }
    };
    rt.create("vm", &Actor::new("admin")).unwrap();
    assert_eq!(
        Runtime::new(machine(), store)
            .unwrap()
            .state_name("vm")
            .unwrap(),
        "HALTED"
    );
}

/// A process keeps a copy of a record; elsewhere the object is removed, its
/// removal forgotten, and the id's next object moved until its key's etcd
/// version is the kept copy's. A start decided on the kept copy loses (its
/// write compares the revision that wrote the copy, not the key's etcd
/// version, which the old copy's would match) and is decided again on the
/// new object: its versions go on, never back to the old copy's.
#[test]
fn a_kept_copy_of_a_forgotten_object_never_writes_over_the_next_one() {
    let Some((here, prefix, admin)) = created(&["vm"]) else {
        return;
    };
    here.run("vm", &admin, "start").unwrap();
    let kept = here.store().cached(&"vm".into()).expect("kept");
    assert_eq!(kept.version, 3);

    let elsewhere = Runtime::new(machine(), store_at(&prefix).unwrap()).unwrap();
    elsewhere.run("vm", &admin, "stop").unwrap();
    let removed = elsewhere.remove("vm", &admin).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    assert_eq!(elsewhere.store().forget_removals(later).unwrap(), 1);
    elsewhere.create("vm", &admin).unwrap();
    elsewhere.run("vm", &admin, "start").unwrap();
    let moved = elsewhere.get("vm").unwrap();
    assert_eq!(moved.version, removed.version + 3);
    assert_eq!(
        here.machine().state(moved.state).name,
        "RUNNING",
        "as the copy"
    );

    let flight = here.start("vm", &admin, "reboot").unwrap();
    assert_eq!(
        flight.fence().0,
        moved.version + 1,
        "decided on the new object"
    );
    flight.complete().unwrap();
    let versions: Vec<u64> = here
        .history("vm")
        .unwrap()
        .iter()
        .map(|e| e.version)
        .collect();
    assert_eq!(
        versions,
        (removed.version + 1..=moved.version + 2).collect::<Vec<_>>()
    );
    check_history(here.machine(), &here.history("vm").unwrap()).unwrap();
}

/// A holder stored by the previous format names no session: it is alive while
/// `held/<id>` holds its version, and abandoned once the key is gone or holds
/// another version.
#[test]
fn a_holder_of_the_previous_format_is_read_by_its_held_key() {
    let Some((rt, prefix, admin)) = created(&["vm"]) else {
        return;
    };
    let flight = rt.start("vm", &admin, "start").unwrap();
    let fence = flight.fence().0;
    std::mem::forget(flight);
    // The record as the previous format wrote it: no session in the holder.
    let codec = fsm_runtime::wire::Codec::new(rt.machine());
    let mut stored = codec.encode_record(&rt.get("vm").unwrap());
    stored.in_flight.as_mut().unwrap().session = None;
    let old = serde_json::to_string(&stored).unwrap();
    assert!(!old.contains("session"), "{old}");
    // Put over the record: the key's etcd version moves on, so the test only
    // reads from here.
    etcd_put(&format!("{prefix}obj/vm"), &old);
    // Read one at a time and all at once alike.
    let read = || {
        let loaded = rt.store().load(&"vm".into()).unwrap().unwrap();
        let records = rt.store().records().unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(
            records[0].1.as_ref().unwrap(),
            &loaded,
            "records agree with load"
        );
        loaded
    };
    assert!(
        read().in_flight.unwrap().abandoned,
        "no held key: abandoned"
    );
    etcd_put(&format!("{prefix}held/vm"), &fence.to_string());
    let holder = read().in_flight.unwrap();
    assert!(!holder.abandoned, "its held key holds its version: alive");
    assert_eq!(holder.session, None);
    etcd_put(&format!("{prefix}held/vm"), &(fence + 7).to_string());
    assert!(
        read().in_flight.unwrap().abandoned,
        "another version: abandoned"
    );
}

/// A process whose lease expired before its keep-alive noticed (cut off, or
/// revoked) takes a new one at its next start, which then stands: its holder
/// names the new session, never the dead one.
#[test]
fn a_start_after_the_lease_was_lost_takes_a_new_session() {
    let Some((rt, prefix, admin)) = created(&["a", "b"]) else {
        return;
    };
    let first = rt.start("a", &admin, "start").unwrap();
    let lost = rt.get("a").unwrap().in_flight.unwrap().session.unwrap();
    with_etcd(|mut client| async move { client.lease_revoke(lost).await.unwrap() });
    assert!(!keys_under(&prefix).contains(&format!("live/{lost:x}")));
    // Every process now reads the first action as abandoned...
    assert!(rt.get("a").unwrap().in_flight.unwrap().abandoned);
    // ...and the next start stands on a new session.
    let second = rt.start("b", &admin, "start").unwrap();
    let holder = rt.get("b").unwrap().in_flight.unwrap();
    let renewed = holder.session.unwrap();
    assert_ne!(renewed, lost);
    assert!(!holder.abandoned);
    assert!(keys_under(&prefix).contains(&format!("live/{renewed:x}")));
    second.complete().unwrap();
    // The first action's completion still stands: nobody healed it meanwhile.
    first.complete().unwrap();
}

/// A completion decides on the record its start wrote, which the store kept
/// with its holder: one transaction to end, no read. When another process
/// rolled the action back meanwhile, the decision on that stale copy does not
/// stand: decided again on a fresh read, the completion is the conflict that
/// ends a revoked hold, and it writes nothing.
#[test]
fn a_completion_decides_on_the_record_its_start_kept() {
    let Some((here, prefix, user)) = created(&["vm"]) else {
        return;
    };
    let flight = here.start("vm", &user, "start").unwrap();
    let kept = here
        .store()
        .cached(&"vm".into())
        .expect("the start's record kept");
    let holder = kept.in_flight.as_ref().expect("kept with its holder");
    assert_eq!(holder.version, flight.fence().0);
    assert_eq!(holder.actor, "admin");
    let done = flight.complete().unwrap();
    assert_eq!(here.machine().state(done.state).name, "RUNNING");
    assert_eq!(here.store().cached(&"vm".into()), Some(done));

    // Elsewhere rolls the next action back, while this process keeps its start.
    let flight = here.start("vm", &user, "stop").unwrap();
    let elsewhere = Runtime::new(machine(), store_at(&prefix).unwrap()).unwrap();
    let seen = elsewhere.get("vm").unwrap();
    elsewhere
        .roll_back("vm", &seen, &Actor::new("healer"))
        .unwrap();
    let stale = here.store().cached(&"vm".into()).unwrap();
    assert!(stale.in_flight.is_some(), "the kept copy is the start's");
    match flight.complete() {
        Err(RuntimeError::Conflict { found, .. }) => {
            assert_eq!(found, Some(("RUNNING".to_owned(), seen.version + 1)));
        }
        other => panic!("{other:?}"),
    }
    let history = here.history("vm").unwrap();
    assert_eq!(history.last().unwrap().kind, EntryKind::Healed);
    check_history(here.machine(), &history).unwrap();
}

/// A start decides on the record this process last wrote, without reading it
/// first; when another process wrote since, the decision does not stand: a
/// refusal made on the stale copy is made again on a fresh read, and a start
/// whose write loses its compare-and-set is decided again too. Either way the
/// answer is the one a fresh read gives.
#[test]
fn a_start_on_a_stale_kept_copy_is_decided_again_on_a_fresh_read() {
    let Some((here, prefix, user)) = created(&["vm"]) else {
        return;
    };
    let elsewhere = Runtime::new(machine(), store_at(&prefix).unwrap()).unwrap();

    // Here keeps RUNNING (its own last write); elsewhere stops the VM.
    here.run("vm", &user, "start").unwrap();
    let kept = here.store().cached(&"vm".into()).expect("a record kept");
    assert_eq!(here.machine().state(kept.state).name, "RUNNING");
    elsewhere.run("vm", &user, "stop").unwrap();
    // On the kept copy, `start` is refused (not from RUNNING); on a fresh read
    // it is allowed, and it starts.
    let flight = here.start("vm", &user, "start").unwrap();
    assert_eq!(
        flight.origin(),
        here.machine().state_named("HALTED").unwrap()
    );
    assert_eq!(flight.fence().0, 6, "decided on version 5, the fresh one");
    flight.complete().unwrap();

    // Here keeps RUNNING at version 7; elsewhere resizes it (back to RUNNING,
    // version 9). A reboot is allowed on both copies: decided on the stale one,
    // its write loses, and it is decided again on the fresh one (here through
    // the async path, which decides the same way).
    assert_eq!(here.store().cached(&"vm".into()).unwrap().version, 7);
    elsewhere.run("vm", &user, "resize").unwrap();
    let flight = block_on(here.start_async("vm", &user, "reboot")).unwrap();
    assert_eq!(flight.fence().0, 10);
    block_on(flight.complete_async()).unwrap();
    let history = here.history("vm").unwrap();
    check_history(here.machine(), &history).unwrap();
    assert_eq!(history.len(), 11);

    // A start refused on a fresh read stays refused, with the fresh state.
    match here.start("vm", &user, "retire") {
        Err(RuntimeError::NoRule { .. }) => {}
        other => panic!("{other:?}"),
    }
}

/// `records` reads every object at once, a thousand to a request at one
/// revision, each as `load` reads it (the holder of a live process not
/// abandoned); a record that does not read is an error for that object alone,
/// and the healer's pass, which reads through `for_each_record`, reports it
/// and goes on.
/// Pages of `records_after` larger than a request read the same, and so do
/// `for_each_record` and `for_each_record_async`, a request at a time.
#[test]
fn every_record_is_read_at_once_and_an_unreadable_one_is_an_error_of_its_own() {
    let Some(store) = store() else { return };
    let prefix = store.prefix().to_owned();
    let rt = Runtime::new(machine(), store).unwrap();
    let admin = Actor::new("admin");
    let ids = support::three_pages(&rt, &admin);
    let held = rt.start("vm-1500", &admin, "start").unwrap();
    etcd_put(&format!("{prefix}obj/vm-0999x"), "not a record");

    let records = rt.store().records().unwrap();
    assert_eq!(records.len(), ids.len() + 1);
    assert!(records.windows(2).all(|w| w[0].0 < w[1].0), "sorted by id");
    let unreadable: Vec<&str> = records
        .iter()
        .filter(|(_, r)| r.is_err())
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(unreadable, ["vm-0999x"]);
    for (id, record) in records.iter().filter(|(_, r)| r.is_ok()) {
        assert_eq!(
            record.as_ref().unwrap(),
            &rt.get(id.clone()).unwrap(),
            "{id}: records agree with load"
        );
    }
    // Pages past a thousand (two requests each) meet the same records; the
    // unreadable one is in its place.
    let first = rt.store().records_after(None, 1_500).unwrap();
    assert_eq!(first.len(), 1_500);
    let rest = rt
        .store()
        .records_after(Some(&first[1_499].0), 1_500)
        .unwrap();
    assert_eq!(rest.len(), records.len() - 1_500);
    let paged: Vec<_> = first
        .iter()
        .chain(&rest)
        .map(|(id, r)| (id, r.is_ok()))
        .collect();
    let whole: Vec<_> = records.iter().map(|(id, r)| (id, r.is_ok())).collect();
    assert_eq!(paged, whole, "ids of no `/`: the pages come in id order");
    // Looked at a request at a time: the same records, each once, the
    // holder's liveness judged as `records` judges it.
    let mut looked = Vec::new();
    rt.store()
        .for_each_record(|id, r| looked.push((id.clone(), r.cloned().map_err(Clone::clone))))
        .unwrap();
    assert_eq!(looked, records, "for_each_record");
    looked.clear();
    block_on(rt.store().for_each_record_async(|id, r| {
        looked.push((id.clone(), r.cloned().map_err(Clone::clone)))
    }))
    .unwrap();
    assert_eq!(looked, records, "for_each_record_async");
    let past = rt
        .store()
        .records_after(Some(&"vm-0999".into()), 1)
        .unwrap();
    assert!(
        matches!(&past[..], [(id, Err(_))] if id.as_str() == "vm-0999x"),
        "{past:?}"
    );

    let holder = records
        .iter()
        .find(|(id, _)| id.as_str() == "vm-1500")
        .and_then(|(_, r)| r.as_ref().unwrap().in_flight.clone())
        .expect("vm-1500 is held");
    assert!(!holder.abandoned, "its process lives");

    // Nothing is late and nothing abandoned: the pass heals nothing, and says
    // which object it could not read.
    let report = Healer::new()
        .deadline(Duration::from_secs(3600))
        .heal(&rt)
        .unwrap();
    assert!(report.healed.is_empty(), "{report:?}");
    let failed: Vec<&str> = report.errors.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(failed, ["vm-0999x"], "{report:?}");
    held.complete().unwrap();
}

/// Answers past gRPC's default 4 MiB are read: a page of a thousand records
/// with 8 KiB of data each (8 MiB), and a history of 600 entries by an actor
/// whose name is 8 KiB long (about 5 MiB).
#[test]
fn answers_past_four_mebibytes_are_read() {
    let Some(store) = store() else { return };
    let rt = Runtime::new(machine(), store).unwrap();
    let admin = Actor::new("admin");
    let data: std::sync::Arc<str> = format!(r#"{{"blob":"{}"}}"#, "x".repeat(8 * 1024)).into();
    let ids: Vec<String> = (0..1_000).map(|n| format!("big-{n:04}")).collect();
    std::thread::scope(|s| {
        for part in ids.chunks(250) {
            let (rt, admin, data) = (&rt, &admin, data.clone());
            s.spawn(move || {
                for id in part {
                    rt.create_with(id.as_str(), admin, Some(data.clone()))
                        .unwrap();
                }
            });
        }
    });
    let read = |records: fsm_runtime::Records| {
        assert_eq!(records.len(), ids.len());
        let whole = |(_, r): &(_, Result<fsm_runtime::Record, _>)| {
            r.as_ref().unwrap().data.as_deref() == Some(&*data)
        };
        assert!(records.iter().all(whole));
    };
    read(rt.store().records().unwrap());
    read(rt.store().records_after(None, 1_000).unwrap());

    let long = Actor::new("a".repeat(8 * 1024));
    for _ in 0..150 {
        rt.run("big-0000", &long, "start").unwrap();
        rt.run("big-0000", &long, "stop").unwrap();
    }
    let history = rt.history("big-0000").unwrap();
    assert_eq!(history.len(), 1 + 150 * 4);
    assert_eq!(history[600].actor.as_str(), long.name());
}

/// A write past what etcd takes (its request limit, 1.5 MiB by default, and
/// gRPC's past it) is refused as too large, not retryable, and writes nothing:
/// a creation leaves no object, a start that proposes too much data leaves the
/// object as it was.
#[test]
fn a_write_larger_than_etcd_takes_is_refused_as_too_large() {
    let Some(store) = store() else { return };
    let rt = Runtime::new(machine(), store).unwrap();
    let admin = Actor::new("admin");
    let blob = |kib: usize| -> std::sync::Arc<str> {
        format!(r#"{{"blob":"{}"}}"#, "x".repeat(kib * 1024)).into()
    };
    let too_large = |result: Result<_, RuntimeError>, id: &str| match result {
        Err(RuntimeError::Store(e @ StoreError::TooLarge { .. })) => {
            assert!(!e.is_retryable(), "{e}");
            assert!(e.to_string().contains(id), "{e}");
        }
        other => panic!("{id}: {other:?}"),
    };
    // Past etcd's limit (1.7 MiB), and past gRPC's too (2.5 MiB).
    for (id, kib) in [("vm-1", 1_700), ("vm-2", 2_500)] {
        too_large(rt.create_with(id, &admin, Some(blob(kib))).map(drop), id);
        assert!(
            matches!(rt.get(id), Err(RuntimeError::NotFound { .. })),
            "{id} was written"
        );
    }
    rt.create("vm-3", &admin).unwrap();
    let start = rt.start_changing("vm-3", None, &admin, "start", blob(1_700));
    too_large(start.map(drop), "vm-3");
    let record = rt.get("vm-3").unwrap();
    assert_eq!((record.version, record.in_flight), (1, None));
}

/// A store that keeps three entries of each history deletes the older ones in
/// each write's transaction: the history holds the last three, etcd holds no
/// other key of it, and a watcher still sees every write (the deletions are
/// not writes).
#[test]
fn a_store_keeping_three_entries_deletes_the_older_ones() {
    let prefix = fresh_prefix();
    if store_at(&prefix).is_none() {
        return;
    }
    let store = EtcdStore::builder(endpoints(), &prefix)
        .keep_history(3)
        .connect()
        .unwrap();
    let rt = Runtime::new(machine(), store).unwrap();
    let admin = Actor::new("admin");
    let mut watcher = rt.watch().unwrap();
    rt.create("vm", &admin).unwrap();
    for _ in 0..3 {
        rt.run("vm", &admin, "start").unwrap();
        rt.run("vm", &admin, "stop").unwrap();
    }
    let versions: Vec<u64> = rt
        .history("vm")
        .unwrap()
        .iter()
        .map(|e| e.version)
        .collect();
    assert_eq!(versions, [11, 12, 13]);
    let keys = block_on(async {
        let mut client = etcd_client::Client::connect(endpoints(), None)
            .await
            .unwrap();
        let only = etcd_client::GetOptions::new()
            .with_prefix()
            .with_count_only();
        client
            .get(format!("{prefix}hist/"), Some(only))
            .await
            .unwrap()
            .count()
    });
    assert_eq!(keys, 3, "history keys left in etcd");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while seen.len() < 13 && Instant::now() < deadline {
        match watcher.try_recv() {
            Ok(Some(event)) => seen.push(event.entry.version),
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(
        seen,
        (1..=13).collect::<Vec<_>>(),
        "every write, once, in order"
    );
}

/// A store reconnected again and again while a thread writes: every write
/// lands, once, and the store's watcher gets every entry once, in order (the
/// feed begins again on each new connection past the last write it saw).
#[test]
fn a_store_reconnected_under_writes_loses_and_repeats_nothing() {
    // A feed begun again after another test compacted past writes it had
    // not seen yet would tell a gap (rightly: they are lost to it).
    let _apart = apart_from_compactions();
    let Some((rt, _, admin)) = created(&["vm"]) else {
        return;
    };
    let mut watcher = rt.watch().unwrap().only("vm");
    let access = fsm_etcd::EtcdAccess::new(endpoints());
    const RUNS: u64 = 40;
    let reconnected = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for _ in 0..RUNS {
                rt.run("vm", &admin, "start").unwrap();
                rt.run("vm", &admin, "stop").unwrap();
            }
        });
        let mut reconnected = 0;
        while !writer.is_finished() {
            rt.store().reconnect(&access).unwrap();
            reconnected += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        writer.join().unwrap();
        reconnected
    });
    assert!(reconnected > 1, "reconnected {reconnected} times");
    // The creation, then a start and a completion per run.
    let last = 1 + 4 * RUNS;
    let history = rt.history("vm").unwrap();
    assert_eq!(
        history.iter().map(|e| e.version).collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>()
    );
    check_history(rt.machine(), &history).unwrap();
    // (Watched since after the creation.) Until the last, or ten seconds.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while seen.last() != Some(&last) && Instant::now() < deadline {
        match watcher.try_recv().unwrap() {
            Some(event) => seen.push(event.entry.version),
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    assert_eq!(seen, (2..=last).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_millis(300));
    let more = watcher.try_recv();
    assert!(matches!(more, Ok(None)), "an entry seen twice: {more:?}");
}

/// An async start's future dropped while its write is on the way (a `timeout`
/// around it, a `select!`) leaves no hold without a handle: the start runs
/// whole on the store's own thread, lands there, and its handle, with no one
/// to take it, is dropped there, which records the action abandoned; a healer
/// with no deadline then rolls it back, as for any handle dropped unfinished
/// (the runtime's "Cancel safety"). The memory store writes in the first poll:
/// nothing is on the way there.
#[test]
fn a_start_whose_future_is_dropped_lands_abandoned_for_the_next_healer() {
    let Some(store) = store() else { return };
    let rt = Runtime::new(machine(), store).unwrap();
    let (alice, bob) = (Actor::new("alice"), Actor::new("bob"));
    rt.create("vm", &alice).unwrap();
    block_on(async {
        // Polled once, as a `select!` whose other branch won would, then dropped.
        let mut start = std::pin::pin!(rt.start_async("vm", &alice, "start"));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(start.as_mut().poll(cx)));
        assert!(
            first.await.is_pending(),
            "the start finished in its first poll"
        );
    });
    // The start lands after its future is gone (the race happened), and is
    // recorded abandoned where it ran.
    let deadline = Instant::now() + Duration::from_secs(10);
    let kinds = loop {
        let kinds: Vec<EntryKind> = rt.history("vm").unwrap().iter().map(|e| e.kind).collect();
        if kinds.contains(&EntryKind::Abandoned) {
            break kinds;
        }
        assert!(Instant::now() < deadline, "never abandoned: {kinds:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        kinds,
        [EntryKind::Created, EntryKind::Started, EntryKind::Abandoned]
    );
    match rt.start("vm", &bob, "start") {
        Err(RuntimeError::Busy {
            abandoned, holder, ..
        }) => assert_eq!((abandoned, holder.as_str()), (true, "alice")),
        other => panic!("{other:?}"),
    }
    // No deadline needed: nobody holds a handle.
    let report = Healer::new().heal(&rt).unwrap();
    assert_eq!(report.healed.len(), 1, "{report:?}");
    assert_eq!(rt.state_name("vm").unwrap(), "HALTED");
    rt.run("vm", &bob, "start").unwrap();
}

/// A connection refused is said in words, each error under etcd-client's once,
/// not as tonic's `Debug` of them; and it is worth retrying. (No etcd needed.)
#[test]
fn a_refused_connection_is_said_in_words() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = nobody.local_addr().unwrap().to_string();
    drop(nobody);
    let refused = EtcdStore::connect([&closed], "/fsm-words/").unwrap_err();
    assert!(refused.is_retryable(), "{refused}");
    let said = refused.to_string();
    // ECONNREFUSED, on Linux, where the tests run.
    let os = std::io::Error::from_raw_os_error(111);
    assert_eq!(
        said,
        format!(
            "store unavailable: connecting to etcd at {closed}: etcd: tcp connect error: transport error: {os}"
        )
    );
}
