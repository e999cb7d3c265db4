// Only an enum of unit variants is a state enum.
#[derive(fsm::StateMachine)]
struct Vm {
    state: u8,
}

fn main() {}
