// A name that is empty or holds whitespace is refused, from the machine's
// `name` or a state's: names travel in URLs, store keys and other tools' formats.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(name = "my vm", initial = Halted)]
#[fsm(action(start, from = Halted, to = Running))]
#[fsm(action(stop, from = Running, to = Halted))]
enum Vm {
    Halted,
    #[fsm(name = "")]
    Running,
}

fn main() {}
