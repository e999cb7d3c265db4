// A spec file with a value of the wrong shape: that error, and beside it the
// names the spec gets wrong, in one build (as `fsm check` reports them).
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "fsm-derive/tests/ui/specs/misshapen.toml")]
enum Vm {
    Halted,
    Running,
}

fn main() {}
