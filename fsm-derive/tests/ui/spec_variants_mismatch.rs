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

// Started empty: one error, with every variant to add.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/node.toml")]
enum Started {}

// Two states short, one variant of a name the spec does not have.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/node.toml")]
enum Short {
    Enabled,
    PuttingInMaintenance,
    Maintenance,
    Enabling,
    Retired,
}

fn main() {}
