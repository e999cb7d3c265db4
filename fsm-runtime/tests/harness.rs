//! The model-based harness against the runtime, for every shipped spec, and against
//! a deliberately broken adapter.

#[path = "../../fsm-core/tests/common/mod.rs"]
mod common;

use fsm_core::testing::{Adapter, Harness};
use fsm_core::{ActionId, Machine, StateId};
use fsm_runtime::{Actor, MemoryStore, Runtime};

/// The runtime as a system under test: a fresh object per reset, every action run
/// whole by an actor holding every role, every guard passing.
struct RuntimeAdapter {
    rt: Runtime,
    actor: Actor,
    object: u64,
    /// A bug to plant: accept this (action, state) pair even though the table does
    /// not, and report the action's first target.
    broken: Option<(&'static str, &'static str)>,
}

impl RuntimeAdapter {
    fn new(machine: Machine) -> Self {
        let mut builder = Runtime::builder(machine.clone(), MemoryStore::new());
        for g in machine.guards() {
            builder = builder.guard(g.name.to_string(), |_| true);
        }
        let actor = machine
            .roles()
            .iter()
            .fold(Actor::new("tester"), |a, r| a.with_role(&r.name));
        RuntimeAdapter {
            rt: builder.build().unwrap(),
            actor,
            object: 0,
            broken: None,
        }
    }

    fn id(&self) -> String {
        format!("o-{}", self.object)
    }
}

impl Adapter for RuntimeAdapter {
    fn reset(&mut self) {
        self.object += 1;
        self.rt.create(self.id(), &self.actor).unwrap();
    }

    fn perform(&mut self, action: ActionId) -> Result<(), String> {
        let m = self.rt.machine();
        if let Some((a, s)) = self.broken
            && m.action(action).name == a
            && self.rt.state_name(self.id()).unwrap() == s
        {
            return Ok(());
        }
        self.rt
            .run(self.id(), &self.actor, action)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn state(&mut self) -> StateId {
        self.rt.state(self.id()).unwrap()
    }
}

#[test]
fn the_runtime_agrees_with_every_shipped_spec() {
    for spec in common::specs() {
        let machine = fsm_core::spec::load(&spec).unwrap();
        let mut adapter = RuntimeAdapter::new(machine.clone());
        Harness::new(&machine)
            .cases(64)
            .check(&mut adapter)
            .unwrap_or_else(|f| panic!("{}: {f}", spec.display()));
    }
}

#[test]
fn a_broken_system_is_caught_and_shrunk_to_a_short_sequence() {
    let machine = fsm_core::spec::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"),
    )
    .unwrap();
    let mut adapter = RuntimeAdapter::new(machine.clone());
    // "Resume" a VM that is running: the table forbids it.
    adapter.broken = Some(("resume", "RUNNING"));
    let failure = Harness::new(&machine).check(&mut adapter).unwrap_err();
    assert_eq!(failure.actions, ["deploy", "resume"]);
    assert_eq!(
        failure.to_string(),
        "the system disagrees with machine `vm` after deploy, resume: \
         `resume` from RUNNING is forbidden, but the system accepted it (now RUNNING)"
    );
}

/// The random walks alone (no test paths first): proptest-state-machine's walks
/// of the machine's reference find the planted bug and shrink it.
#[test]
fn random_walks_alone_find_and_shrink_the_bug() {
    let machine = fsm_core::spec::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/ovc/vm.toml"),
    )
    .unwrap();
    let mut adapter = RuntimeAdapter::new(machine.clone());
    adapter.broken = Some(("resume", "RUNNING"));
    let failure = Harness::new(&machine)
        .check_random(&mut adapter)
        .unwrap_err();
    assert_eq!(failure.actions, ["deploy", "resume"]);
    // And a system without the bug passes them.
    adapter.broken = None;
    Harness::new(&machine).check_random(&mut adapter).unwrap();
}
