// With a spec file, the variants must be the spec's states, one to one.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/node.toml")]
enum Node {
    Enabled,
    PuttingInMaintenance,
    Maintenance,
    Enabling,
    Decommissioning,
    Retired,
}

fn main() {}
