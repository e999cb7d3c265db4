// A wrong attribute and a wrong table come out in the same build. Findings about
// the machine as a whole (here `Crashed` would be a dead end), which a part lost to
// a wrong attribute could cause, wait until the attributes are right.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Halted, colour = "blue")]
#[fsm(action(start, from = Halted, via = Starting, to = Runing))]
#[fsm(action(stop, from = Running, to = Halted, speed = 3))]
enum Vm {
    Halted,
    #[fsm(transition)]
    Starting,
    Running,
    Crashed,
}

fn main() {}
