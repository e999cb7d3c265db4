// A state name that the table does not declare, with a suggestion.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Halted)]
#[fsm(action(start, from = Halted, to = Runing))]
#[fsm(action(stop, from = Running, to = Halted))]
enum Vm {
    Halted,
    Running,
}

fn main() {}
