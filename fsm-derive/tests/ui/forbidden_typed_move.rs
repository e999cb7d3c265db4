// A move the table forbids does not compile when stated with marker types.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Halted, markers)]
#[fsm(action(start, from = Halted, via = Starting, to = Running))]
#[fsm(action(stop, from = Running, to = Halted))]
enum Vm {
    Halted,
    #[fsm(transition)]
    Starting,
    Running,
}

fn main() {
    let _allowed = fsm::typed::checked_move::<vm::Halted, vm::Starting>();
    let _forbidden = fsm::typed::checked_move::<vm::Running, vm::Starting>();
}
