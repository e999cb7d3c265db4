//! Mizar's create and delete workflows (`mizar-object-workflows.md`) through the
//! control plane (`fsm_operators::mizar`): operators as tokio tasks watching the
//! runtime, one owner per state, parents deleted only after their children, and
//! every deleted object's record removed by the operator the seed names.
//!
//! The operators call the runtime's async API; every test runs them all on a
//! current-thread tokio runtime, where a call that blocked the thread would stall
//! every operator (and the test's bounded wait would fail).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fsm_operators::mizar::{Cluster, Kind, MizarError, Operators, Tick};
use fsm_runtime::{Actor, EntryKind, RuntimeError};

/// Generous: the workflows take milliseconds; this only bounds a broken run.
const LIMIT: Duration = Duration::from_secs(120);

/// The user-created objects of one run: VPCs, their networks, their endpoints.
struct Plan {
    vpcs: Vec<String>,
    networks: Vec<(String, String)>,
    endpoints: Vec<(String, String)>,
}

fn plan(vpcs: usize, networks: usize, endpoints: usize) -> Plan {
    let mut p = Plan {
        vpcs: Vec::new(),
        networks: Vec::new(),
        endpoints: Vec::new(),
    };
    for v in 0..vpcs {
        let vpc = format!("vpc-{v}");
        for n in 0..networks {
            let net = format!("{vpc}/net-{n}");
            for e in 0..endpoints {
                p.endpoints.push((net.clone(), format!("{net}/pod-{e}")));
            }
            p.networks.push((vpc.clone(), net));
        }
        p.vpcs.push(vpc);
    }
    p
}

/// Every user-created object of `kinds` is in `state`.
fn all_in(kinds: &'static [Kind], state: &'static str) -> impl Fn(&Cluster) -> bool {
    move |c| {
        kinds.iter().all(|&k| {
            c.ids(k)
                .iter()
                .all(|id| c.state(k, id.as_str()).as_deref() == Some(state))
        })
    }
}

/// No object of `kinds` is left: each one's delete workflow ran to its end and
/// its record was removed.
fn all_removed(kinds: &'static [Kind]) -> impl Fn(&Cluster) -> bool {
    move |c| kinds.iter().all(|&k| c.ids(k).is_empty())
}

/// `ids` of `kind` were removed, each in Deleted, by the operator `remover`,
/// and each one's life (the archive's) is whole: created, deleted, removed.
fn assert_removed<'a>(
    mizar: &Cluster,
    kind: Kind,
    ids: impl IntoIterator<Item = &'a str>,
    remover: &str,
) {
    for id in ids {
        assert_eq!(mizar.state(kind, id), None, "{kind:?} {id} has a record");
        assert_eq!(
            mizar.removed_in(kind, id).as_deref(),
            Some("Deleted"),
            "{kind:?} {id}"
        );
        let lives = mizar.lives(kind, id).unwrap();
        assert_eq!(lives.len(), 1, "{kind:?} {id}: {lives:?}");
        let (first, last) = (&lives[0][0], lives[0].last().unwrap());
        assert_eq!(first.kind, EntryKind::Created, "{kind:?} {id}");
        assert_eq!(
            (last.kind, &*last.actor),
            (EntryKind::Removed, remover),
            "{kind:?} {id}"
        );
    }
}

const USER_KINDS: &[Kind] = &[Kind::Vpc, Kind::Network, Kind::Endpoint];
const ALL_BUT_DROPLETS: &[Kind] = &[
    Kind::Vpc,
    Kind::Divider,
    Kind::Network,
    Kind::Bouncer,
    Kind::Endpoint,
];

/// Creates the plan's objects from one task per VPC, concurrently.
async fn create(mizar: &Cluster, plan: &Plan) {
    let mut tasks = tokio::task::JoinSet::new();
    for vpc in &plan.vpcs {
        let (mizar, vpc) = (mizar.clone(), vpc.clone());
        let networks: Vec<String> = plan
            .networks
            .iter()
            .filter(|(v, _)| *v == vpc)
            .map(|(_, n)| n.clone())
            .collect();
        let endpoints: Vec<(String, String)> = plan
            .endpoints
            .iter()
            .filter(|(n, _)| networks.contains(n))
            .cloned()
            .collect();
        tasks.spawn(async move {
            mizar.create_vpc(&vpc).unwrap();
            for net in &networks {
                mizar.create_network(&vpc, net).unwrap();
                tokio::task::yield_now().await;
            }
            for (net, ep) in &endpoints {
                mizar.create_endpoint(net, ep).unwrap();
                tokio::task::yield_now().await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// Tries every action no droplet operator may run, on every object, until `stop`;
/// answers how many attempts were made. Every one must be refused.
fn rogue(mizar: Cluster, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let rogue = Actor::new("rogue").with_role("droplet-operator");
        let mut attempts = 0;
        while !stop.load(Ordering::Relaxed) && attempts < 200_000 {
            for &kind in ALL_BUT_DROPLETS {
                let rt = mizar.runtime(kind);
                for id in mizar.ids(kind) {
                    // Nor may it remove anything: only Deleted objects go, by
                    // their own operator.
                    attempts += 1;
                    match rt.remove(id.clone(), &rogue) {
                        Ok(_) => panic!("the rogue removed {kind:?} {id}"),
                        Err(
                            RuntimeError::NotRemovable { .. }
                            | RuntimeError::MayNotRemove { .. }
                            | RuntimeError::Busy { .. }
                            | RuntimeError::NotFound { .. },
                        ) => {}
                        Err(e) => panic!("the rogue's removal got an unexpected error: {e}"),
                    }
                    for action in rt.machine().actions() {
                        if action.roles.iter().any(|r| &**r == "droplet-operator") {
                            continue;
                        }
                        attempts += 1;
                        match rt.run(id.clone(), &rogue, action.name.as_ref()) {
                            Ok(r) => panic!(
                                "the rogue moved {kind:?} {id} with {} to {}",
                                action.name,
                                rt.machine().state(r.state).name
                            ),
                            Err(
                                RuntimeError::MissingRole { .. }
                                | RuntimeError::NotOwner { .. }
                                | RuntimeError::NoRule { .. }
                                | RuntimeError::Busy { .. }
                                // Removed since the listing.
                                | RuntimeError::NotFound { .. },
                            ) => {}
                            Err(e) => panic!("the rogue got an unexpected error: {e}"),
                        }
                    }
                }
            }
        }
        attempts
    })
}

/// What the seed promises (`Cluster::violations`): every history a path, every
/// move out of an owned state by its owner, every creator the right one, parents
/// deleted after their children.
fn assert_owners_only(mizar: &Cluster) {
    assert_eq!(mizar.violations(), Vec::<String>::new());
}

/// The tick at which `id` of `kind` was removed (its archived removal).
fn removed_at(mizar: &Cluster, kind: Kind, id: &str) -> Tick {
    let lives = mizar.lives(kind, id).unwrap();
    let last = lives.last().and_then(|l| l.last());
    match last {
        Some(e) if e.kind == EntryKind::Removed => Tick::from(e.at),
        _ => panic!("{kind:?} {id} was not removed: {lives:?}"),
    }
}

/// The tick at which `id` of `kind` entered `state` (its last such entry).
fn entered(mizar: &Cluster, kind: Kind, id: &str, state: &str) -> Tick {
    mizar
        .entered(kind, id, state)
        .unwrap_or_else(|| panic!("{kind:?} {id} never entered {state}"))
}

#[tokio::test(flavor = "current_thread")]
async fn many_objects_are_created_and_deleted_concurrently_by_their_owners_only() {
    let mizar = Cluster::new();
    let operators = mizar.start();
    for d in 0..3 {
        mizar.create_droplet(&format!("droplet-{d}")).unwrap();
    }
    let plan = plan(8, 3, 5);
    let stop = Arc::new(AtomicBool::new(false));
    let rogue = rogue(mizar.clone(), stop.clone());

    create(&mizar, &plan).await;
    let provisioned = mizar
        .wait_until(LIMIT, all_in(ALL_BUT_DROPLETS, "Provisioned"))
        .await;
    assert!(provisioned, "provisioning stalled: {:#?}", mizar.trace());
    assert_eq!(mizar.ids(Kind::Endpoint).len(), 120);
    assert_eq!(mizar.ids(Kind::Divider).len(), 8);
    assert_eq!(mizar.ids(Kind::Bouncer).len(), 24);

    // What the workflows promise besides states.
    let topology = mizar.topology();
    let ips: HashSet<_> = plan
        .endpoints
        .iter()
        .map(|(_, ep)| topology[ep.as_str()].ip.expect("an address"))
        .collect();
    assert_eq!(ips.len(), plan.endpoints.len(), "addresses are unique");
    for vpc in &plan.vpcs {
        let dividers = &topology[vpc.as_str()].parts;
        assert_eq!(dividers.len(), 1);
        for net in &topology[vpc.as_str()].children {
            let network = &topology[net];
            for bouncer in &network.parts {
                let b = &topology[bouncer];
                assert!(b.droplet.is_some(), "{bouncer} placed");
                assert!(
                    b.peers.is_superset(dividers),
                    "{bouncer} knows its dividers"
                );
                assert!(
                    b.peers.is_superset(&network.children),
                    "{bouncer} knows its endpoints"
                );
                for d in dividers {
                    assert!(topology[d].peers.contains(bouncer), "{d} knows {bouncer}");
                }
            }
            for ep in &network.children {
                assert_eq!(
                    &topology[ep].peers, &network.parts,
                    "{ep} knows its bouncers"
                );
            }
        }
    }

    // The user deletes everything at once, parents first: the guards make them
    // wait for their children.
    for id in plan
        .vpcs
        .iter()
        .chain(plan.networks.iter().map(|(_, n)| n))
        .chain(plan.endpoints.iter().map(|(_, e)| e))
    {
        mizar.delete(id).unwrap();
    }
    let deleted = mizar.wait_until(LIMIT, all_removed(ALL_BUT_DROPLETS)).await;
    stop.store(true, Ordering::Relaxed);
    let attempts = rogue.join().expect("every rogue attempt was refused");
    operators.stop().await;
    assert!(deleted, "deletion stalled: {:#?}", mizar.trace());
    assert!(attempts > 0);
    assert_eq!(mizar.errors(), Vec::<String>::new());

    assert_owners_only(&mizar);
    // Every object's delete workflow ended in its removal, by the operator the
    // seed names ("The VPC Operator Deletes the VPC Object", ...).
    let topology_ids = |pairs: &[(String, String)]| -> Vec<String> {
        pairs.iter().map(|(_, id)| id.clone()).collect()
    };
    let by_kind = [
        (Kind::Vpc, plan.vpcs.clone(), "vpc-operator"),
        (
            Kind::Network,
            topology_ids(&plan.networks),
            "network-operator",
        ),
        (
            Kind::Endpoint,
            topology_ids(&plan.endpoints),
            "endpoint-operator",
        ),
    ];
    for (kind, ids, remover) in &by_kind {
        assert_eq!(mizar.removed(*kind).len(), ids.len(), "{kind:?}");
        assert_removed(&mizar, *kind, ids.iter().map(String::as_str), remover);
    }
    let dividers = mizar.removed(Kind::Divider);
    let bouncers = mizar.removed(Kind::Bouncer);
    assert_eq!((dividers.len(), bouncers.len()), (8, 24));
    assert_removed(
        &mizar,
        Kind::Divider,
        dividers.iter().map(|i| i.as_str()),
        "divider-operator",
    );
    assert_removed(
        &mizar,
        Kind::Bouncer,
        bouncers.iter().map(|i| i.as_str()),
        "bouncer-operator",
    );
    // "A VPC is not deleted while it has Networks"; "a Network is not deleted while
    // it has Endpoints": each parent's delete started after its last child was gone.
    for (vpc, net) in &plan.networks {
        assert!(
            entered(&mizar, Kind::Vpc, vpc, "Deleting")
                > entered(&mizar, Kind::Network, net, "Deleted")
        );
    }
    for (net, ep) in &plan.endpoints {
        assert!(
            entered(&mizar, Kind::Network, net, "Deleting")
                > entered(&mizar, Kind::Endpoint, ep, "Deleted")
        );
    }
    // "A VPC is deleted after its Dividers", "a Network after its Bouncers":
    // each parent left the store after its parts.
    for id in &dividers {
        let vpc = id.as_str().rsplit_once('/').unwrap().0;
        assert!(
            entered(&mizar, Kind::Vpc, vpc, "Deleted")
                > removed_at(&mizar, Kind::Divider, id.as_str())
        );
    }
    for id in &bouncers {
        let net = id.as_str().rsplit_once('/').unwrap().0;
        assert!(
            entered(&mizar, Kind::Network, net, "Deleted")
                > removed_at(&mizar, Kind::Bouncer, id.as_str())
        );
    }
    // Only Init and Provisioned are persisted: each object's persisted states, in
    // order, are exactly those two.
    for kind in ALL_BUT_DROPLETS.iter().copied() {
        let m = mizar.runtime(kind).machine();
        for id in mizar.removed(kind) {
            let mut persisted: Vec<&str> = Vec::new();
            for e in mizar.lives(kind, id.as_str()).unwrap().concat() {
                let state = m.state(e.to);
                if state.persisted && persisted.last() != Some(&&*state.name) {
                    persisted.push(&state.name);
                }
            }
            assert_eq!(persisted, ["Init", "Provisioned"], "{kind:?} {id}");
        }
    }
    // Nothing is left in the API server but the droplets.
    let topology = mizar.topology();
    let left: BTreeSet<_> = topology.values().map(|o| o.kind).collect();
    assert_eq!(left, BTreeSet::from([Kind::Droplet]), "{topology:#?}");
}

/// A cluster with its operators running, a droplet, and the VPC `vpc`, its
/// network `vpc/net` and that network's endpoint `vpc/net/pod`, provisioned.
async fn vpc_net_pod() -> (Cluster, Operators) {
    let mizar = Cluster::new();
    let operators = mizar.start();
    mizar.create_droplet("droplet-0").unwrap();
    mizar.create_vpc("vpc").unwrap();
    mizar.create_network("vpc", "vpc/net").unwrap();
    mizar.create_endpoint("vpc/net", "vpc/net/pod").unwrap();
    let up = mizar
        .wait_until(LIMIT, all_in(USER_KINDS, "Provisioned"))
        .await;
    assert!(up, "provisioning stalled: {:#?}", mizar.trace());
    (mizar, operators)
}

#[tokio::test(flavor = "current_thread")]
async fn a_parent_waits_for_its_children_to_be_deleted() {
    let (mizar, operators) = vpc_net_pod().await;

    let refused_by = |guard: &'static str| {
        move |c: &Cluster| {
            c.trace()
                .iter()
                .any(|l| l.what.contains(&format!("guard `{guard}` refused")))
        }
    };
    mizar.delete("vpc").unwrap();
    assert!(mizar.wait_until(LIMIT, refused_by("no_networks")).await);
    assert_eq!(
        mizar.state(Kind::Vpc, "vpc").as_deref(),
        Some("Provisioned")
    );
    // A network needs an existing VPC, and a VPC being deleted takes no new one.
    assert_eq!(
        mizar.create_network("vpc-nope", "vpc-nope/net"),
        Err(MizarError::NoParent {
            kind: Kind::Vpc,
            id: "vpc-nope".into()
        })
    );
    assert_eq!(
        mizar.create_network("vpc", "vpc/net-2"),
        Err(MizarError::ParentDeleting { id: "vpc".into() })
    );

    mizar.delete("vpc/net").unwrap();
    assert!(mizar.wait_until(LIMIT, refused_by("no_endpoints")).await);
    assert_eq!(
        mizar.state(Kind::Network, "vpc/net").as_deref(),
        Some("Provisioned")
    );
    assert_eq!(
        mizar.state(Kind::Vpc, "vpc").as_deref(),
        Some("Provisioned")
    );

    mizar.delete("vpc/net/pod").unwrap();
    assert!(mizar.wait_until(LIMIT, all_removed(USER_KINDS)).await);
    operators.stop().await;
    assert_eq!(mizar.errors(), Vec::<String>::new());
    let trace: Vec<String> = mizar.trace().into_iter().map(|l| l.what).collect();
    let at = |what: &str| trace.iter().position(|l| l == what).unwrap();
    assert!(
        at("delete Endpoint vpc/net/pod -> Deleted") < at("delete Network vpc/net -> Deleting")
    );
    assert!(at("delete Network vpc/net -> Deleted") < at("delete Vpc vpc -> Deleting"));
    assert!(at("removed Endpoint vpc/net/pod") < at("delete Network vpc/net -> Deleting"));
    assert!(at("delete Divider vpc/divider-0 -> Deleted") < at("delete Vpc vpc -> Deleted"));
    assert!(at("removed Divider vpc/divider-0") < at("delete Vpc vpc -> Deleted"));
    assert!(at("delete Vpc vpc -> Deleted") < at("removed Vpc vpc"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_rogue_operator_is_told_who_owns_the_state() {
    let mizar = Cluster::new();
    let operators = mizar.start();
    mizar.create_droplet("droplet-0").unwrap();
    mizar.create_vpc("vpc").unwrap();
    assert!(
        mizar
            .wait_until(LIMIT, all_in(&[Kind::Vpc], "Provisioned"))
            .await
    );
    operators.stop().await;

    let rogue = Actor::new("rogue").with_role("droplet-operator");
    let vpcs = mizar.runtime(Kind::Vpc);
    assert_eq!(
        vpcs.run("vpc", &rogue, "delete").unwrap_err().to_string(),
        "rogue may not run `delete`: it needs the role vpc-operator"
    );
    let dividers = mizar.runtime(Kind::Divider);
    assert_eq!(
        dividers
            .run("vpc/divider-0", &rogue, "request_delete")
            .unwrap_err()
            .to_string(),
        "rogue may not run `request_delete`: it needs the role divider-operator"
    );
    // The droplet operator's own move, but not from this state.
    assert_eq!(
        dividers
            .run("vpc/divider-0", &rogue, "place")
            .unwrap_err()
            .to_string(),
        "vpc/divider-0: `place` cannot start in Provisioned: it starts only from Init"
    );
    assert_eq!(vpcs.state_name("vpc").unwrap(), "Provisioned");
    assert!(
        vpcs.history("vpc")
            .unwrap()
            .iter()
            .all(|e| &*e.actor != "rogue")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn operators_that_lose_events_resync_and_finish() {
    // Watchers that buffer 2 events: the operators lag all the time.
    let mizar = Cluster::with_watch_capacity(2);
    let operators = mizar.start();
    mizar.create_droplet("droplet-0").unwrap();
    let plan = plan(2, 2, 3);
    create(&mizar, &plan).await;
    assert!(
        mizar
            .wait_until(LIMIT, all_in(ALL_BUT_DROPLETS, "Provisioned"))
            .await,
        "provisioning stalled: {:#?}",
        mizar.trace()
    );
    for (_, ep) in &plan.endpoints {
        mizar.delete(ep).unwrap();
    }
    for (_, net) in &plan.networks {
        mizar.delete(net).unwrap();
    }
    assert!(
        mizar
            .wait_until(LIMIT, all_removed(&[Kind::Network, Kind::Endpoint]))
            .await,
        "deletion stalled: {:#?}",
        mizar.trace()
    );
    operators.stop().await;
    assert!(mizar.lags() > 0, "the operators never lagged");
    assert_eq!(mizar.errors(), Vec::<String>::new());
    assert_owners_only(&mizar);
    assert_eq!(
        mizar.state(Kind::Vpc, "vpc-0").as_deref(),
        Some("Provisioned")
    );
}

/// A Deleted object whose removal was cut off (its operator stopped between
/// the delete and the removal) is removed when the operator is back; until
/// then its parent's delete waits for it: a network is deleted only once its
/// endpoints are gone from the store, not merely Deleted.
#[tokio::test(flavor = "current_thread")]
async fn a_deleted_object_left_behind_is_removed_when_its_operator_is_back() {
    let (mizar, operators) = vpc_net_pod().await;
    operators.stop().await;

    // The endpoint's delete workflow, each step by its operator's role, while
    // no operator runs: it ends in Deleted, with nobody there to remove it.
    let as_role = |role: &str| Actor::new(role).with_role(role);
    let endpoints = mizar.runtime(Kind::Endpoint);
    for (role, action) in [
        ("cni-service", "request_delete"),
        ("network-operator", "deallocate"),
        ("bouncer-operator", "delete"),
    ] {
        endpoints
            .run("vpc/net/pod", &as_role(role), action)
            .unwrap();
    }
    assert_eq!(
        mizar.state(Kind::Endpoint, "vpc/net/pod").as_deref(),
        Some("Deleted")
    );
    // Still in the store: its network's delete waits.
    let refused = mizar
        .runtime(Kind::Network)
        .start("vpc/net", &as_role("network-operator"), "delete")
        .unwrap_err();
    assert!(
        matches!(refused, RuntimeError::Guard { ref guard, .. } if guard == "no_endpoints"),
        "{refused}"
    );
    // Nobody but the Endpoint Operator may remove it.
    let refused = endpoints
        .remove("vpc/net/pod", &as_role("bouncer-operator"))
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "bouncer-operator may not remove vpc/net/pod in Deleted: it needs the role endpoint-operator"
    );

    let operators = mizar.start();
    let removed = |c: &Cluster| c.removed_in(Kind::Endpoint, "vpc/net/pod").is_some();
    assert!(
        mizar.wait_until(LIMIT, removed).await,
        "{:#?}",
        mizar.trace()
    );
    assert_removed(&mizar, Kind::Endpoint, ["vpc/net/pod"], "endpoint-operator");
    // Now the network goes.
    mizar.delete("vpc/net").unwrap();
    let removed = |c: &Cluster| c.removed_in(Kind::Network, "vpc/net").is_some();
    assert!(
        mizar.wait_until(LIMIT, removed).await,
        "{:#?}",
        mizar.trace()
    );
    operators.stop().await;
    assert_removed(&mizar, Kind::Network, ["vpc/net"], "network-operator");
    assert_eq!(mizar.errors(), Vec::<String>::new());
    assert_owners_only(&mizar);
}

/// A VPC, its network and its pod deleted, then made again under the same ids
/// and deleted again: every object lives twice, the second life numbered on
/// from the first one's removal (a version, an `If-Match` or a fence of the
/// first never names the second), and both lives are kept and checked.
#[tokio::test(flavor = "current_thread")]
async fn objects_made_again_under_their_ids_live_twice() {
    let (mizar, operators) = vpc_net_pod().await;
    for life in 0..2 {
        if life > 0 {
            mizar.create_vpc("vpc").unwrap();
            mizar.create_network("vpc", "vpc/net").unwrap();
            mizar.create_endpoint("vpc/net", "vpc/net/pod").unwrap();
            let up = all_in(ALL_BUT_DROPLETS, "Provisioned");
            assert!(mizar.wait_until(LIMIT, up).await, "{:#?}", mizar.trace());
        }
        for id in ["vpc", "vpc/net", "vpc/net/pod"] {
            mizar.delete(id).unwrap();
        }
        let gone = all_removed(ALL_BUT_DROPLETS);
        assert!(mizar.wait_until(LIMIT, gone).await, "{:#?}", mizar.trace());
    }
    operators.stop().await;
    assert_eq!(mizar.errors(), Vec::<String>::new());
    assert_owners_only(&mizar);
    for (kind, id) in [
        (Kind::Vpc, "vpc"),
        (Kind::Divider, "vpc/divider-0"),
        (Kind::Network, "vpc/net"),
        (Kind::Bouncer, "vpc/net/bouncer-0"),
        (Kind::Endpoint, "vpc/net/pod"),
    ] {
        let lives = mizar.lives(kind, id).unwrap();
        assert_eq!(lives.len(), 2, "{kind:?} {id}: {lives:?}");
        let removal = lives[0].last().unwrap();
        assert_eq!(removal.kind, EntryKind::Removed, "{kind:?} {id}");
        let created = &lives[1][0];
        assert_eq!(
            (created.kind, created.version),
            (EntryKind::Created, removal.version + 1),
            "{kind:?} {id}"
        );
        assert_eq!(
            lives[1].last().map(|e| e.kind),
            Some(EntryKind::Removed),
            "{kind:?} {id}"
        );
        assert_eq!(mizar.removed_in(kind, id).as_deref(), Some("Deleted"));
    }
}

/// The actions of `id`'s history (its lives, in order) that changed it, with
/// who ran each, in order.
fn actions(mizar: &Cluster, kind: Kind, id: &str) -> Vec<(String, String)> {
    let rt = mizar.runtime(kind);
    mizar
        .lives(kind, id)
        .unwrap()
        .concat()
        .iter()
        .filter(|e| e.kind == EntryKind::Completed)
        .map(|e| {
            let action = rt.machine().action(e.action.unwrap()).name.to_string();
            (action, e.actor.to_string())
        })
        .collect()
}

/// "VPC Operator creates a default VPC", "Network operator creates a default
/// network": both on start-up, provisioned like a user's, and not again when the
/// operators restart.
#[tokio::test(flavor = "current_thread")]
async fn the_operators_create_the_default_vpc_and_network_on_start_up() {
    let mizar = Cluster::with_defaults();
    let operators = mizar.start();
    mizar.create_droplet("droplet-0").unwrap();
    let up = |c: &Cluster| {
        c.state(Kind::Vpc, fsm_operators::mizar::DEFAULT_VPC)
            .as_deref()
            == Some("Provisioned")
            && c.state(Kind::Network, fsm_operators::mizar::DEFAULT_NETWORK)
                .as_deref()
                == Some("Provisioned")
    };
    assert!(
        mizar.wait_until(LIMIT, up).await,
        "defaults stalled: {:#?}",
        mizar.trace()
    );
    let creator = |kind, id| {
        mizar.runtime(kind).history(id).unwrap()[0]
            .actor
            .to_string()
    };
    assert_eq!(
        creator(Kind::Vpc, fsm_operators::mizar::DEFAULT_VPC),
        "vpc-operator"
    );
    assert_eq!(
        creator(Kind::Network, fsm_operators::mizar::DEFAULT_NETWORK),
        "network-operator"
    );
    let topology = mizar.topology();
    let network = &topology[fsm_operators::mizar::DEFAULT_NETWORK];
    assert_eq!(
        network.parent.as_ref().map(|p| p.as_str()),
        Some(fsm_operators::mizar::DEFAULT_VPC)
    );
    assert_eq!(
        network.parts.len(),
        1,
        "the default network has its bouncer"
    );
    // A user's network and endpoint in the default VPC go through as usual.
    let pod = format!("{}/pod-a", fsm_operators::mizar::DEFAULT_NETWORK);
    mizar
        .create_endpoint(fsm_operators::mizar::DEFAULT_NETWORK, &pod)
        .unwrap();
    let served = mizar
        .wait_until(LIMIT, |c| {
            c.state(Kind::Endpoint, &pod).as_deref() == Some("Provisioned")
        })
        .await;
    assert!(served, "the endpoint stalled: {:#?}", mizar.trace());
    operators.stop().await;

    // Restarted, the operators find the defaults and make no second ones.
    let before = (mizar.ids(Kind::Vpc), mizar.ids(Kind::Network));
    let operators = mizar.start();
    let settled = mizar
        .wait_until(Duration::from_millis(300), |c| {
            c.ids(Kind::Vpc).len() > 1 || c.ids(Kind::Network).len() > 1
        })
        .await;
    operators.stop().await;
    assert!(!settled, "a second default appeared: {:#?}", mizar.trace());
    assert_eq!((mizar.ids(Kind::Vpc), mizar.ids(Kind::Network)), before);
    assert_eq!(mizar.errors(), Vec::<String>::new());
    assert_owners_only(&mizar);
}

/// A service's scaled endpoint through the seed's create, update and delete
/// workflows, each step by the operator the seed names, in its order; its
/// network waits for it to be deleted.
#[tokio::test(flavor = "current_thread")]
async fn a_scaled_endpoint_is_created_updated_and_deleted_as_the_seed_says() {
    let mizar = Cluster::new();
    let operators = mizar.start();
    mizar.create_droplet("droplet-0").unwrap();
    mizar.create_vpc("vpc").unwrap();
    mizar.create_network("vpc", "vpc/net").unwrap();
    // Created before its network is up: it waits for the bouncers.
    mizar
        .create_scaled_endpoint("vpc/net", "vpc/net/svc", &["vpc/net/pod-a"])
        .unwrap();
    for pod in ["vpc/net/pod-a", "vpc/net/pod-b"] {
        mizar.create_endpoint("vpc/net", pod).unwrap();
    }
    let told = |backends: &'static [&'static str]| {
        move |c: &Cluster| {
            let o = &c.topology()["vpc/net/svc"];
            let want: BTreeSet<_> = backends
                .iter()
                .map(|b| fsm_runtime::ObjectId::from(*b))
                .collect();
            c.state(Kind::ScaledEndpoint, "vpc/net/svc").as_deref() == Some("Provisioned")
                && o.backends_told.as_ref() == Some(&want)
        }
    };
    assert!(
        mizar.wait_until(LIMIT, told(&["vpc/net/pod-a"])).await,
        "create stalled: {:#?}",
        mizar.trace()
    );
    // Create: an address; every bouncer of the network and the service know
    // each other.
    let topology = mizar.topology();
    let svc = &topology["vpc/net/svc"];
    let bouncers = &topology["vpc/net"].parts;
    assert!(svc.ip.is_some());
    assert_eq!(&svc.peers, bouncers);
    for b in bouncers {
        assert!(
            topology[b].peers.contains("vpc/net/svc"),
            "{b} knows the service"
        );
    }

    // Update: a backend added.
    mizar
        .set_backends("vpc/net/svc", &["vpc/net/pod-a", "vpc/net/pod-b"])
        .unwrap();
    assert!(
        mizar
            .wait_until(LIMIT, told(&["vpc/net/pod-a", "vpc/net/pod-b"]))
            .await,
        "update stalled: {:#?}",
        mizar.trace()
    );

    // Delete the network and everything in it at once: the network waits for
    // the service as for its endpoints.
    for id in ["vpc/net", "vpc/net/svc", "vpc/net/pod-a", "vpc/net/pod-b"] {
        mizar.delete(id).unwrap();
    }
    let gone = |c: &Cluster| {
        c.removed_in(Kind::Network, "vpc/net").as_deref() == Some("Deleted")
            && c.removed_in(Kind::ScaledEndpoint, "vpc/net/svc").as_deref() == Some("Deleted")
    };
    assert!(
        mizar.wait_until(LIMIT, gone).await,
        "delete stalled: {:#?}",
        mizar.trace()
    );
    operators.stop().await;
    assert_eq!(mizar.errors(), Vec::<String>::new());
    assert_owners_only(&mizar);

    let step = |a: &str, who: &str| (a.to_owned(), who.to_owned());
    assert_eq!(
        actions(&mizar, Kind::ScaledEndpoint, "vpc/net/svc"),
        [
            // Create, steps 1-3; the bouncers told (update steps 4-5).
            step("provision", "endpoint-operator"),
            step("update_bouncers", "bouncer-operator"),
            // Update: steps 1-3, then 4-5.
            step("update_backends", "endpoint-operator"),
            step("update_bouncers", "bouncer-operator"),
            // Delete: steps 1-2, 3-6, 7-8.
            step("deallocate", "endpoint-operator"),
            step("detach", "bouncer-operator"),
            step("delete", "endpoint-operator"),
        ]
    );
    assert_removed(
        &mizar,
        Kind::ScaledEndpoint,
        ["vpc/net/svc"],
        "endpoint-operator",
    );
    assert!(
        entered(&mizar, Kind::Network, "vpc/net", "Deleting")
            > removed_at(&mizar, Kind::ScaledEndpoint, "vpc/net/svc"),
        "the network started its delete before the service was gone"
    );
}
