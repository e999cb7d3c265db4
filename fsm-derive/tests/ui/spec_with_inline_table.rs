// The table comes from one place: a spec file, or the attributes.
#[derive(fsm::StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/node.toml", initial = Enabled)]
enum Node {
    Enabled,
    PuttingInMaintenance,
    Maintenance,
    #[fsm(transition)]
    Enabling,
    Decommissioning,
    Decommissioned,
}

fn main() {}
