// A spec file that does not exist (beside an attribute error, reported too),
// and one that is not UTF-8 text.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/no_such_object.toml", markers = "vm")]
enum Vm {
    Halted,
}

#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "fsm-derive/tests/ui/specs/latin1.toml")]
enum Disk {
    Halted,
}

fn main() {}
