//! Every derived seed machine agrees with its spec file, as `fsm validate` reads it,
//! on every pair of states, every plan and every message.

#[path = "../examples/machines/mod.rs"]
mod machines;

use std::path::Path;

use fsm::typed::{Refusal, StateMachine};
use fsm::{Machine, Move};
use machines::*;

fn spec(path: &str) -> Machine {
    fsm::spec::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("specs")
            .join(path),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn agrees<S: StateMachine>(path: &str) {
    let m = spec(path);
    assert_eq!(
        S::machine(),
        &m,
        "{path}: the derived machine is the spec's"
    );
    assert_eq!(S::ALL.len(), m.states().len());
    for (i, s) in S::ALL.iter().enumerate() {
        assert_eq!(s.id().0, i);
        assert_eq!(s.name(), m.states()[i].name);
        assert_eq!(S::from_name(&s.name().to_lowercase()), Some(*s));
        assert_eq!(s.is_transition(), m.states()[i].is_transition());
        assert_eq!(s.is_terminal(), m.states()[i].terminal);
        assert_eq!(s.is_removable(), m.states()[i].remove.is_some());
    }
    assert_eq!(S::initial().id(), m.initial());
    for &from in S::ALL {
        let successors: Vec<_> = from.successors().iter().map(|s| s.id()).collect();
        assert_eq!(
            successors,
            m.successors(from.id()),
            "{path}: successors of {}",
            from.name()
        );
        let actions: Vec<_> = from
            .actions_from()
            .iter()
            .map(|&a| S::action_id(a))
            .collect();
        assert_eq!(actions, m.actions_from(from.id()).collect::<Vec<_>>());
        for &to in S::ALL {
            let core = m.validate_transition(from.id(), to.id());
            let derived = S::move_between(from, to)
                .ok_or_else(|| S::validate_transition(from, to).expect_err("no move, so refused"));
            assert_eq!(S::can_transition(from, to), core.is_ok());
            assert_eq!(S::validate_transition(from, to).is_ok(), core.is_ok());
            match (derived, core) {
                (Ok(step), Ok(core_step)) => {
                    let mapped = match step {
                        Move::Start(a) => Move::Start(S::action_id(a)),
                        Move::Finish(a) => Move::Finish(S::action_id(a)),
                        Move::Whole(a) => Move::Whole(S::action_id(a)),
                    };
                    assert_eq!(
                        mapped,
                        core_step,
                        "{path}: {} -> {}",
                        from.name(),
                        to.name()
                    );
                }
                (Err(e), Err(core_err)) => {
                    assert_eq!(e.to_string(), core_err.to_string());
                    let refusal = match core_err {
                        fsm::TransitionError::Busy { .. } => Refusal::Busy,
                        fsm::TransitionError::Terminal { .. } => Refusal::Terminal,
                        fsm::TransitionError::NoRule { .. } => Refusal::NoRule,
                    };
                    assert_eq!(e.refusal, refusal);
                    assert_eq!((e.from, e.to), (from, to));
                }
                (derived, core) => panic!(
                    "{path}: {} -> {}: derived {derived:?}, spec {core:?}",
                    from.name(),
                    to.name()
                ),
            }
        }
    }
}

#[test]
fn ovc_vm() {
    agrees::<VmState>("ovc/vm.toml");
}

#[test]
fn ovc_cloudspace() {
    agrees::<CloudspaceState>("ovc/cloudspace.toml");
}

#[test]
fn ovc_account() {
    agrees::<AccountState>("ovc/account.toml");
}

#[test]
fn ovc_disk() {
    agrees::<DiskState>("ovc/disk.toml");
}

#[test]
fn ovc_image() {
    agrees::<ImageState>("ovc/image.toml");
}

#[test]
fn ovc_node() {
    agrees::<NodeState>("ovc/node.toml");
}

#[test]
fn sabakan_machine() {
    agrees::<MachineState>("sabakan/machine.toml");
}

#[test]
fn mizar_vpc_written_inline_equals_its_spec() {
    agrees::<VpcState>("mizar/vpc.toml");
}

#[test]
fn plans_agree_with_the_spec() {
    let m = spec("ovc/disk.toml");
    for action in DiskStateAction::ALL {
        assert_eq!(action.name(), m.action(action.id()).name);
        for state in DiskState::ALL {
            let core = m.start(action.id(), state.id());
            match (action.plan(state), core) {
                (Ok(p), Ok(c)) => {
                    assert_eq!(
                        (p.origin.id(), p.via.map(DiskState::id), p.target.id()),
                        (c.origin, c.via, c.target)
                    );
                }
                (Err(e), Err(c)) => {
                    assert_eq!(e.to_string(), c.to_string());
                    assert_eq!(e.is_busy(), state.is_transition());
                }
                (p, c) => panic!("{action:?} from {state:?}: derived {p:?}, spec {c:?}"),
            }
        }
    }
}

#[test]
fn action_tables_agree_with_the_spec() {
    let m = spec("sabakan/machine.toml");
    for a in MachineAction::ALL {
        let core = m.action(a.id());
        assert_eq!(
            a.roles(),
            core.roles.iter().map(|r| &**r).collect::<Vec<_>>()
        );
        let guards: Vec<&str> = core.guards.iter().map(|&g| &*m.guard(g).name).collect();
        assert_eq!(a.guards(), guards);
        assert_eq!(a.changes_state(), core.changes_state());
        assert_eq!(
            a.origins().iter().map(|s| s.id()).collect::<Vec<_>>(),
            core.origins.to_vec()
        );
    }
    assert!(VmStateAction::Migrate.is_hidden() && !VmStateAction::Migrate.changes_state());
}

#[test]
fn const_context() {
    const PAUSE: bool = VmState::can_transition(VmState::Running, VmState::Pausing);
    const RESUME_FROM_HALTED: bool = VmState::can_transition(VmState::Halted, VmState::Resuming);
    const FINISH: bool = VmState::validate_transition(VmState::Pausing, VmState::Paused).is_ok();
    const NAME: &str = VmState::AddingDisk.name();
    const { assert!(PAUSE && !RESUME_FROM_HALTED && FINISH) };
    assert_eq!(NAME, "ADDING_DISK");
    assert_eq!(
        VmState::move_between(VmState::Pausing, VmState::Paused),
        Some(Move::Finish(VmStateAction::Pause))
    );
}

/// Every shape of input the derive reads from the compiler's tokens: a restricted
/// visibility, doc comments and other attributes on the enum and its variants,
/// explicit discriminants (ids then come from a `match`), variants declared out of
/// the table's order, raw identifiers, dashed role names, a string key, and values
/// as `[A, B]` lists and `A | B` alternatives.
mod shapes {
    use fsm::prelude::*;

    /// A door.
    #[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[fsm(initial = Closed, roles(door-keeper = "Keeps the keys", "night watch" = "Walks at night"))]
    #[fsm(action(open, from = Closed | Ajar, to = Open, roles = [door-keeper, "night watch"]))]
    #[fsm(action(r#type, from = [Open], via = Closing, to = Closed))]
    #[allow(dead_code)]
    pub(crate) enum Door {
        /// Shut.
        #[fsm(description = "Shut tight")]
        Closed = 10,
        #[fsm(transition)]
        Closing = 4,
        Open = 7,
        Ajar = 1,
    }

    #[test]
    fn the_derive_reads_every_shape_of_input() {
        assert_eq!(
            Door::ALL,
            [Door::Closed, Door::Closing, Door::Open, Door::Ajar]
        );
        let ids: Vec<usize> = Door::ALL.iter().map(|d| d.id().0).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert!(Door::can_transition(Door::Ajar, Door::Open));
        assert!(Door::can_transition(Door::Open, Door::Closing));
        assert!(!Door::can_transition(Door::Open, Door::Ajar));
        assert_eq!(DoorAction::Open.roles(), ["door-keeper", "night watch"]);
        assert_eq!(DoorAction::Type.name(), "type");
        let m = Door::machine();
        assert_eq!(m.description(), Some("A door."));
        let closed = m.state(Door::Closed.id());
        assert_eq!(closed.description.as_deref(), Some("Shut tight"));
    }
}

#[test]
fn strum_sits_beside_the_derive() {
    for state in VmState::ALL {
        let strum_name: &'static str = state.into();
        assert_eq!(strum_name, state.name());
    }
    use strum::IntoEnumIterator;
    assert_eq!(VmState::iter().collect::<Vec<_>>(), VmState::ALL);
}

/// What goes on the wire: with the `serde` feature, serde both ways.
#[cfg(feature = "serde")]
trait Wire: serde::Serialize + serde::de::DeserializeOwned {}
#[cfg(feature = "serde")]
impl<T: serde::Serialize + serde::de::DeserializeOwned> Wire for T {}
#[cfg(not(feature = "serde"))]
trait Wire {}
#[cfg(not(feature = "serde"))]
impl<T> Wire for T {}

/// Every state and action of `S` goes out by its spec name and comes back, through
/// `Display`/`FromStr` and (with the `serde` feature) JSON.
fn names_round_trip<S>(path: &str)
where
    S: StateMachine + Wire + std::fmt::Display + std::str::FromStr<Err = fsm::typed::UnknownName>,
    S::Action: Wire + std::fmt::Display + std::str::FromStr<Err = fsm::typed::UnknownName>,
{
    let m = spec(path);
    for (&state, spec_state) in S::ALL.iter().zip(m.states()) {
        assert_eq!(state.to_string(), spec_state.name);
        assert_eq!(spec_state.name.parse::<S>(), Ok(state));
        #[cfg(feature = "serde")]
        serde_round_trip(state, &spec_state.name);
    }
    for (&action, spec_action) in S::ACTIONS.iter().zip(m.actions()) {
        assert_eq!(action.to_string(), spec_action.name);
        assert_eq!(spec_action.name.parse::<S::Action>(), Ok(action));
        #[cfg(feature = "serde")]
        serde_round_trip(action, &spec_action.name);
    }
    // Names are exact: another case is not the name on the wire.
    let first = m.states()[0].name.to_lowercase();
    if first != *m.states()[0].name {
        assert!(first.parse::<S>().is_err(), "{path}: {first}");
    }
}

#[cfg(feature = "serde")]
fn serde_round_trip<T>(value: T, name: &str)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_string(&value).unwrap();
    assert_eq!(json, serde_json::to_string(name).unwrap());
    assert_eq!(serde_json::from_str::<T>(&json).unwrap(), value);
}

#[test]
fn every_seed_machine_round_trips_its_names() {
    names_round_trip::<VmState>("ovc/vm.toml");
    names_round_trip::<CloudspaceState>("ovc/cloudspace.toml");
    names_round_trip::<AccountState>("ovc/account.toml");
    names_round_trip::<DiskState>("ovc/disk.toml");
    names_round_trip::<ImageState>("ovc/image.toml");
    names_round_trip::<NodeState>("ovc/node.toml");
    names_round_trip::<MachineState>("sabakan/machine.toml");
    names_round_trip::<VpcState>("mizar/vpc.toml");
    names_round_trip::<DividerState>("mizar/divider.toml");
    names_round_trip::<BouncerState>("mizar/bouncer.toml");
    names_round_trip::<NetworkState>("mizar/network.toml");
    names_round_trip::<EndpointState>("mizar/endpoint.toml");
    names_round_trip::<DropletState>("mizar/droplet.toml");
    names_round_trip::<ScaledEndpointState>("mizar/scaled_endpoint.toml");
    names_round_trip::<PodOpsState>("kusionstack/podopslifecycle.toml");
}

#[test]
fn names_on_the_wire_are_the_specs() {
    assert_eq!("RUNNING".parse::<VmState>(), Ok(VmState::Running));
    assert_eq!(VmState::AddingDisk.to_string(), "ADDING_DISK");
    assert_eq!(VmStateAction::AddDisk.to_string(), "add_disk");
    assert_eq!(format!("{:>10}|", VmState::Halted), "    HALTED|");
    let err = "RUNNIG".parse::<VmState>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "`RUNNIG` is not a state of vm (did you mean `RUNNING`?); expected one of: VIRTUAL, \
         DEPLOYING, RUNNING, PAUSING, PAUSED, RESUMING, STOPPING, HALTED, REBOOTING, \
         RESETTING, ADDING_DISK, ATTACHING_DISK, DETACHING_DISK, DELETING, DELETED, \
         DESTROYING, DESTROYED"
    );
    let err = "explode".parse::<VmStateAction>().unwrap_err();
    assert_eq!(err.kind, fsm::typed::NameKind::Action);
    assert!(
        err.to_string()
            .starts_with("`explode` is not an action of vm; expected one of: deploy, "),
        "{err}"
    );
}

#[cfg(feature = "serde")]
#[test]
fn serde_refuses_unknown_names_and_reads_renamed_ones() {
    #[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[fsm(spec = "tests/specs/renamed.toml")]
    enum Door {
        Open,
        Shut,
    }
    let err = serde_json::from_str::<VmState>("\"RUNNIG\"").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`RUNNIG` is not a state of vm (did you mean `RUNNING`?)"),
        "{err}"
    );
    assert!(serde_json::from_str::<VmState>("4").is_err());
    // A name from before a rename reads as the state it became; it is written anew.
    assert_eq!(
        serde_json::from_str::<Door>("\"CLOSED\"").unwrap(),
        Door::Shut
    );
    assert_eq!("CLOSED".parse::<Door>(), Ok(Door::Shut));
    assert_eq!(serde_json::to_string(&Door::Shut).unwrap(), "\"SHUT\"");
    assert_eq!(
        serde_json::from_str::<DoorAction>("\"close\"").unwrap(),
        DoorAction::Shut
    );
}

/// An enum that keeps serde impls of its own (here a number each, as a compact
/// format would) says `serde = false`: the derive then writes none, so the two never
/// conflict, whichever crate of the build turned the feature `serde` on. Read from
/// a spec file, since `serde` is a setting, not part of the table.
#[test]
fn an_enum_keeps_its_own_serde_impls() {
    #[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
    #[fsm(spec = "tests/specs/renamed.toml", serde = false, actions = LatchAction)]
    enum Latch {
        Open,
        Shut,
    }
    impl serde::Serialize for Latch {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(self.id().0 as u64)
        }
    }
    impl<'de> serde::Deserialize<'de> for Latch {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let id = <u8 as serde::Deserialize>::deserialize(d)?;
            Latch::ALL
                .get(usize::from(id))
                .copied()
                .ok_or_else(|| serde::de::Error::custom(format!("no state {id}")))
        }
    }
    assert_eq!(serde_json::to_string(&Latch::Shut).unwrap(), "1");
    assert_eq!(serde_json::from_str::<Latch>("0").unwrap(), Latch::Open);
    // The names on the wire by `Display` and `FromStr` stay.
    assert_eq!(Latch::Shut.to_string(), "SHUT");
    assert_eq!("CLOSED".parse::<Latch>(), Ok(Latch::Shut));
    assert_eq!("close".parse::<LatchAction>(), Ok(LatchAction::Shut));
}

#[test]
fn diagrams_of_a_derived_enum_are_the_spec_diagrams() {
    let m = spec("ovc/vm.toml");
    assert_eq!(
        VmState::mermaid(),
        fsm::render::diagram(&m, fsm::render::Format::Mermaid)
    );
    assert_eq!(
        VmState::dot(),
        fsm::render::diagram(&m, fsm::render::Format::Dot)
    );
    assert_eq!(
        VmState::plantuml(),
        fsm::render::diagram(&m, fsm::render::Format::PlantUml)
    );
    for format in fsm::render::Format::ALL {
        for view in fsm::render::View::ALL {
            assert_eq!(
                VmState::diagram(format, view),
                fsm::render::render(&m, format, view)
            );
        }
    }
}

#[cfg(feature = "proptest")]
mod properties {
    use super::*;
    use fsm::strategy;
    use proptest::prelude::*;

    fn walks_take_allowed_moves<S: StateMachine>(walk: &[S]) -> Result<(), TestCaseError> {
        prop_assert_eq!(walk[0], S::initial());
        for pair in walk.windows(2) {
            prop_assert!(
                S::move_between(pair[0], pair[1]).is_some(),
                "{:?} -> {:?}",
                pair[0],
                pair[1]
            );
        }
        Ok(())
    }

    macro_rules! machine_properties {
        ($($module:ident: $state:ty),* $(,)?) => {$(
            mod $module {
                use super::*;
                proptest! {
                    #[test]
                    fn random_walks_take_only_allowed_moves(walk in strategy::walk::<$state>(40)) {
                        walks_take_allowed_moves(&walk)?;
                    }

                    #[test]
                    fn every_forbidden_move_is_refused((from, to) in strategy::forbidden_move::<$state>()) {
                        let err = <$state>::validate_transition(from, to).unwrap_err();
                        prop_assert_eq!((err.from, err.to), (from, to));
                        prop_assert!(!<$state>::can_transition(from, to));
                        prop_assert!(!err.to_string().is_empty());
                    }

                    #[test]
                    fn every_allowed_move_is_a_step((from, to) in strategy::allowed_move::<$state>()) {
                        let step = <$state>::move_between(from, to).unwrap();
                        let action = step.action();
                        match step {
                            Move::Start(_) => prop_assert_eq!(action.via(), Some(to)),
                            Move::Finish(_) => prop_assert_eq!(action.via(), Some(from)),
                            Move::Whole(_) => prop_assert_eq!(action.target_from(from), Some(to)),
                        }
                    }

                    #[test]
                    fn any_state_round_trips_by_name(state in strategy::any_state::<$state>()) {
                        prop_assert_eq!(<$state>::from_name(state.name()), Some(state));
                    }
                }
            }
        )*};
    }

    machine_properties! {
        vm: VmState,
        cloudspace: CloudspaceState,
        account: AccountState,
        disk: DiskState,
        image: ImageState,
        node: NodeState,
        sabakan: MachineState,
        vpc: VpcState,
    }
}

/// The runtime takes a derived machine, its states and its actions.
#[test]
fn the_runtime_runs_a_derived_machine() {
    use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};

    let rt = Runtime::of::<VmState>(MemoryStore::new()).unwrap();
    let alice = Actor::new("alice");
    rt.create("vm-1", &alice).unwrap();
    rt.run("vm-1", &alice, VmStateAction::Deploy).unwrap();
    let pause = rt.start("vm-1", &alice, VmStateAction::Pause).unwrap();
    assert_eq!(rt.state_as::<VmState>("vm-1").unwrap(), VmState::Pausing);
    assert!(matches!(
        rt.start("vm-1", &alice, VmStateAction::Stop),
        Err(RuntimeError::Busy { .. })
    ));
    let done = pause.complete().unwrap();
    assert_eq!(VmState::from_id(done.state), Some(VmState::Paused));
    assert_eq!(fsm::StateId::from(VmState::Paused), done.state);
    assert_eq!(VmState::from_id(fsm::StateId(99)), None);
    // Reading the state as another machine's enum is a programming error, caught.
    let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.state_as::<DiskState>("vm-1")
    }));
    assert!(wrong.is_err());
    // Every object's state at once, as variants, sorted by id.
    rt.create("vm-0", &alice).unwrap();
    let states: Vec<(String, VmState)> = rt
        .states_as::<VmState>()
        .unwrap()
        .into_iter()
        .map(|(id, state)| (id.to_string(), state.unwrap()))
        .collect();
    let expected = [("vm-0", VmState::Virtual), ("vm-1", VmState::Paused)];
    assert_eq!(states, expected.map(|(id, s)| (id.to_owned(), s)));
    let executor = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let awaited = executor.block_on(rt.states_as_async::<VmState>()).unwrap();
    assert_eq!(awaited.len(), 2);
    assert!(
        awaited
            .iter()
            .all(|(id, s)| states.contains(&(id.to_string(), *s.as_ref().unwrap())))
    );
    let wrong =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.states_as::<DiskState>()));
    assert!(wrong.is_err());
}

/// A "system" built from a derived machine: its embedded `'static` machine plans
/// each action, and the derived `step` checks the moves into and out of the
/// transition state; run through the model-based harness against the spec file.
#[cfg(feature = "testing")]
mod harness {
    use super::*;
    use fsm::testing::{Adapter, Harness};
    use fsm::{ActionId, StateId};

    struct Derived<S: StateMachine> {
        state: S,
    }

    impl<S: StateMachine> Adapter for Derived<S> {
        fn reset(&mut self) {
            self.state = S::initial();
        }

        fn perform(&mut self, action: ActionId) -> Result<(), String> {
            let action = S::ACTIONS[action.0];
            let from = self.state;
            let rule = S::machine()
                .start(S::action_id(action), from.id())
                .map_err(|e| e.to_string())?;
            let to = S::ALL[rule.target.0];
            if let Some(via) = rule.via {
                let via = S::ALL[via.0];
                S::validate_transition(from, via).map_err(|e| e.to_string())?;
                S::validate_transition(via, to).map_err(|e| e.to_string())?;
            }
            self.state = to;
            Ok(())
        }

        fn state(&mut self) -> StateId {
            self.state.id()
        }
    }

    fn agrees<S: StateMachine>(path: &str) {
        let machine = spec(path);
        let mut system = Derived {
            state: S::initial(),
        };
        Harness::new(&machine)
            .cases(64)
            .check(&mut system)
            .unwrap_or_else(|f| panic!("{path}: {f}"));
    }

    #[test]
    fn every_derived_machine_passes_the_harness() {
        agrees::<VmState>("ovc/vm.toml");
        agrees::<DiskState>("ovc/disk.toml");
        agrees::<MachineState>("sabakan/machine.toml");
        agrees::<VpcState>("mizar/vpc.toml");
    }
}

/// proptest-state-machine with a derived machine as its reference: a system with a
/// planted bug (it accepts `resume` while RUNNING) is caught, and the failing walk
/// is shrunk, by proptest-state-machine's deletions, to the two actions that show
/// it.
#[cfg(feature = "testing")]
mod reference {
    use super::*;
    use fsm::testing::{Derived, Expected, Reference, ReferenceStateMachine, StateMachineTest};
    use proptest::test_runner::{Config, TestError, TestRunner};

    struct BuggyVm;

    impl StateMachineTest for BuggyVm {
        type SystemUnderTest = VmState;
        type Reference = Reference<Derived<VmState>>;

        fn init_test(_: &Expected<VmState>) -> VmState {
            VmState::initial()
        }

        fn apply(vm: VmState, expected: &Expected<VmState>, action: VmStateAction) -> VmState {
            let (outcome, now) = match (vm, action) {
                // The bug.
                (VmState::Running, VmStateAction::Resume) => (Ok(()), VmState::Running),
                _ => match action.plan(vm) {
                    Ok(plan) => (Ok(()), plan.target),
                    Err(e) => (Err(e.to_string()), vm),
                },
            };
            if let Err(problem) = expected.check(VmState::machine(), action, outcome, now) {
                panic!("{problem}");
            }
            now
        }
    }

    #[test]
    fn a_planted_bug_is_caught_and_shrunk() {
        // A fixed seed: which walk fails first, and so how far it shrinks, is the
        // same on every run.
        let mut runner = TestRunner::new(Config {
            cases: 256,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(7),
            ..Config::default()
        });
        let walks = Reference::<Derived<VmState>>::sequential_strategy(1..24);
        let result = runner.run(&walks, |(initial, transitions, seen)| {
            BuggyVm::test_sequential(Config::default(), initial, transitions, seen);
            Ok(())
        });
        let Err(TestError::Fail(why, (_, transitions, _))) = result else {
            panic!("the bug was not found: {result:?}");
        };
        assert!(
            why.message().contains("`resume` from RUNNING is forbidden"),
            "{why}"
        );
        assert_eq!(transitions, [VmStateAction::Deploy, VmStateAction::Resume]);
    }
}

/// Where the spec lets objects be removed, the derived enum says so: sabakan's
/// Retired, Mizar's deleted VPC (its table inline), and nowhere else.
#[test]
fn a_derived_state_says_whether_its_objects_may_be_removed() {
    let removable: Vec<MachineState> = (MachineState::ALL.iter().copied())
        .filter(|s| s.is_removable())
        .collect();
    assert_eq!(removable, [MachineState::Retired]);
    assert!(VpcState::Deleted.is_removable());
    assert!(!VpcState::Provisioned.is_removable());
}
