// An action may not start while another runs: its origin cannot be a transition state.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Halted)]
#[fsm(action(start, from = Halted, via = Starting, to = Running))]
#[fsm(action(stop, from = [Running, Starting], to = Halted))]
enum Vm {
    Halted,
    #[fsm(transition)]
    Starting,
    Running,
}

fn main() {}
