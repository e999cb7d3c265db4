// A spec file that does not exist, and one that is not UTF-8 text.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/no_such_object.toml")]
enum Vm {
    Halted,
}

#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "fsm-derive/tests/ui/specs/latin1.toml")]
enum Disk {
    Halted,
}

fn main() {}
