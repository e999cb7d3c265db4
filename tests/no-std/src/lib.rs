//! A `#![no_std]` crate that derives a machine and uses what a derive gives
//! without the standard library: the `const` table, moves checked by the type
//! system (markers), names on the wire both ways (and by serde), refusals with
//! their reasons, and the checked machine, decoded on first use (`alloc`).
//! `tests/layers.rs` checks this crate alone, where nothing turns the facade's
//! `std` feature on, so that `fsm`, `fsm-core` and `fsm-model` are `no_std`
//! too; its tests run with the test harness's `std`.

#![no_std]

extern crate alloc;

use alloc::string::String;
use core::fmt::Write;

use fsm::StateMachine;

/// A door with a lock, on a device with no operating system.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Closed, markers)]
#[fsm(roles(keyholder = "Whoever holds the key"))]
#[fsm(action(open, from = Closed, to = Open))]
#[fsm(action(close, from = Open, to = Closed))]
#[fsm(action(lock, from = Closed, via = Locking, to = Locked, roles = keyholder))]
#[fsm(action(unlock, from = Locked, to = Closed, roles = keyholder))]
pub enum Door {
    /// Shut, not locked.
    Closed,
    /// Open.
    Open,
    /// The bolt moving.
    #[fsm(transition)]
    Locking,
    /// Shut and locked.
    Locked,
}

// Names on the wire, by serde without its `std`.
const _: fn() = || {
    fn on_the_wire<T: serde::Serialize + for<'de> serde::Deserialize<'de>>() {}
    on_the_wire::<Door>();
    on_the_wire::<DoorAction>();
};

/// Locking, a move the type system checked.
pub const LOCKING: (Door, Door) = fsm::typed::checked_move::<door::Closed, door::Locking>();

// The table, asked at compile time.
const _: () = assert!(Door::can_transition(Door::Closed, Door::Locking));
const _: () = assert!(!Door::can_transition(Door::Open, Door::Locked));

/// Whether `from → to` is one move of the table, by the states' names, and
/// why not when it is not.
pub fn check(from: &str, to: &str) -> Result<(), String> {
    let from: Door = from.parse().map_err(|e| display(&e))?;
    let to: Door = to.parse().map_err(|e| display(&e))?;
    Door::validate_transition(from, to).map_err(|e| display(&e))
}

/// The roles that may start `action`, from the checked machine.
pub fn roles_of(action: &str) -> Option<String> {
    let action: DoorAction = action.parse().ok()?;
    let machine = Door::machine();
    let mut roles = String::new();
    for role in machine.action(action.id()).roles.iter() {
        if !roles.is_empty() {
            roles.push_str(", ");
        }
        roles.push_str(role);
    }
    Some(roles)
}

fn display(value: &impl core::fmt::Display) -> String {
    let mut text = String::new();
    write!(text, "{value}").expect("writing to a String");
    text
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    #[test]
    fn a_derived_machine_works_without_std() {
        assert_eq!(LOCKING, (Door::Closed, Door::Locking));
        assert_eq!(check("Closed", "Locking"), Ok(()));
        let refused = check("Open", "Locked").unwrap_err();
        assert!(
            refused.contains("Open") && refused.contains("Locked"),
            "{refused}"
        );
        let unknown = check("Ajar", "Open").unwrap_err();
        assert!(unknown.contains("Ajar"), "{unknown}");
        assert_eq!(roles_of("lock").as_deref(), Some("keyholder"));
        assert_eq!(roles_of("open").as_deref(), Some(""));
        assert_eq!(roles_of("kick"), None);
    }

    #[test]
    fn names_go_on_the_wire_by_serde() {
        assert_eq!(
            serde_json::to_string(&Door::Locking).unwrap(),
            r#""Locking""#
        );
        assert_eq!(
            serde_json::from_str::<DoorAction>(r#""unlock""#).unwrap(),
            DoorAction::Unlock
        );
        let unknown = serde_json::from_str::<Door>(r#""Ajar""#).unwrap_err();
        assert!(unknown.to_string().contains("Ajar"), "{unknown}");
    }
}
