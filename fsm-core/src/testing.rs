//! Model-based testing of your own system against its table (feature `testing`).
//!
//! Two ways in, on the same rules:
//!
//! - **proptest-state-machine**, the API Rust users of property tests know: any
//!   machine is a [`ReferenceStateMachine`] through [`Reference`] (allowed and
//!   forbidden actions drawn from the table, 3 to 1), so your
//!   `StateMachineTest` only performs each action on your system and asks
//!   [`Expected::check`] whether the system did what the table says. Shrinking
//!   (transitions deleted, then simplified) is proptest-state-machine's.
//! - **[`Harness`]**, for a system behind an [`Adapter`] (fresh object, perform,
//!   read back): it drives it along the machine's test [paths](crate::paths), a
//!   deterministic complement that takes every action from every reachable origin,
//!   then along proptest-state-machine's random walks of the same [`Reference`].
//!
//! After every step the check is the same: an allowed action is accepted and lands
//! in the action's target, a forbidden one is refused and moves nothing. A failure
//! is shrunk to a minimal sequence of actions and printed with what went wrong.
//!
//! ```
//! use std::collections::HashMap;
//! use fsm_core::{ActionId, Machine, StateId};
//! use fsm_core::testing::{Adapter, Harness};
//!
//! /// The service under test: a door registry written by hand, with a bug to find.
//! #[derive(Default)]
//! struct Doors { state: HashMap<u32, &'static str>, next: u32 }
//!
//! impl Doors {
//!     fn create(&mut self) -> u32 { self.next += 1; self.state.insert(self.next, "closed"); self.next }
//!     fn call(&mut self, door: u32, verb: &str) -> Result<(), String> {
//!         let s = self.state.get_mut(&door).ok_or("no such door")?;
//!         *s = match (*s, verb) {
//!             ("closed", "open") => "open",
//!             ("open", "close") => "closed",
//!             ("closed", "lock") => "locked",
//!             ("locked", "unlock") => "closed",
//!             ("locked", "open") if BUGGY => "open", // the bug: opens a locked door
//!             (s, v) => return Err(format!("cannot {v} a door that is {s}")),
//!         };
//!         Ok(())
//!     }
//! }
//! const BUGGY: bool = true;
//!
//! /// How the harness reaches the service: names of the spec, ids of the machine.
//! struct DoorAdapter<'m> { machine: &'m Machine, doors: Doors, door: u32 }
//!
//! impl Adapter for DoorAdapter<'_> {
//!     fn reset(&mut self) { self.door = self.doors.create(); }
//!     fn perform(&mut self, action: ActionId) -> Result<(), String> {
//!         let verb = &self.machine.action(action).name;
//!         self.doors.call(self.door, verb)
//!     }
//!     fn state(&mut self) -> StateId {
//!         let name = self.doors.state[&self.door].to_uppercase();
//!         self.machine.find_state(&name).expect("a state of the spec")
//!     }
//! }
//!
//! let machine = fsm_core::spec::load_str("door.toml", r#"
//!     [machine]
//!     name = "door"
//!     initial = "CLOSED"
//!     [states]
//!     CLOSED = "Shut, not locked"
//!     OPEN = "Open"
//!     LOCKED = "Shut and locked"
//!     [actions]
//!     open = { from = "CLOSED", to = "OPEN" }
//!     close = { from = "OPEN", to = "CLOSED" }
//!     lock = { from = "CLOSED", to = "LOCKED" }
//!     unlock = { from = "LOCKED", to = "CLOSED" }
//! "#)?;
//! let mut adapter = DoorAdapter { machine: &machine, doors: Doors::default(), door: 0 };
//! let failure = Harness::new(&machine).check(&mut adapter).unwrap_err();
//! // Shrunk to the shortest sequence that shows the bug.
//! assert_eq!(failure.actions, ["lock", "open"]);
//! assert_eq!(
//!     failure.to_string(),
//!     "the system disagrees with machine `door` after lock, open: \
//!      `open` from LOCKED is forbidden, but the system accepted it (now OPEN)"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
pub use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

use crate::paths::TestPaths;
use crate::typed::StateMachine;
use crate::{ActionId, Machine, StateId};

/// A machine known by its type, as proptest-state-machine's static API needs:
/// the machine, and how its states and actions are written in tests.
pub trait Spec: 'static {
    /// A state, as tests see it.
    type State: Copy + fmt::Debug + Into<StateId> + 'static;
    /// An action, as tests see it.
    type Action: Copy + fmt::Debug + Into<ActionId> + 'static;

    /// The machine.
    fn machine() -> &'static Machine;
    /// The state with this id.
    fn state(id: StateId) -> Self::State;
    /// The action with this id.
    fn action(id: ActionId) -> Self::Action;
}

/// A derived machine as a [`Spec`]: its own enums in tests.
pub struct Derived<S>(PhantomData<S>);

impl<S: StateMachine> Spec for Derived<S> {
    type State = S;
    type Action = S::Action;

    fn machine() -> &'static Machine {
        S::machine()
    }
    fn state(id: StateId) -> S {
        S::ALL[id.0]
    }
    fn action(id: ActionId) -> S::Action {
        S::ACTIONS[id.0]
    }
}

/// A machine loaded at run time (`fsm::spec::load`), known by a type of yours:
/// implement `machine` (a `static` `LazyLock`, say) and use [`Loaded<Self>`] as
/// the [`Spec`]; states and actions are ids.
pub trait LoadedSpec: 'static {
    /// The machine.
    fn machine() -> &'static Machine;
}

/// A [`LoadedSpec`] as a [`Spec`].
pub struct Loaded<L>(PhantomData<L>);

impl<L: LoadedSpec> Spec for Loaded<L> {
    type State = StateId;
    type Action = ActionId;

    fn machine() -> &'static Machine {
        L::machine()
    }
    fn state(id: StateId) -> StateId {
        id
    }
    fn action(id: ActionId) -> ActionId {
        id
    }
}

/// The reference state machine of a [`Spec`] for proptest-state-machine: it
/// starts in the initial state and draws each next action from the table, an
/// allowed one three times in four (when one is) and any action, forbidden ones
/// included, otherwise. Every action may be drawn anywhere, so shrinking may
/// delete any transition.
pub struct Reference<P>(PhantomData<P>);

/// The reference's state: where the table says the object is, and where it was
/// before the last action, so that a test can check that action's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected<S> {
    /// Where the object was before the last action.
    pub from: S,
    /// Where the table says it is now.
    pub state: S,
}

impl<S: Copy + Into<StateId>> Expected<S> {
    /// Whether the system did what `machine`'s table says of `action` from
    /// [`from`](Self::from): accepted it (`outcome` is `Ok`) and is now in
    /// [`state`](Self::state), or refused it and did not move. The reason
    /// otherwise, with the names involved.
    pub fn check<E: fmt::Display>(
        &self,
        machine: &Machine,
        action: impl Into<ActionId>,
        outcome: Result<(), E>,
        now: S,
    ) -> Result<(), String> {
        step(
            machine,
            self.from.into(),
            action.into(),
            outcome.map_err(|e| e.to_string()),
            now.into(),
        )
    }
}

impl<P: Spec> ReferenceStateMachine for Reference<P> {
    type State = Expected<P::State>;
    type Transition = P::Action;

    fn init_state() -> BoxedStrategy<Self::State> {
        let initial = P::state(P::machine().initial());
        Just(Expected {
            from: initial,
            state: initial,
        })
        .boxed()
    }

    fn transitions(state: &Self::State) -> BoxedStrategy<Self::Transition> {
        let m = P::machine();
        let all: Vec<P::Action> = m.action_ids().map(P::action).collect();
        let allowed: Vec<P::Action> = m.actions_from(state.state.into()).map(P::action).collect();
        if allowed.is_empty() {
            proptest::sample::select(all).boxed()
        } else {
            prop_oneof![
                3 => proptest::sample::select(allowed),
                1 => proptest::sample::select(all),
            ]
            .boxed()
        }
    }

    fn apply(state: Self::State, action: &Self::Transition) -> Self::State {
        let m = P::machine();
        let next = m
            .rule((*action).into(), state.state.into())
            .map_or(state.state, |r| P::state(r.target));
        Expected {
            from: state.state,
            state: next,
        }
    }
}

/// One step checked against the table: the problem, if the system's outcome of
/// `action` from `from` (now in `now`) is not what the table says.
fn step(
    m: &Machine,
    from: StateId,
    action: ActionId,
    outcome: Result<(), String>,
    now: StateId,
) -> Result<(), String> {
    let name = |s: StateId| m.state(s).name.to_string();
    let def = m.action(action);
    match (m.rule(action, from).map(|r| r.target), outcome) {
        (Some(_), Err(why)) => Err(format!(
            "`{}` from {} is allowed, but the system refused it: {why}",
            def.name,
            name(from)
        )),
        (Some(want), Ok(())) if now != want => Err(format!(
            "`{}` from {} must reach {}, but the system is in {}",
            def.name,
            name(from),
            name(want),
            name(now)
        )),
        (None, Ok(())) => Err(format!(
            "`{}` from {} is forbidden, but the system accepted it (now {})",
            def.name,
            name(from),
            name(now)
        )),
        (None, Err(_)) if now != from => Err(format!(
            "the system refused `{}` but moved from {} to {}",
            def.name,
            name(from),
            name(now)
        )),
        _ => Ok(()),
    }
}

/// The machine a [`Harness`] runs, as a [`Spec`] of ids: proptest-state-machine
/// reaches machines through types, and a harness holds one by reference. Each
/// distinct machine is kept once per thread for the rest of the thread's life.
struct Current;

thread_local! {
    static CURRENT: RefCell<Option<&'static Machine>> = const { RefCell::new(None) };
    static KEPT: RefCell<HashMap<String, &'static Machine>> = RefCell::new(HashMap::new());
}

impl Current {
    /// Makes `machine` the current one on this thread.
    fn set(machine: &Machine) {
        let key = crate::evolve::fingerprint(machine);
        let kept = KEPT.with(|kept| {
            *kept
                .borrow_mut()
                .entry(key)
                .or_insert_with(|| Box::leak(Box::new(machine.clone())))
        });
        CURRENT.with(|c| *c.borrow_mut() = Some(kept));
    }
}

impl LoadedSpec for Current {
    fn machine() -> &'static Machine {
        CURRENT.with(|c| c.borrow().expect("a harness set the machine"))
    }
}

/// Your system, as the harness drives it.
pub trait Adapter {
    /// Puts a fresh object, in the machine's initial state, under test.
    fn reset(&mut self);

    /// Performs `action` on the object. `Err` with the system's reason when it
    /// refuses.
    fn perform(&mut self, action: ActionId) -> Result<(), String>;

    /// Reads the object's state back.
    fn state(&mut self) -> StateId;
}

/// A sequence of actions on which the system and the table disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The machine's name.
    pub machine: String,
    /// The actions performed from a fresh object, by name, the last one at fault.
    pub actions: Vec<String>,
    /// What went wrong at the last one.
    pub problem: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let steps = if self.actions.is_empty() {
            "a reset".to_owned()
        } else {
            self.actions.join(", ")
        };
        write!(
            f,
            "the system disagrees with machine `{}` after {steps}: {}",
            self.machine, self.problem
        )
    }
}

impl std::error::Error for Failure {}

/// Drives an [`Adapter`] along generated paths and random walks.
#[derive(Debug, Clone)]
pub struct Harness<'m> {
    machine: &'m Machine,
    cases: u32,
    max_len: usize,
}

impl<'m> Harness<'m> {
    /// A harness for `machine`: 256 random walks of up to 32 actions.
    pub fn new(machine: &'m Machine) -> Self {
        Harness {
            machine,
            cases: 256,
            max_len: 32,
        }
    }

    /// How many random walks to try.
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// The longest random walk.
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len.max(1);
        self
    }

    /// The generated paths, then random walks.
    pub fn check(&self, adapter: &mut impl Adapter) -> Result<(), Failure> {
        self.check_paths(adapter)?;
        self.check_random(adapter)
    }

    /// Every shortest path and every path of the edge cover (see
    /// [`TestPaths`]), each from a fresh object.
    pub fn check_paths(&self, adapter: &mut impl Adapter) -> Result<(), Failure> {
        let paths = TestPaths::of(self.machine);
        let all = paths
            .shortest
            .iter()
            .map(|s| &s.path)
            .chain(paths.cover.iter());
        for path in all {
            let actions: Vec<_> = path.rules.iter().map(|r| r.action).collect();
            self.replay(adapter, &actions, None)
                .map_err(|(at, problem)| self.failure(&actions[..at], problem))?;
        }
        Ok(())
    }

    /// Random walks that mix allowed and forbidden actions, drawn by
    /// proptest-state-machine from the machine's [`Reference`]; a failure is
    /// shrunk by it (transitions deleted, then simplified), then until no single
    /// action can go, and cut at the action at fault.
    pub fn check_random(&self, adapter: &mut impl Adapter) -> Result<(), Failure> {
        Current::set(self.machine);
        let walks = Reference::<Loaded<Current>>::sequential_strategy(1..=self.max_len);
        let mut runner = TestRunner::new(Config {
            cases: self.cases,
            failure_persistence: None,
            ..Config::default()
        });
        let adapter = RefCell::new(adapter);
        let result = runner.run(&walks, |(_, actions, seen)| {
            match self.replay(&mut **adapter.borrow_mut(), &actions, seen.as_ref()) {
                Ok(()) => Ok(()),
                Err((_, problem)) => Err(TestCaseError::fail(problem)),
            }
        });
        match result {
            Ok(()) => Ok(()),
            Err(TestError::Fail(_, (_, actions, _))) => {
                let (actions, problem) = self.minimize(&mut **adapter.borrow_mut(), actions);
                Err(self.failure(&actions, problem))
            }
            Err(TestError::Abort(why)) => Err(Failure {
                machine: self.machine.name().to_owned(),
                actions: Vec::new(),
                problem: format!("proptest gave up: {why}"),
            }),
        }
    }

    /// Finishes proptest-state-machine's shrinking, which deletes each transition
    /// once, from the last to the first: a transition kept because deleting it hid
    /// the failure may be deletable once a later one is gone. Deletes single
    /// actions until none can go; the result ends at the action at fault.
    fn minimize(
        &self,
        adapter: &mut (impl Adapter + ?Sized),
        actions: Vec<ActionId>,
    ) -> (Vec<ActionId>, String) {
        // A system that does not fail the same way twice keeps the walk.
        let Err((at, mut problem)) = self.replay(adapter, &actions, None) else {
            let problem = "the system failed on this walk once, but not when replayed".into();
            return (actions, problem);
        };
        let mut best = actions[..at].to_vec();
        let mut i = 0;
        while i < best.len() {
            let mut candidate = best.clone();
            candidate.remove(i);
            match self.replay(adapter, &candidate, None) {
                Err((at, why)) => {
                    candidate.truncate(at);
                    best = candidate;
                    problem = why;
                    i = 0;
                }
                Ok(()) => i += 1,
            }
        }
        (best, problem)
    }

    /// Performs `actions` on a fresh object, checking each step (and counting it
    /// in `seen`, which tells proptest-state-machine's shrinking how far a walk
    /// got); on disagreement, how many actions were performed (the last at fault)
    /// and what went wrong.
    fn replay(
        &self,
        adapter: &mut (impl Adapter + ?Sized),
        actions: &[ActionId],
        seen: Option<&Arc<AtomicUsize>>,
    ) -> Result<(), (usize, String)> {
        let m = self.machine;
        adapter.reset();
        let mut state = m.initial();
        let start = adapter.state();
        if start != state {
            return Err((
                0,
                format!(
                    "a fresh object is in {}, not {}",
                    m.state(start).name,
                    m.state(state).name
                ),
            ));
        }
        for (i, &action) in actions.iter().enumerate() {
            if let Some(seen) = seen {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            let outcome = adapter.perform(action);
            let now = adapter.state();
            step(m, state, action, outcome, now).map_err(|problem| (i + 1, problem))?;
            state = now;
        }
        Ok(())
    }

    fn failure(&self, actions: &[ActionId], problem: String) -> Failure {
        Failure {
            machine: self.machine.name().to_owned(),
            actions: actions
                .iter()
                .map(|&a| self.machine.action(a).name.to_string())
                .collect(),
            problem,
        }
    }
}
