// A spec file that does not exist.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/no_such_object.toml")]
enum Vm {
    Halted,
}

fn main() {}
