//! The runtime's tracing, in a test binary of its own.
//!
//! `tracing` caches, per call site, whether any subscriber wants its events,
//! computed when the call site is first reached. A thread that reaches a call site
//! first, with no subscriber, computes "never" from the subscribers it saw; if a
//! test's thread sets its own subscriber (`with_default`) in between, that thread's
//! rebuild of the caches can come before the other's store of "never", and the
//! test loses the event (seen once in a full `scripts/test` run: the `refused`
//! event missing while other tests of the binary started actions). Alone in its
//! binary, the test reaches these call sites on one thread only.

use std::path::PathBuf;
use std::sync::Arc;

use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};

fn vm() -> Runtime {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml");
    let machine = fsm_core::spec::load(&path).unwrap_or_else(|e| panic!("{e}"));
    Runtime::new(machine, MemoryStore::new()).unwrap()
}

/// With no subscriber a start builds no span (BENCHMARKS.md: tracing costs one
/// comparison then); with one listening, every start is a `start` span naming
/// the object, the action and the actor, around the events of the start.
#[test]
fn a_listening_subscriber_sees_each_start_in_its_span() {
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let rt = vm();
    let alice = Actor::new("alice");
    rt.create("vm-1", &alice).unwrap();
    rt.create("vm-2", &alice).unwrap();
    let executor = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        rt.start("vm-1", &alice, "deploy")
            .unwrap()
            .complete()
            .unwrap();
        let refused = rt.start("vm-1", &alice, "deploy").unwrap_err();
        assert!(matches!(refused, RuntimeError::NoRule { .. }), "{refused}");
        // The async start, likewise.
        executor.block_on(async {
            let started = rt.start_async("vm-2", &alice, "deploy").await.unwrap();
            started.complete_async().await.unwrap();
            let refused = rt.start_async("vm-2", &alice, "deploy").await.unwrap_err();
            assert!(matches!(refused, RuntimeError::NoRule { .. }), "{refused}");
        });
    });
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    for object in ["vm-1", "vm-2"] {
        let span = format!(r#"start{{object={object} action=deploy actor="alice"}}"#);
        let mine = |what: &str| {
            log.lines()
                .find(|l| l.contains(what) && l.contains(&span))
                .is_some()
        };
        assert!(mine("started") && mine("refused"), "{object}: {log}");
    }
}
