// A derive that fails reports its own errors, and only those: the code that uses
// the enum's API compiles against a stand-in of it, so no call, impl or const
// adds an error of its own (one misspelled state, one error).
use fsm::{ActionEnum, StateMachine};

#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Closed, markers)]
#[fsm(action(open, from = Closd, to = Open))]
#[fsm(action(close, from = Open, to = Closed))]
enum Door {
    Open,
    Closed,
}

// From a spec file whose states the variants misspell: its actions are read.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/node.toml", actions = NodeMove)]
enum Node {
    Enabled,
    PuttingInMaintenance,
    Maintenance,
    Enabling,
    Decomissioning,
    Decommissioned,
}

const CAN: bool = Door::can_transition(Door::Open, Door::Closed);

fn generic<M: StateMachine>(state: M) -> &'static str {
    state.name()
}

fn main() {
    let _ = CAN;
    let _ = Door::validate_transition(Door::Open, Door::Closed);
    let _: DoorAction = "open".parse().unwrap();
    let _ = DoorAction::Close.plan(Door::Open);
    let _ = (Door::ALL.len(), Door::machine().name(), Door::Open.to_string());
    let _ = generic(Door::Closed);
    let _ = door::Open;
    let _ = fsm::typed::checked_move::<door::Closed, door::Open>();
    let _ = NodeMove::Decommission.to_string();
    let _ = Node::initial();
}
