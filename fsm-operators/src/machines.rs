//! The machines of the operators' objects, derived from the workspace's specs
//! (`specs/mizar/`, `specs/kusionstack/`).

use fsm::StateMachine;

/// Mizar VPC object, from `specs/mizar/vpc.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/mizar/vpc.toml")]
pub enum VpcState {
    /// Created by a user or by the VPC Operator (default VPC).
    Init,
    /// Provisioned; its state persisted to the API server.
    Provisioned,
    /// The Divider Operator is deleting the VPC's Dividers.
    Deleting,
    /// Its Dividers deleted; the VPC Operator deletes it from the API server.
    Deleted,
}

/// Mizar Divider object, from `specs/mizar/divider.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/mizar/divider.toml")]
pub enum DividerState {
    /// Created by the VPC Operator.
    Init,
    /// The Droplet Operator placed it on a droplet and told the Bouncer Operator.
    Placed,
    /// Bouncers updated with the Divider and the Divider with all Bouncers.
    Provisioned,
    /// The Divider Operator called back to the Bouncer Operator.
    DeleteRequested,
    /// Bouncer and Divider information removed from each other.
    Deprovisioned,
    /// Deprovisioned; the Divider Operator deletes it from the API server and its cache.
    Deleted,
}

/// Mizar Bouncer object, from `specs/mizar/bouncer.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/mizar/bouncer.toml")]
pub enum BouncerState {
    /// Created by the Network Operator.
    Init,
    /// Placed on a droplet; the Endpoint Operator was told.
    Placed,
    /// Updated with all Endpoints of the Network.
    EndpointReady,
    /// Updated with all Dividers of the VPC, and the Dividers with it.
    Provisioned,
    /// The Bouncer Operator called back to the Endpoint Operator.
    DeleteRequested,
    /// Bouncer and Endpoint information removed from each other.
    EndpointsRemoved,
    /// Bouncer and Divider information removed from each other.
    DividersRemoved,
    /// Deprovisioned; the Bouncer Operator deletes it from the API server and its cache.
    Deleted,
}

/// Mizar Network object, from `specs/mizar/network.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/mizar/network.toml")]
pub enum NetworkState {
    /// Created by a user or by the Network Operator (default network).
    Init,
    /// Provisioned; its state persisted to the API server.
    Provisioned,
    /// Dividers and Bouncers of the Network are being cleaned up and deleted.
    Deleting,
    /// Its Bouncers deleted; the Network Operator deletes it from the API server.
    Deleted,
}

/// Mizar Endpoint object, from `specs/mizar/endpoint.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/mizar/endpoint.toml")]
pub enum EndpointState {
    /// Created for a POD, or explicitly by a user.
    Init,
    /// IP, gateway and MAC allocated; the Bouncer Operator was told.
    Allocated,
    /// All Bouncers know the Endpoint; the CNI service wrote its information.
    Provisioned,
    /// The CNI service deleted the Endpoint object.
    DeleteRequested,
    /// The Network Operator released its IP, MAC, etc.
    Deallocated,
    /// Removed from all Bouncers; the Endpoint Operator deletes it from the API server and its cache.
    Deleted,
}

/// Mizar Scaled Endpoint object (a service), from `specs/mizar/scaled_endpoint.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/mizar/scaled_endpoint.toml")]
pub enum ScaledEndpointState {
    /// IP and MAC allocated for a new service.
    Init,
    /// Created; its backends and Bouncers are kept up to date.
    Provisioned,
    /// The Endpoint Operator released its IP, MAC, etc.
    Deallocated,
    /// Scaled Endpoint and Bouncer information removed from each other.
    Detached,
    /// Detached; the Endpoint Operator deletes it from the API server and its cache.
    Deleted,
}

/// Mizar Droplet object, from `specs/mizar/droplet.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/mizar/droplet.toml")]
pub enum DropletState {
    /// Created by the CNI service for each node.
    Init,
    /// Known to the Droplet Operator's state store.
    Provisioned,
}

/// One operation on a pod, from `specs/kusionstack/podopslifecycle.toml`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "../specs/kusionstack/podopslifecycle.toml")]
pub enum PodOpsState {
    /// `operating/<id>=<time>` and `operation-type/<id>=<type>` added by the operation controller.
    Operating,
    /// `pre-check/<id>` added: the transition rules of `<type>` are being evaluated.
    PreCheck,
    /// `pre-checked/<id>` and `operation-permission/<type>` added.
    PreChecked,
    /// `prepare/<id>` added, service-ready false: traffic is being turned off.
    Prepare,
    /// `operate/<id>` added: the operation controller may operate the pod.
    Operate,
    /// `operated/<id>` and `done-operation-type/<id>` added.
    Operated,
    /// `post-check/<id>` added: the transition rules of `<type>` are being evaluated again.
    PostCheck,
    /// `post-checked/<id>` added.
    PostChecked,
    /// `complete/<id>` added: traffic is being turned back on.
    Complete,
    /// The operation's labels are gone; service-available once no operation is left.
    Available,
    /// `undo-operation-type/<id>` added: the operation was cancelled and its labels removed.
    Undone,
}
