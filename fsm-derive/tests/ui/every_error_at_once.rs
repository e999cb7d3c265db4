// Every finding is reported in one build, each at its own token.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Starting)]
#[fsm(action(start, from = Halted, via = Running, to = Running, guards = warmed_up))]
#[fsm(action(crash, from = Running, to = Crashed))]
enum Vm {
    Halted,
    #[fsm(transition)]
    Starting,
    Running,
    Crashed,
}

fn main() {}
