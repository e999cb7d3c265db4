//! The OVC VM table written three other ways, for `benches/validate.rs`: a
//! hand-written `match`, and the same machine in rust-fsm's and smlang's DSLs. The
//! bench checks at start that all of them agree with the derived enum on every pair.
//!
//! rust-fsm and smlang describe event-driven machines, with no notion of a transition
//! state or of an action that spans two moves. So each action becomes three kinds of
//! event: its start (`Pause`), its finish (`PauseDone`; a back-to-origin action needs
//! one per origin, `AddDiskDoneToPaused`) and the whole action (`PauseWhole`), and
//! "is FROM -> TO allowed" is "does some event lead there", as a user of those crates
//! would ask it.

#![allow(clippy::match_like_matches_macro)]

use crate::machines::VmState;

/// The table as a person would write it: one arm per action, start, finish and whole.
pub fn hand_written(from: VmState, to: VmState) -> bool {
    use VmState::*;
    match (from, to) {
        // deploy
        (Virtual, Deploying) | (Deploying, Running) | (Virtual, Running) => true,
        // pause
        (Running, Pausing) | (Pausing, Paused) | (Running, Paused) => true,
        // resume
        (Paused, Resuming) | (Resuming, Running) | (Paused, Running) => true,
        // stop
        (Running, Stopping)
        | (Stopping, Halted)
        | (Running, Halted)
        | (Paused, Stopping)
        | (Paused, Halted) => true,
        // delete
        (Running, Deleting)
        | (Deleting, Deleted)
        | (Running, Deleted)
        | (Paused, Deleting)
        | (Paused, Deleted)
        | (Halted, Deleting)
        | (Halted, Deleted) => true,
        // destroy
        (Running, Destroying)
        | (Destroying, Destroyed)
        | (Running, Destroyed)
        | (Paused, Destroying)
        | (Paused, Destroyed)
        | (Halted, Destroying)
        | (Halted, Destroyed) => true,
        // reboot
        (Running, Rebooting) | (Rebooting, Running) | (Running, Running) | (Paused, Rebooting) => {
            true
        }
        // reset
        (Running, Resetting) | (Resetting, Running) => true,
        // add_disk
        (Running, AddingDisk)
        | (AddingDisk, Running)
        | (Paused, AddingDisk)
        | (AddingDisk, Paused)
        | (Paused, Paused)
        | (Halted, AddingDisk)
        | (AddingDisk, Halted)
        | (Halted, Halted) => true,
        // attach_disk
        (Running, AttachingDisk)
        | (AttachingDisk, Running)
        | (Paused, AttachingDisk)
        | (AttachingDisk, Paused)
        | (Halted, AttachingDisk)
        | (AttachingDisk, Halted) => true,
        // detach_disk
        (Running, DetachingDisk)
        | (DetachingDisk, Running)
        | (Paused, DetachingDisk)
        | (DetachingDisk, Paused)
        | (Halted, DetachingDisk)
        | (DetachingDisk, Halted) => true,
        _ => false,
    }
}

/// The VM in rust-fsm.
pub mod with_rust_fsm {
    use rust_fsm::*;

    state_machine! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub vm(Virtual)
        Virtual => { Deploy => Deploying, DeployWhole => Running },
        Deploying => { DeployDone => Running },
        Running => { Pause => Pausing, PauseWhole => Paused, Stop => Stopping, StopWhole => Halted, Delete => Deleting, DeleteWhole => Deleted, Destroy => Destroying, DestroyWhole => Destroyed, Reboot => Rebooting, RebootWhole => Running, Reset => Resetting, ResetWhole => Running, AddDisk => AddingDisk, AddDiskWhole => Running, AttachDisk => AttachingDisk, AttachDiskWhole => Running, DetachDisk => DetachingDisk, DetachDiskWhole => Running },
        Pausing => { PauseDone => Paused },
        Paused => { Resume => Resuming, ResumeWhole => Running, Stop => Stopping, StopWhole => Halted, Delete => Deleting, DeleteWhole => Deleted, Destroy => Destroying, DestroyWhole => Destroyed, Reboot => Rebooting, RebootWhole => Running, AddDisk => AddingDisk, AddDiskWhole => Paused, AttachDisk => AttachingDisk, AttachDiskWhole => Paused, DetachDisk => DetachingDisk, DetachDiskWhole => Paused },
        Resuming => { ResumeDone => Running },
        Stopping => { StopDone => Halted },
        Deleting => { DeleteDone => Deleted },
        Halted => { Delete => Deleting, DeleteWhole => Deleted, Destroy => Destroying, DestroyWhole => Destroyed, AddDisk => AddingDisk, AddDiskWhole => Halted, AttachDisk => AttachingDisk, AttachDiskWhole => Halted, DetachDisk => DetachingDisk, DetachDiskWhole => Halted },
        Destroying => { DestroyDone => Destroyed },
        Rebooting => { RebootDone => Running },
        Resetting => { ResetDone => Running },
        AddingDisk => { AddDiskDoneToRunning => Running, AddDiskDoneToPaused => Paused, AddDiskDoneToHalted => Halted },
        AttachingDisk => { AttachDiskDoneToRunning => Running, AttachDiskDoneToPaused => Paused, AttachDiskDoneToHalted => Halted },
        DetachingDisk => { DetachDiskDoneToRunning => Running, DetachDiskDoneToPaused => Paused, DetachDiskDoneToHalted => Halted }
    }

    /// Every input of the machine.
    pub const INPUTS: [vm::Input; 39] = [
        vm::Input::Deploy,
        vm::Input::DeployDone,
        vm::Input::DeployWhole,
        vm::Input::Pause,
        vm::Input::PauseDone,
        vm::Input::PauseWhole,
        vm::Input::Resume,
        vm::Input::ResumeDone,
        vm::Input::ResumeWhole,
        vm::Input::Stop,
        vm::Input::StopDone,
        vm::Input::StopWhole,
        vm::Input::Delete,
        vm::Input::DeleteDone,
        vm::Input::DeleteWhole,
        vm::Input::Destroy,
        vm::Input::DestroyDone,
        vm::Input::DestroyWhole,
        vm::Input::Reboot,
        vm::Input::RebootDone,
        vm::Input::RebootWhole,
        vm::Input::Reset,
        vm::Input::ResetDone,
        vm::Input::ResetWhole,
        vm::Input::AddDisk,
        vm::Input::AddDiskDoneToRunning,
        vm::Input::AddDiskWhole,
        vm::Input::AddDiskDoneToPaused,
        vm::Input::AddDiskDoneToHalted,
        vm::Input::AttachDisk,
        vm::Input::AttachDiskDoneToRunning,
        vm::Input::AttachDiskWhole,
        vm::Input::AttachDiskDoneToPaused,
        vm::Input::AttachDiskDoneToHalted,
        vm::Input::DetachDisk,
        vm::Input::DetachDiskDoneToRunning,
        vm::Input::DetachDiskWhole,
        vm::Input::DetachDiskDoneToPaused,
        vm::Input::DetachDiskDoneToHalted,
    ];
}

/// The VM in smlang.
pub mod with_smlang {
    use smlang::statemachine;

    statemachine! {
        derive_states: [Debug, Clone, Copy],
        derive_events: [Debug, Clone, Copy],
        transitions: {
            *Virtual + Deploy = Deploying,
            Deploying + DeployDone = Running,
            Virtual + DeployWhole = Running,
            Running + Pause = Pausing,
            Pausing + PauseDone = Paused,
            Running + PauseWhole = Paused,
            Paused + Resume = Resuming,
            Resuming + ResumeDone = Running,
            Paused + ResumeWhole = Running,
            Running + Stop = Stopping,
            Stopping + StopDone = Halted,
            Running + StopWhole = Halted,
            Paused + Stop = Stopping,
            Paused + StopWhole = Halted,
            Running + Delete = Deleting,
            Deleting + DeleteDone = Deleted,
            Running + DeleteWhole = Deleted,
            Paused + Delete = Deleting,
            Paused + DeleteWhole = Deleted,
            Halted + Delete = Deleting,
            Halted + DeleteWhole = Deleted,
            Running + Destroy = Destroying,
            Destroying + DestroyDone = Destroyed,
            Running + DestroyWhole = Destroyed,
            Paused + Destroy = Destroying,
            Paused + DestroyWhole = Destroyed,
            Halted + Destroy = Destroying,
            Halted + DestroyWhole = Destroyed,
            Running + Reboot = Rebooting,
            Rebooting + RebootDone = Running,
            Running + RebootWhole = Running,
            Paused + Reboot = Rebooting,
            Paused + RebootWhole = Running,
            Running + Reset = Resetting,
            Resetting + ResetDone = Running,
            Running + ResetWhole = Running,
            Running + AddDisk = AddingDisk,
            AddingDisk + AddDiskDoneToRunning = Running,
            Running + AddDiskWhole = Running,
            Paused + AddDisk = AddingDisk,
            AddingDisk + AddDiskDoneToPaused = Paused,
            Paused + AddDiskWhole = Paused,
            Halted + AddDisk = AddingDisk,
            AddingDisk + AddDiskDoneToHalted = Halted,
            Halted + AddDiskWhole = Halted,
            Running + AttachDisk = AttachingDisk,
            AttachingDisk + AttachDiskDoneToRunning = Running,
            Running + AttachDiskWhole = Running,
            Paused + AttachDisk = AttachingDisk,
            AttachingDisk + AttachDiskDoneToPaused = Paused,
            Paused + AttachDiskWhole = Paused,
            Halted + AttachDisk = AttachingDisk,
            AttachingDisk + AttachDiskDoneToHalted = Halted,
            Halted + AttachDiskWhole = Halted,
            Running + DetachDisk = DetachingDisk,
            DetachingDisk + DetachDiskDoneToRunning = Running,
            Running + DetachDiskWhole = Running,
            Paused + DetachDisk = DetachingDisk,
            DetachingDisk + DetachDiskDoneToPaused = Paused,
            Paused + DetachDiskWhole = Paused,
            Halted + DetachDisk = DetachingDisk,
            DetachingDisk + DetachDiskDoneToHalted = Halted,
            Halted + DetachDiskWhole = Halted,
        }
    }

    /// smlang requires a context type.
    pub struct Context;

    impl StateMachineContext for Context {}

    /// Every event of the machine.
    pub const EVENTS: [Events; 39] = [
        Events::Deploy,
        Events::DeployDone,
        Events::DeployWhole,
        Events::Pause,
        Events::PauseDone,
        Events::PauseWhole,
        Events::Resume,
        Events::ResumeDone,
        Events::ResumeWhole,
        Events::Stop,
        Events::StopDone,
        Events::StopWhole,
        Events::Delete,
        Events::DeleteDone,
        Events::DeleteWhole,
        Events::Destroy,
        Events::DestroyDone,
        Events::DestroyWhole,
        Events::Reboot,
        Events::RebootDone,
        Events::RebootWhole,
        Events::Reset,
        Events::ResetDone,
        Events::ResetWhole,
        Events::AddDisk,
        Events::AddDiskDoneToRunning,
        Events::AddDiskWhole,
        Events::AddDiskDoneToPaused,
        Events::AddDiskDoneToHalted,
        Events::AttachDisk,
        Events::AttachDiskDoneToRunning,
        Events::AttachDiskWhole,
        Events::AttachDiskDoneToPaused,
        Events::AttachDiskDoneToHalted,
        Events::DetachDisk,
        Events::DetachDiskDoneToRunning,
        Events::DetachDiskWhole,
        Events::DetachDiskDoneToPaused,
        Events::DetachDiskDoneToHalted,
    ];
}
