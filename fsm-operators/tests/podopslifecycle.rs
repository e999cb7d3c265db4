//! KusionStack's PodOpsLifecycle (`podopslifecycle.md`) through the example
//! (`fsm_operators::podops`): several operations as concurrent sub-machines of
//! one pod, permissions per type, protection finalizers, undo, the trace, and
//! each ended operation removed, its history archived.
//!
//! The controllers are async tasks on the runtime's async API; every test runs
//! them all on a current-thread tokio runtime, where a call that blocked the
//! thread would stall the others (and the test, bounded by `LIMIT`, would fail).

use std::time::Duration;

use fsm_operators::machines::PodOpsState as S;
use fsm_operators::podops::{
    OperationController, PodOps, PodOpsError, SERVICE_AVAILABLE, SERVICE_FINALIZER, label,
};
use fsm_runtime::{Actor, Entry, EntryKind, RuntimeError, check_history};

/// Generous: the phases take microseconds; this only bounds a broken run.
const LIMIT: Duration = Duration::from_secs(60);

fn in_phase(id: &'static str, phase: S) -> impl Fn(&PodOps) -> bool {
    move |ops| ops.phase(id) == Some(phase)
}

fn available(ops: &PodOps) -> bool {
    ops.pod().labels.contains_key(SERVICE_AVAILABLE)
}

/// The history of the last life of operation `id`, from its record or, once it
/// is removed, from the archive.
fn life(ops: &PodOps, id: &str) -> Vec<Entry> {
    let lives = ops.lives(id).unwrap();
    lives
        .last()
        .cloned()
        .unwrap_or_else(|| panic!("{id} never lived"))
}

/// The states an operation went through, in order, without repeats.
fn phases(ops: &PodOps, id: &str) -> Vec<String> {
    let m = ops.runtime().machine();
    let mut seen: Vec<String> = Vec::new();
    for e in life(ops, id) {
        let name = m.state(e.to).name.to_string();
        if seen.last() != Some(&name) {
            seen.push(name);
        }
    }
    seen
}

/// When `id` entered `phase`, from its last life.
fn entered(ops: &PodOps, id: &str, phase: &str) -> std::time::SystemTime {
    let m = ops.runtime().machine();
    let target = m.find_state(phase).unwrap();
    life(ops, id)
        .into_iter()
        .find(|e| e.to == target)
        .unwrap_or_else(|| panic!("{id} never entered {phase}"))
        .at
}

/// When `action` started on `id`: the labels it changes change in its window,
/// which is what the other operations' guards read.
fn started(ops: &PodOps, id: &str, action: &str) -> std::time::SystemTime {
    let m = ops.runtime().machine();
    let action = m.find_action(action).unwrap();
    life(ops, id)
        .into_iter()
        .find(|e| e.kind == EntryKind::Started && e.action == Some(action))
        .unwrap_or_else(|| panic!("{id} never started {action:?}"))
        .at
}

const ALL_PHASES: [&str; 10] = [
    "operating",
    "pre-check",
    "pre-checked",
    "prepare",
    "operate",
    "operated",
    "post-check",
    "post-checked",
    "complete",
    "available",
];

#[tokio::test(flavor = "current_thread")]
async fn two_operations_of_different_types_run_at_once() {
    let ops = PodOps::new("web-0");
    assert!(available(&ops));
    let controllers = ops.start();

    // Both operations begin before either finishes.
    let begun = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let mut tasks = tokio::task::JoinSet::new();
    for (kind, id) in [("replace", "op-replace"), ("restart", "op-restart")] {
        let (ops, begun) = (ops.clone(), begun.clone());
        tasks.spawn(async move {
            let controller = OperationController::new(kind);
            controller.begin(&ops, id).await.unwrap();
            // The pod stops being available the moment an operation begins.
            assert!(!available(&ops));
            begun.wait().await;
            let operate = ops
                .wait_until(LIMIT, move |ops| ops.phase(id) == Some(S::Operate))
                .await;
            assert!(operate, "{id} never reached operate: {:#?}", ops.trace());
            let permission = label("operation-permission", kind);
            assert!(ops.pod().labels.contains_key(&permission), "{permission}");
            assert!(!ops.pod().protected(), "operating with protection on");
            controller.finish(&ops, id).await.unwrap();
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let served = ops.wait_until(LIMIT, available).await;
    controllers.stop().await;
    assert!(served, "the pod never served again: {:#?}", ops.trace());
    assert_eq!(ops.violations(), Vec::<String>::new());

    // The pod serves only once both are removed, their lives archived, each
    // ending in its removal by PodOpsLifecycle.
    assert_eq!(ops.removed(), ["op-replace", "op-restart"]);
    for id in ["op-replace", "op-restart"] {
        assert_eq!(ops.phase(id), None);
        assert_eq!(ops.removed_in(id), Some(S::Available));
        let life = life(&ops, id);
        check_history(ops.runtime().machine(), &life).unwrap();
        let removal = life.last().unwrap();
        assert_eq!(
            (removal.kind, &*removal.actor),
            (EntryKind::Removed, "podopslifecycle")
        );
        assert_eq!(phases(&ops, id), ALL_PHASES);
        // Every phase is traced with the operation's id, in time order.
        let traced: Vec<_> = ops
            .trace()
            .into_iter()
            .filter(|l| l.id.as_deref() == Some(id))
            .collect();
        for phase in &ALL_PHASES[1..] {
            assert!(
                traced
                    .iter()
                    .any(|l| l.what.ends_with(&format!("-> {phase}"))),
                "{id}: {phase} not traced"
            );
        }
        assert!(traced.windows(2).all(|w| w[0].at < w[1].at));
        assert_eq!(
            traced.last().map(|l| (&*l.who, &*l.what)),
            Some(("podopslifecycle", "removed, its history archived"))
        );
    }
    // The joint phases wait for every operation: post-check only once both have
    // finished operating, complete only once both passed their post-check.
    for id in ["op-replace", "op-restart"] {
        for other in ["op-replace", "op-restart"] {
            assert!(entered(&ops, id, "post-check") > started(&ops, other, "finish"));
            assert!(entered(&ops, id, "complete") > started(&ops, other, "pass_post_check"));
        }
    }
    // Nothing left but service-available; protection and readiness back.
    let pod = ops.pod();
    assert_eq!(
        pod.labels.keys().collect::<Vec<_>>(),
        [SERVICE_AVAILABLE],
        "{:#?}",
        pod.labels
    );
    assert!(pod.finalizers.contains(SERVICE_FINALIZER));
    assert!(pod.service_ready);
    assert!(ops.doc().types.is_empty(), "{:?}", ops.doc().types);
    assert_eq!(ops.settled_violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "current_thread")]
async fn an_operation_undone_midway_gives_its_permission_back() {
    let ops = PodOps::new("web-0");
    let controllers = ops.start();
    let replace = OperationController::new("replace");
    let restart = OperationController::new("restart");
    replace.begin(&ops, "op-a").await.unwrap();
    restart.begin(&ops, "op-b").await.unwrap();
    assert!(ops.wait_until(LIMIT, in_phase("op-a", S::Operate)).await);
    assert!(ops.wait_until(LIMIT, in_phase("op-b", S::Operate)).await);

    restart.undo(&ops, "op-b").await.unwrap();
    let cleaned = |ops: &PodOps| !ops.pod().has_id("op-b");
    assert!(ops.wait_until(LIMIT, cleaned).await);
    let labels = ops.pod().labels;
    assert!(!labels.contains_key(&label("operation-permission", "restart")));
    assert!(labels.contains_key(&label("operation-permission", "replace")));
    assert!(!available(&ops), "op-a is still in flight");
    // An undone operation cannot be finished.
    assert!(matches!(
        restart.finish(&ops, "op-b").await,
        Err(PodOpsError::Refused(_))
    ));

    replace.finish(&ops, "op-a").await.unwrap();
    assert!(ops.wait_until(LIMIT, available).await, "{:#?}", ops.trace());
    controllers.stop().await;
    assert_eq!(ops.removed_in("op-a"), Some(S::Available));
    assert_eq!(ops.removed_in("op-b"), Some(S::Undone));
    assert_eq!(
        phases(&ops, "op-b"),
        [
            "operating",
            "pre-check",
            "pre-checked",
            "prepare",
            "operate",
            "undone"
        ]
    );
    assert_eq!(ops.settled_violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "current_thread")]
async fn a_type_loses_its_permission_only_when_all_its_operations_are_undone() {
    let ops = PodOps::new("web-0");
    let controllers = ops.start();
    let restart = OperationController::new("restart").concurrent();
    restart.begin(&ops, "op-1").await.unwrap();
    restart.begin(&ops, "op-2").await.unwrap();
    let permission = label("operation-permission", "restart");
    for id in ["op-1", "op-2"] {
        assert!(ops.wait_until(LIMIT, in_phase(id, S::Operate)).await);
    }
    assert!(ops.pod().labels.contains_key(&permission));

    restart.undo(&ops, "op-1").await.unwrap();
    assert!(ops.wait_until(LIMIT, |ops| !ops.pod().has_id("op-1")).await);
    assert!(
        ops.pod().labels.contains_key(&permission),
        "op-2 still holds it"
    );

    restart.undo(&ops, "op-2").await.unwrap();
    assert!(ops.wait_until(LIMIT, available).await, "{:#?}", ops.trace());
    controllers.stop().await;
    let pod = ops.pod();
    assert!(!pod.labels.contains_key(&permission));
    // Traffic came back on after the last undo.
    assert!(pod.finalizers.contains(SERVICE_FINALIZER));
    assert_eq!(ops.settled_violations(), Vec::<String>::new());

    // One at a time unless the controller says otherwise.
    let single = OperationController::new("replace");
    single.begin(&ops, "op-3").await.unwrap();
    assert_eq!(
        single.begin(&ops, "op-4").await.unwrap_err().to_string(),
        "an operation of type replace is already running on web-0: op-3"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn operate_waits_for_every_protection_finalizer_to_go() {
    let ops = PodOps::new("web-0");
    let traffic = "prot.podopslifecycle.kusionstack.io/traffic-manager";
    ops.protect(traffic);
    let controllers = ops.start();
    let replace = OperationController::new("replace");
    replace.begin(&ops, "op").await.unwrap();

    // The service controller removes its finalizer; the traffic manager's stays,
    // so PodOpsLifecycle is refused `operate`.
    let refused = |ops: &PodOps| ops.refusals("finalizers_removed") > 0;
    assert!(ops.wait_until(LIMIT, refused).await, "{:#?}", ops.trace());
    assert_eq!(ops.phase("op"), Some(S::Prepare));
    assert!(ops.pod().protected());
    assert!(!ops.pod().service_ready, "prepare turns service-ready off");

    ops.edit("traffic-manager", |pod| pod.finalizers.remove(traffic))
        .unwrap();
    assert!(ops.wait_until(LIMIT, in_phase("op", S::Operate)).await);
    replace.finish(&ops, "op").await.unwrap();

    // Back to available only once every protection finalizer is back.
    let waiting = |ops: &PodOps| ops.refusals("finalizers_added") > 0;
    assert!(ops.wait_until(LIMIT, waiting).await, "{:#?}", ops.trace());
    assert_eq!(ops.phase("op"), Some(S::Complete));
    assert!(!available(&ops));
    ops.edit("traffic-manager", |pod| {
        pod.finalizers.insert(traffic.to_owned())
    })
    .unwrap();
    assert!(ops.wait_until(LIMIT, available).await, "{:#?}", ops.trace());
    controllers.stop().await;
    assert_eq!(ops.removed_in("op"), Some(S::Available));
    assert_eq!(ops.settled_violations(), Vec::<String>::new());
}

/// A pod whose operation `op` (a restart) was undone while no controller ran:
/// in `undone`, its record and labels still there.
async fn undone_without_controllers() -> (PodOps, OperationController) {
    let ops = PodOps::new("web-0");
    let restart = OperationController::new("restart");
    restart.begin(&ops, "op").await.unwrap();
    restart.undo(&ops, "op").await.unwrap();
    assert_eq!(ops.phase("op"), Some(S::Undone));
    assert!(ops.pod().has_id("op"), "no controller has cleaned up yet");
    (ops, restart)
}

/// "When undo-operation-type/<id>=<type> added, then remove other labels with
/// the same id": PodOpsLifecycle removes them, then the operation itself; the
/// spec lets no one else remove it, and it does so only once the labels are
/// gone.
#[tokio::test(flavor = "current_thread")]
async fn only_podopslifecycle_removes_an_ended_operation_once_its_labels_are_gone() {
    let (ops, _) = undone_without_controllers().await;

    // The spec names PodOpsLifecycle as the only remover in `undone`.
    for role in ["service-controller", "operation-controller"] {
        let someone = Actor::new(role).with_role(role);
        match ops.runtime().remove("op", &someone) {
            Err(RuntimeError::MayNotRemove { roles, .. }) => assert_eq!(roles, ["podopslifecycle"]),
            other => panic!("{role} removed it: {other:?}"),
        }
    }
    assert_eq!(ops.phase("op"), Some(S::Undone));

    let controllers = ops.start();
    assert!(ops.wait_until(LIMIT, available).await, "{:#?}", ops.trace());
    controllers.stop().await;
    assert_eq!(ops.removed_in("op"), Some(S::Undone));
    // The labels went first: traced before the removal.
    let traced: Vec<_> = (ops.trace().into_iter())
        .filter(|l| l.id.as_deref() == Some("op") && l.who == "podopslifecycle")
        .map(|l| l.what)
        .collect();
    assert_eq!(traced, ["labels removed", "removed, its history archived"]);
    assert!(ops.pod().finalizers.contains(SERVICE_FINALIZER));
    assert_eq!(ops.settled_violations(), Vec::<String>::new());
}

/// An id is not begun again while its ended operation still has a record (its
/// removal would drop the new operation's type with its own): refused before
/// anything is written; once PodOpsLifecycle removed it, the id begins anew.
#[tokio::test(flavor = "current_thread")]
async fn an_id_begins_again_only_once_its_ended_operation_is_removed() {
    let (ops, restart) = undone_without_controllers().await;
    let (pod, types) = (ops.pod(), ops.doc().types);
    match restart.begin(&ops, "op").await {
        Err(PodOpsError::Refused(RuntimeError::Exists { id, state })) => {
            assert_eq!((id.as_str(), state.as_str()), ("op", "undone"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (ops.pod(), ops.doc().types),
        (pod, types),
        "nothing written"
    );

    let controllers = ops.start();
    assert!(ops.wait_until(LIMIT, available).await, "{:#?}", ops.trace());
    restart.begin(&ops, "op").await.unwrap();
    assert!(ops.wait_until(LIMIT, in_phase("op", S::Operate)).await);
    controllers.stop().await;
    assert_eq!(
        ops.doc().types.get("op").map(String::as_str),
        Some("restart")
    );
    assert_eq!(ops.lives("op").unwrap().len(), 2);
}

/// An id used again after its operation was removed is a new operation: its
/// versions go on after the removal's, and both lives are kept and checked.
#[tokio::test(flavor = "current_thread")]
async fn an_id_used_again_after_its_removal_lives_twice() {
    let ops = PodOps::new("web-0");
    let controllers = ops.start();
    let replace = OperationController::new("replace");
    for round in 1..=2 {
        replace.begin(&ops, "op").await.unwrap();
        assert!(ops.wait_until(LIMIT, in_phase("op", S::Operate)).await);
        replace.finish(&ops, "op").await.unwrap();
        let removed = |ops: &PodOps| ops.removed_in("op").is_some() && available(ops);
        assert!(ops.wait_until(LIMIT, removed).await, "round {round}");
        assert_eq!(ops.lives("op").unwrap().len(), round);
    }
    controllers.stop().await;
    let lives = ops.lives("op").unwrap();
    let removal = lives[0].last().unwrap();
    assert_eq!(removal.kind, EntryKind::Removed);
    assert_eq!(lives[1][0].kind, EntryKind::Created);
    assert_eq!(lives[1][0].version, removal.version + 1);
    assert_eq!(ops.settled_violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "current_thread")]
async fn transition_rules_of_the_type_gate_the_pre_check() {
    let ops = PodOps::new("web-0");
    let allow = "example.com/allow-delete";
    ops.rule("delete", move |pod| pod.labels.contains_key(allow));
    let controllers = ops.start();
    let delete = OperationController::new("delete");
    delete.begin(&ops, "op").await.unwrap();

    let refused = |ops: &PodOps| ops.refusals("rules_passed") > 0;
    assert!(ops.wait_until(LIMIT, refused).await);
    assert_eq!(ops.phase("op"), Some(S::PreCheck));
    assert!(
        !ops.pod()
            .labels
            .contains_key(&label("operation-permission", "delete"))
    );

    ops.edit("user", |pod| {
        pod.labels.insert(allow.to_owned(), "yes".into())
    })
    .unwrap();
    assert!(ops.wait_until(LIMIT, in_phase("op", S::Operate)).await);
    assert!(
        ops.pod()
            .labels
            .contains_key(&label("operation-permission", "delete"))
    );
    controllers.stop().await;
    assert_eq!(ops.violations(), Vec::<String>::new());
}

/// "The label operating/<id>=<time> and operation-type/<id>=<type> will be validated
/// by a validating webhook server, they must be added or removed at the same time."
#[tokio::test(flavor = "current_thread")]
async fn the_webhook_keeps_operating_and_operation_type_together() {
    let ops = PodOps::new("web-0");
    let rogue = |ops: &PodOps, change: fn(&mut fsm_operators::podops::Pod)| {
        let before = ops.pod();
        let refused = ops.edit("rogue-controller", change).unwrap_err();
        assert_eq!(
            ops.pod(),
            before,
            "a refused change leaves the pod as it was"
        );
        refused
    };
    // Added alone, either one.
    let refused = rogue(&ops, |pod| {
        pod.labels
            .insert(label("operating", "op"), "1700000000".into());
    });
    assert_eq!(
        refused,
        PodOpsError::Webhook {
            pod: "web-0".into(),
            who: "rogue-controller".into(),
            present: label("operating", "op"),
            missing: label("operation-type", "op"),
        }
    );
    assert_eq!(
        refused.to_string(),
        "validating webhook refused rogue-controller's change to web-0: it leaves \
         operating.podopslifecycle.kusionstack.io/op without \
         operation-type.podopslifecycle.kusionstack.io/op; the two are added and removed together"
    );
    let refused = rogue(&ops, |pod| {
        pod.labels
            .insert(label("operation-type", "op"), "replace".into());
    });
    assert!(
        matches!(refused, PodOpsError::Webhook { present, .. } if present == label("operation-type", "op"))
    );

    // Begun the right way (both at once), then removed alone: refused; together: accepted.
    let controllers = ops.start();
    OperationController::new("replace")
        .begin(&ops, "op")
        .await
        .unwrap();
    // The seed's controllers take it as far as `operate`, through the webhook;
    // then they stop, so that nothing else changes the pod while the rogue tries.
    assert!(
        ops.wait_until(LIMIT, in_phase("op", S::Operate)).await,
        "{:#?}",
        ops.trace()
    );
    controllers.stop().await;
    let refused = rogue(&ops, |pod| {
        pod.labels.remove(&label("operation-type", "op"));
    });
    assert!(
        matches!(refused, PodOpsError::Webhook { missing, .. } if missing == label("operation-type", "op"))
    );
    // Other labels are not the webhook's business.
    ops.edit("user", |pod| {
        pod.labels.insert("example.com/team".into(), "web".into());
    })
    .unwrap();
    ops.edit("rogue-controller", |pod| {
        pod.labels.remove(&label("operating", "op"));
        pod.labels.remove(&label("operation-type", "op"));
    })
    .unwrap();
    assert!(!ops.pod().labels.contains_key(&label("operating", "op")));
    // The seed's own controllers never tripped it.
    assert_eq!(ops.violations(), Vec::<String>::new());
}
