//! What a user moves between threads and tasks can move: the runtime and its
//! handles, the queuer and its tickets, the errors (into
//! `Box<dyn Error + Send + Sync>`), and the futures of the async calls (into
//! `tokio::spawn` on a multi-threaded runtime). A change that made one of them
//! `!Send` would break its users' builds, not ours: this file breaks first.

use std::future::Future;

use fsm_runtime::{
    Actor, ActorName, Entry, Fence, HealReport, Healer, InFlight, MemoryStore, PeriodicHealer,
    QueueError, Queuer, Record, Runtime, RuntimeError, Store, StoreError, Ticket, Watcher,
};

fn send_sync<T: Send + Sync>() {}
fn error<E: std::error::Error + Send + Sync + 'static>() {}
fn spawnable<F: Future + Send + 'static>(_: &F)
where
    F::Output: Send,
{
}

/// Shared between threads: one runtime (cloned, or behind a reference) and
/// one queuer serve every thread; the values they hand out go anywhere.
#[test]
fn what_threads_share_is_send_and_sync() {
    send_sync::<Runtime<MemoryStore>>();
    send_sync::<Queuer>();
    send_sync::<Healer>();
    send_sync::<Actor>();
    send_sync::<ActorName>();
    send_sync::<Record>();
    send_sync::<Entry>();
    send_sync::<Fence>();
    send_sync::<HealReport>();
    send_sync::<InFlight<'static, MemoryStore>>();
    send_sync::<Ticket>();
    error::<RuntimeError>();
    error::<StoreError>();
    error::<QueueError>();
    // Moved to the thread or task that reads it.
    fn sent<T: Send>() {}
    sent::<Watcher>();
    sent::<PeriodicHealer>();
}

/// The async calls' futures, and a ticket awaited, can be spawned on a
/// multi-threaded executor: they own what they hold across an `.await`
/// (a runtime clone, an actor), and their outputs are `Send`. Each future
/// is built and then polled to its end on a current-thread runtime, so
/// that what is checked is also what runs.
#[test]
fn async_calls_can_be_spawned() {
    let machine = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"));
    let rt = Runtime::new(machine.unwrap(), MemoryStore::new()).unwrap();
    let user = Actor::new("user");
    let queuer = Queuer::new(1);
    let block_on = |f: std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>>| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    };
    block_on(Box::pin(async {
        let create = {
            let (rt, user) = (rt.clone(), user.clone());
            async move { rt.create_async("vm", &user).await }
        };
        spawnable(&create);
        create.await.unwrap();
        let run = {
            let (rt, user) = (rt.clone(), user.clone());
            async move {
                let handle = rt.start_async("vm", &user, "deploy").await?;
                handle.complete_async().await
            }
        };
        spawnable(&run);
        let record = run.await.unwrap();
        assert_eq!(rt.machine().state(record.state).name, "RUNNING");
        let ticket = queuer
            .request(&rt, "vm", &user, "stop")
            .run(|_| Ok(()))
            .unwrap();
        spawnable(&ticket);
        let record = ticket.await.unwrap();
        assert_eq!(rt.machine().state(record.state).name, "HALTED");
        let history = {
            let rt = rt.clone();
            async move { rt.history_async("vm").await }
        };
        spawnable(&history);
        assert_eq!(history.await.unwrap().len(), 5);
    }));
    queuer.terminate();
}

/// A store of the user's own is held to the same: `Store` requires
/// `Send + Sync`, so a runtime over it is shared like the memory store's.
#[test]
fn a_runtime_over_any_store_is_send_and_sync() {
    fn over<S: Store>() {
        send_sync::<Runtime<S>>();
        send_sync::<InFlight<'static, S>>();
    }
    over::<MemoryStore>();
    over::<std::sync::Arc<MemoryStore>>();
}
