//! Naming an action: by its id, by its name in the spec, or by a derived action
//! enum; and a state by its name.

use alloc::{borrow::ToOwned, string::String};

use crate::{ActionId, Machine};

/// An action named for a machine: an [`ActionId`], the action's name as the spec
/// spells it (ignoring ASCII case), or a derived action enum (`VmStateAction::Pause`).
pub trait ActionRef {
    /// The action's id in `machine`.
    fn resolve(&self, machine: &Machine) -> Result<ActionId, UnknownAction>;
}

/// A name that is not an action of the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAction {
    /// The machine.
    pub machine: String,
    /// The name asked for.
    pub name: String,
    /// The closest action name, if one is close.
    pub suggestion: Option<String>,
}

impl core::fmt::Display for UnknownAction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        unknown(
            f,
            "action",
            &self.machine,
            &self.name,
            self.suggestion.as_deref(),
        )
    }
}

impl core::error::Error for UnknownAction {}

/// A name that is not a state of the machine ([`Machine::resolve_state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownState {
    /// The machine.
    pub machine: String,
    /// The name asked for.
    pub name: String,
    /// The closest state name, if one is close.
    pub suggestion: Option<String>,
}

impl core::fmt::Display for UnknownState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        unknown(
            f,
            "state",
            &self.machine,
            &self.name,
            self.suggestion.as_deref(),
        )
    }
}

impl core::error::Error for UnknownState {}

/// "machine `vm` has no state `RUNING`; did you mean `RUNNING`?"
fn unknown(
    f: &mut core::fmt::Formatter<'_>,
    kind: &str,
    machine: &str,
    name: &str,
    suggestion: Option<&str>,
) -> core::fmt::Result {
    write!(f, "machine `{machine}` has no {kind} `{name}`")?;
    match suggestion {
        Some(s) => write!(f, "; did you mean `{s}`?"),
        None => Ok(()),
    }
}

impl<T: Copy + Into<ActionId>> ActionRef for T {
    fn resolve(&self, _: &Machine) -> Result<ActionId, UnknownAction> {
        Ok((*self).into())
    }
}

impl ActionRef for str {
    fn resolve(&self, machine: &Machine) -> Result<ActionId, UnknownAction> {
        machine.find_action(self).ok_or_else(|| UnknownAction {
            machine: machine.name().to_owned(),
            name: self.to_owned(),
            suggestion: machine.suggest_action(self).map(str::to_owned),
        })
    }
}

impl ActionRef for &str {
    fn resolve(&self, machine: &Machine) -> Result<ActionId, UnknownAction> {
        (**self).resolve(machine)
    }
}

impl ActionRef for String {
    fn resolve(&self, machine: &Machine) -> Result<ActionId, UnknownAction> {
        self.as_str().resolve(machine)
    }
}
