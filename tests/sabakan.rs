//! Every transition constraint of `sabakan-machine-lifecycle.md`, allowed and
//! refused, through the example registry (`examples/sabakan`), with the messages.

#[path = "../examples/machines/mod.rs"]
mod machines;
#[path = "../examples/sabakan/registry.rs"]
#[allow(dead_code)]
mod registry;

use fsm::ActionEnum;
use fsm_runtime::{Actor, EntryKind, RuntimeError, check_history};
use machines::MachineAction as A;
use machines::MachineState as S;
use registry::{Registry, RegistryError};

/// Every state but Retired, and every state but Retiring.
const NOT_RETIRED: [S; 6] = [
    S::Uninitialized,
    S::Healthy,
    S::Unhealthy,
    S::Unreachable,
    S::Updating,
    S::Retiring,
];
const NOT_RETIRING: [S; 6] = [
    S::Uninitialized,
    S::Healthy,
    S::Unhealthy,
    S::Unreachable,
    S::Updating,
    S::Retired,
];

fn admin() -> Actor {
    Actor::new("ops").with_role("admin")
}

fn controller() -> Actor {
    Actor::new("neco").with_role("controller")
}

/// A registry with one machine brought to `state` by the allowed moves.
fn machine_in(state: S) -> Registry {
    let r = Registry::new();
    let (a, c) = (admin(), controller());
    r.register("m", &a).unwrap();
    let path: &[(A, &Actor)] = match state {
        S::Uninitialized => &[],
        S::Healthy => &[(A::Initialize, &c)],
        S::Unhealthy => &[(A::Initialize, &c), (A::Fail, &c)],
        S::Unreachable => &[(A::Initialize, &c), (A::LoseContact, &c)],
        S::Updating => &[(A::Initialize, &c), (A::Update, &c)],
        S::Retiring => &[(A::Retire, &a)],
        S::Retired => &[(A::Retire, &a), (A::CompleteRetirement, &c)],
    };
    for &(action, actor) in path {
        r.transition("m", actor, action).unwrap();
    }
    assert_eq!(r.state("m").unwrap(), state);
    r
}

/// The message of the refusal of `action` by `actor` on a machine in `from`.
fn refusal(from: S, actor: &Actor, action: A) -> String {
    machine_in(from)
        .transition("m", actor, action)
        .unwrap_err()
        .to_string()
}

/// The transitions that leave a state, and who makes them.
fn actor_for(action: A) -> Actor {
    match action {
        A::Retire | A::Reinitialize => admin(),
        _ => controller(),
    }
}

/// Every move from `from`: the allowed ones land in their target; all others are
/// refused with the table's message, and nothing moves.
fn only(from: S, allowed: &[(A, S)]) {
    for &action in &A::ALL {
        if !action.changes_state() {
            continue;
        }
        let r = machine_in(from);
        r.report_restart("m");
        let result = r.transition("m", &actor_for(action), action);
        match allowed.iter().find(|(a, _)| *a == action) {
            Some(&(_, to)) => assert_eq!(result, Ok(to), "{from:?} --{action:?}-->"),
            None => {
                let err = result.unwrap_err();
                assert!(
                    err.to_string().contains(&format!(
                        "m: `{}` cannot start in {}",
                        action.name(),
                        from.name()
                    )),
                    "{from:?} --{action:?}--> {err}"
                );
                assert_eq!(r.state("m").unwrap(), from);
            }
        }
        check_history(r.runtime().machine(), &r.runtime().history("m").unwrap()).unwrap();
    }
}

#[test]
fn uninitialized_healthy_unhealthy_or_unreachable_can_transition_to_retiring() {
    for from in [S::Uninitialized, S::Healthy, S::Unhealthy, S::Unreachable] {
        let r = machine_in(from);
        assert_eq!(r.transition("m", &admin(), A::Retire), Ok(S::Retiring));
    }
    for from in [S::Updating, S::Retired] {
        let err = machine_in(from)
            .transition("m", &admin(), A::Retire)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "m: `retire` cannot start in {}: it starts only from Uninitialized, Healthy, Unhealthy, Unreachable",
                from.name()
            )
        );
    }
}

#[test]
fn transition_to_retiring_and_from_retired_is_for_admins() {
    assert_eq!(
        refusal(S::Healthy, &controller(), A::Retire),
        "neco may not run `retire`: it needs the role admin"
    );
    assert_eq!(
        refusal(S::Retired, &controller(), A::Reinitialize),
        "neco may not run `reinitialize`: it needs the role admin"
    );
    // And the controllers' moves are theirs.
    assert_eq!(
        refusal(S::Uninitialized, &admin(), A::Initialize),
        "ops may not run `initialize`: it needs the role controller"
    );
}

#[test]
fn a_retiring_machine_can_transition_only_to_retired() {
    only(S::Retiring, &[(A::CompleteRetirement, S::Retired)]);
}

#[test]
fn a_healthy_machine_can_transition_to_unhealthy_unreachable_retiring_and_updating() {
    only(
        S::Healthy,
        &[
            (A::Fail, S::Unhealthy),
            (A::LoseContact, S::Unreachable),
            (A::Retire, S::Retiring),
            (A::Update, S::Updating),
        ],
    );
}

#[test]
fn an_unreachable_machine_can_transition_to_healthy() {
    only(
        S::Unreachable,
        &[
            (A::Recover, S::Healthy),
            (A::Retire, S::Retiring),
            (A::Reinitialize, S::Uninitialized),
        ],
    );
}

/// The seed's diagram: "Unhealthy --> Uninitialized: Initialize manually" and
/// "Unreachable --> Uninitialized: Prepare the machine manually", made by admins.
#[test]
fn unhealthy_and_unreachable_machines_are_reinitialized_by_hand() {
    for from in [S::Unhealthy, S::Unreachable] {
        assert_eq!(
            machine_in(from).transition("m", &admin(), A::Reinitialize),
            Ok(S::Uninitialized)
        );
        assert_eq!(
            refusal(from, &controller(), A::Reinitialize),
            "neco may not run `reinitialize`: it needs the role admin"
        );
    }
}

#[test]
fn an_unhealthy_machine_cannot_return_to_healthy_directly() {
    only(
        S::Unhealthy,
        &[
            (A::Retire, S::Retiring),
            (A::Reinitialize, S::Uninitialized),
        ],
    );
    assert_eq!(
        refusal(S::Unhealthy, &controller(), A::Recover),
        "m: `recover` cannot start in Unhealthy: it starts only from Unreachable"
    );
}

#[test]
fn disk_keys_can_be_deleted_only_while_retiring() {
    for from in NOT_RETIRING {
        let r = machine_in(from);
        let err = r.delete_keys("m", &admin()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "m: `delete_keys` cannot start in {}: it starts only from Retiring",
                from.name()
            )
        );
    }
    let r = machine_in(S::Healthy);
    r.add_key("m", &controller(), "k1").unwrap();
    r.add_key("m", &controller(), "k2").unwrap();
    r.transition("m", &admin(), A::Retire).unwrap();
    assert_eq!(r.delete_keys("m", &admin()), Ok(2));
    assert!(r.keys("m").is_empty());
}

#[test]
fn retiring_to_retired_only_once_the_keys_are_deleted() {
    let r = machine_in(S::Uninitialized);
    r.add_key("m", &controller(), "k1").unwrap();
    r.transition("m", &admin(), A::Retire).unwrap();
    let err = r
        .transition("m", &controller(), A::CompleteRetirement)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "guard `keys_deleted` refused `complete_retirement` on m: All disk encryption keys of the machine have been deleted"
    );
    assert_eq!(r.state("m").unwrap(), S::Retiring);
    r.delete_keys("m", &controller()).unwrap();
    assert_eq!(
        r.transition("m", &controller(), A::CompleteRetirement),
        Ok(S::Retired)
    );
}

#[test]
fn only_retired_machines_can_be_removed() {
    for from in NOT_RETIRED {
        let r = machine_in(from);
        let err = r.remove("m", &admin()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "m cannot be removed in {}: only objects in Retired may be removed",
                from.name()
            )
        );
        assert_eq!(r.state("m").unwrap(), from, "nothing changed");
    }
    let r = machine_in(S::Retired);
    assert!(r.keys("m").is_empty(), "a Retired machine has no keys");
    // By admins only, as every operation by hand.
    assert_eq!(
        r.remove("m", &controller()).unwrap_err().to_string(),
        "neco may not remove m in Retired: it needs the role admin"
    );
    let version = r.runtime().get("m").unwrap().version;
    let mut watcher = r.runtime().watch().unwrap();
    let removed = r.remove("m", &admin()).unwrap();
    assert_eq!(
        (removed.kind, removed.version, &*removed.actor),
        (EntryKind::Removed, version + 1, "ops")
    );
    assert_eq!(
        watcher.try_recv().unwrap().map(|e| e.entry),
        Some(removed.clone())
    );
    let gone = RegistryError::Refused(RuntimeError::NotFound { id: "m".into() });
    assert_eq!(r.state("m").unwrap_err(), gone);
    assert_eq!(r.remove("m", &admin()).unwrap_err(), gone);
    assert!(r.runtime().history("m").unwrap().is_empty());
    // The serial is free: registered again, it is a new machine, whose
    // versions go on after the removal's (no version of the old one is its).
    r.register("m", &admin()).unwrap();
    assert_eq!(r.state("m").unwrap(), S::Uninitialized);
    assert_eq!(r.runtime().get("m").unwrap().version, removed.version + 1);
}

#[test]
fn no_new_disk_keys_can_be_added_to_retired_machines() {
    let err = machine_in(S::Retired)
        .add_key("m", &controller(), "k")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "m: `add_key` cannot start in Retired: it starts only from Uninitialized, Healthy, Unhealthy, Unreachable, Updating, Retiring"
    );
    for from in NOT_RETIRED {
        machine_in(from).add_key("m", &controller(), "k").unwrap();
    }
}

#[test]
fn retired_machines_can_transition_only_to_uninitialized() {
    only(S::Retired, &[(A::Reinitialize, S::Uninitialized)]);
}

#[test]
fn healthy_machines_can_transition_to_updating_for_restarting() {
    assert_eq!(
        machine_in(S::Healthy).transition("m", &controller(), A::Update),
        Ok(S::Updating)
    );
}

#[test]
fn updating_machines_can_transition_only_to_uninitialized_after_restarting() {
    let r = machine_in(S::Updating);
    let err = r
        .transition("m", &controller(), A::FinishUpdate)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "guard `restarted` refused `finish_update` on m: The machine has been restarted after its update"
    );
    r.report_restart("m");
    assert_eq!(
        r.transition("m", &controller(), A::FinishUpdate),
        Ok(S::Uninitialized)
    );
    only(S::Updating, &[(A::FinishUpdate, S::Uninitialized)]);
}

/// The registry against its table on proptest-state-machine's own API: the
/// reference is the derived enum's table (`fsm::testing::Reference`), each
/// transition an action, allowed or forbidden, performed on a fresh registry and
/// checked with `Expected::check`; a failure is shrunk by deleting transitions.
/// The test satisfies the guards the way sabakan's users do (keys deleted before
/// retirement completes, a restart reported before an update finishes). Removal,
/// which is no action, has its own test above.
#[cfg(feature = "testing")]
mod model {
    use super::*;
    use fsm::StateMachine;
    use fsm::testing::{
        Derived, Expected, Reference, ReferenceStateMachine, StateMachineTest, prop_state_machine,
    };

    /// One registry and its machine under test.
    struct Sabakan {
        registry: Registry,
        actor: Actor,
    }

    const SERIAL: &str = "node-1";

    impl Sabakan {
        fn perform(&self, action: A) -> Result<(), String> {
            let (registry, actor) = (&self.registry, &self.actor);
            let refused = |e: RegistryError| e.to_string();
            match action {
                A::AddKey => registry.add_key(SERIAL, actor, "disk1").map_err(refused),
                A::DeleteKeys => registry
                    .delete_keys(SERIAL, actor)
                    .map(drop)
                    .map_err(refused),
                other => {
                    if other == A::CompleteRetirement {
                        // Only possible while Retiring; elsewhere it is refused and
                        // the transition after it too.
                        let _ = registry.delete_keys(SERIAL, actor);
                    }
                    if other == A::FinishUpdate {
                        registry.report_restart(SERIAL);
                    }
                    registry
                        .transition(SERIAL, actor, other)
                        .map(drop)
                        .map_err(refused)
                }
            }
        }
    }

    struct RegistryTest;

    impl StateMachineTest for RegistryTest {
        type SystemUnderTest = Sabakan;
        type Reference = Reference<Derived<S>>;

        fn init_test(_: &Expected<S>) -> Sabakan {
            let sabakan = Sabakan {
                registry: Registry::new(),
                actor: Actor::new("ops").with_role("admin").with_role("controller"),
            };
            sabakan.registry.register(SERIAL, &sabakan.actor).unwrap();
            // A machine with a key: retirement has something to delete.
            sabakan
                .registry
                .add_key(SERIAL, &sabakan.actor, "disk0")
                .unwrap();
            sabakan
        }

        fn apply(sabakan: Sabakan, expected: &Expected<S>, action: A) -> Sabakan {
            let outcome = sabakan.perform(action);
            let now = sabakan.registry.state(SERIAL).unwrap();
            if let Err(problem) = expected.check(S::machine(), action, outcome, now) {
                panic!("{problem}");
            }
            sabakan
        }

        fn check_invariants(sabakan: &Sabakan, _: &Expected<S>) {
            let rt = sabakan.registry.runtime();
            check_history(rt.machine(), &rt.history(SERIAL).unwrap()).unwrap();
        }
    }

    prop_state_machine! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 64,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]
        #[test]
        fn the_registry_agrees_with_its_table(sequential 1..32 => RegistryTest);
    }

    /// The deterministic complement: the machine's test paths, every action from
    /// every reachable origin, through the same test.
    #[test]
    fn the_registry_takes_every_path_of_its_table() {
        let paths = fsm::paths::TestPaths::of(S::machine());
        let all = paths
            .shortest
            .iter()
            .map(|s| &s.path)
            .chain(paths.cover.iter());
        let mut taken = 0;
        for path in all {
            let mut expected = Expected {
                from: S::initial(),
                state: S::initial(),
            };
            let mut sabakan = RegistryTest::init_test(&expected);
            for rule in &path.rules {
                let action = S::ACTIONS[rule.action.0];
                expected = Reference::<Derived<S>>::apply(expected, &action);
                sabakan = RegistryTest::apply(sabakan, &expected, action);
                taken += 1;
            }
        }
        assert!(
            taken > S::machine().rules().count(),
            "{taken} actions taken"
        );
    }
}
