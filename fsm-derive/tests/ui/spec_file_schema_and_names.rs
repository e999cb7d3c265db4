// A spec file with a value of the wrong shape: that error, and beside it the
// names the spec gets wrong (as `fsm check` reports them) and the attribute
// that has no place beside a spec file, in one build.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "fsm-derive/tests/ui/specs/misshapen.toml", initial = Halted)]
enum Vm {
    Halted,
    Running,
}

fn main() {}
