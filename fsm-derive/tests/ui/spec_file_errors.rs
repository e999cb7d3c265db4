// Errors in a spec file are compile errors naming file, line and column.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "fsm-derive/tests/ui/specs/broken.toml")]
enum Vm {
    Halted,
    Running,
}

fn main() {}
