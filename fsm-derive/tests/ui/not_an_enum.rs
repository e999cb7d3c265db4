// Only an enum of unit variants is a state enum.
#[derive(fsm::StateMachine)]
struct Vm {
    state: u8,
}

fn main() {}

// An enum with no variant has no state to start in.
#[derive(fsm::StateMachine)]
enum Empty {}
