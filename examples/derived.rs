//! The derived seed machines in use: validating moves, planning actions, checking a
//! move at compile time, and drawing a diagram.
//!
//! `cargo run --example derived`

mod machines;

use fsm::typed::checked_move;
use fsm::{ActionEnum, StateMachine};
use machines::{
    DiskState, DiskStateAction, MachineAction, MachineState, VmState, VmStateAction, VpcState,
};

fn main() {
    // OVC: a user asks to pause a running VM; the API first checks the move.
    let vm = VmState::Running;
    match VmState::validate_transition(vm, VmState::Pausing) {
        Ok(()) => println!("vm: {} -> {} allowed", vm.name(), VmState::Pausing.name()),
        Err(e) => println!("vm: refused: {e}"),
    }
    // While DEPLOYING, nothing but the end of `deploy` is allowed.
    if let Err(e) = VmState::validate_transition(VmState::Deploying, VmState::Halted) {
        println!("vm: refused: {e}");
    }
    let plan = VmStateAction::AddDisk
        .plan(VmState::Paused)
        .expect("add_disk starts from PAUSED");
    println!(
        "vm: add_disk from PAUSED shows {:?} and returns to {:?}",
        plan.via, plan.target
    );
    // Names on the wire are the spec's (and serde's too, with the `serde` feature).
    let parsed: VmState = "ADDING_DISK".parse().expect("a state of vm");
    println!("vm: {:?} is written {parsed}", VmState::AddingDisk);

    // A move the type system checks: this line would not compile for HALTED -> PAUSED.
    let (from, to) = checked_move::<vm_state::Running, vm_state::Pausing>();
    println!("vm: typed move {} -> {}", from.name(), to.name());

    // Disk DELETING leads to DELETED or TOBEDELETED, depending on where it started.
    for origin in [DiskState::Created, DiskState::Assigned] {
        let plan = DiskStateAction::Delete
            .plan(origin)
            .expect("delete starts here");
        println!(
            "disk: delete from {} ends in {}",
            origin.name(),
            plan.target.name()
        );
    }

    // sabakan: who may retire a machine, and what must hold first.
    let retire = MachineAction::CompleteRetirement;
    println!(
        "sabakan: {} from {:?} needs roles {:?} and guards {:?}",
        retire.name(),
        retire.origins(),
        retire.roles(),
        retire.guards()
    );
    println!(
        "sabakan: actions while Retired: {:?}",
        MachineState::Retired.actions_from()
    );

    // Mizar: the VPC table, drawn.
    println!("vpc diagram:\n{}", VpcState::mermaid());
}

/// The marker module of `VmState`, re-exported here for the typed move above.
use machines::vm_state;
