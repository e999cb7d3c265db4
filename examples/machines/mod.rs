//! The seed machines as derived enums: every OVC object and sabakan's machine read
//! from their spec files, Mizar's VPC written inline and its other objects from
//! their spec files; KusionStack's pod operation from its spec file.

#![allow(dead_code)]

pub use fsm::{ActionEnum, StateMachine};

/// An OpenvCloud virtual machine. strum's derives sit beside the table. Its names
/// on the wire need nothing more: `Display`, `FromStr` and (with the `serde`
/// feature) serde use the spec's names, `ADDING_DISK` for `AddingDisk`.
#[derive(
    StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash, strum::EnumIter, strum::IntoStaticStr,
)]
#[fsm(spec = "specs/ovc/vm.toml", markers)]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum VmState {
    Virtual,
    Deploying,
    Running,
    Pausing,
    Paused,
    Resuming,
    Stopping,
    Halted,
    Rebooting,
    Resetting,
    AddingDisk,
    AttachingDisk,
    DetachingDisk,
    Deleting,
    Deleted,
    Destroying,
    Destroyed,
}

/// An OpenvCloud cloudspace.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/cloudspace.toml")]
pub enum CloudspaceState {
    Virtual,
    Deploying,
    Deployed,
    Disabling,
    Disabled,
    Enabling,
    Deleting,
    Deleted,
    Destroying,
    Destroyed,
    Restoring,
    Pausing,
    Paused,
    Resuming,
    Resetting,
}

/// An OpenvCloud account.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/account.toml")]
pub enum AccountState {
    Confirmed,
    Disabling,
    Disabled,
    Enabling,
    Destroying,
    Destroyed,
    Deleting,
    Deleted,
}

/// An OpenvCloud disk.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/disk.toml")]
pub enum DiskState {
    Modeled,
    Creating,
    Created,
    Assigning,
    Assigned,
    Attaching,
    Detaching,
    Deleting,
    Deleted,
    /// The seed's `TOBEDELETED`, named here explicitly.
    #[fsm(name = "TOBEDELETED")]
    ToBeDeleted,
    Destroying,
    Destroyed,
}

/// An OpenvCloud image.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/image.toml")]
pub enum ImageState {
    Virtual,
    Creating,
    Created,
    Disabling,
    Disabled,
    Deleting,
    Deleted,
    Destroying,
    Destroyed,
}

/// An OpenvCloud physical node.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/ovc/node.toml")]
pub enum NodeState {
    Enabled,
    PuttingInMaintenance,
    Maintenance,
    Enabling,
    Decommissioning,
    Decommissioned,
}

/// A machine registered in sabakan.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/sabakan/machine.toml", actions = MachineAction, markers = machine_state)]
pub enum MachineState {
    Uninitialized,
    Healthy,
    Unhealthy,
    Unreachable,
    Updating,
    Retiring,
    Retired,
}

/// Mizar VPC object, with the table inline; it must equal `specs/mizar/vpc.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(name = "vpc", description = "Mizar VPC object", initial = Init, single_mutator)]
#[fsm(roles(vpc-operator = "The VPC Operator"))]
#[fsm(guards(
    dividers_provisioned = "The VPC's Divider has been provisioned by the Bouncer Operator",
    no_networks = "All of the VPC's children Networks have been deleted",
))]
#[fsm(action(provision, from = Init, to = Provisioned, roles = "vpc-operator", guards = dividers_provisioned))]
#[fsm(action(delete, from = Provisioned, via = Deleting, to = Deleted, roles = "vpc-operator", guards = no_networks))]
pub enum VpcState {
    /// Created by a user or by the VPC Operator (default VPC)
    #[fsm(owner = "vpc-operator")]
    Init,
    #[fsm(owner = "vpc-operator")]
    Provisioned,
    /// The Divider Operator is deleting the VPC's Dividers
    #[fsm(transition, persisted = false)]
    Deleting,
    /// Its Dividers deleted; the VPC Operator deletes it from the API server
    #[fsm(terminal, persisted = false, remove = "vpc-operator")]
    Deleted,
}

/// Mizar Divider object, from `specs/mizar/divider.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/mizar/divider.toml")]
pub enum DividerState {
    Init,
    Placed,
    Provisioned,
    DeleteRequested,
    Deprovisioned,
    Deleted,
}

/// Mizar Bouncer object, from `specs/mizar/bouncer.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/mizar/bouncer.toml")]
pub enum BouncerState {
    Init,
    Placed,
    EndpointReady,
    Provisioned,
    DeleteRequested,
    EndpointsRemoved,
    DividersRemoved,
    Deleted,
}

/// Mizar Network object, from `specs/mizar/network.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/mizar/network.toml")]
pub enum NetworkState {
    Init,
    Provisioned,
    Deleting,
    Deleted,
}

/// Mizar Endpoint object, from `specs/mizar/endpoint.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/mizar/endpoint.toml")]
pub enum EndpointState {
    Init,
    Allocated,
    Provisioned,
    DeleteRequested,
    Deallocated,
    Deleted,
}

/// Mizar Scaled Endpoint object (a service), from `specs/mizar/scaled_endpoint.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/mizar/scaled_endpoint.toml")]
pub enum ScaledEndpointState {
    Init,
    Provisioned,
    Deallocated,
    Detached,
    Deleted,
}

/// Mizar Droplet object, from `specs/mizar/droplet.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/mizar/droplet.toml")]
pub enum DropletState {
    Init,
    Provisioned,
}

/// One operation on a pod, from `specs/kusionstack/podopslifecycle.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "specs/kusionstack/podopslifecycle.toml")]
pub enum PodOpsState {
    Operating,
    PreCheck,
    PreChecked,
    Prepare,
    Operate,
    Operated,
    PostCheck,
    PostChecked,
    Complete,
    Available,
    Undone,
}
