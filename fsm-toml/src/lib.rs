//! `fsm-toml`: the TOML spec format (documented in `specs/README.md`).
//!
//! [`parse`] reads spec text into a [`MachineDef`] and a [`SourceMap`] that says
//! where each [`Site`](fsm_model::Site) of the definition was written, so a finding
//! of the analysis can be shown at its line and column. Checking what the
//! definition means is the analysis' job (`fsm-analysis`); `fsm-core` drives both.
//!
//! ```
//! let parsed = fsm_toml::parse(r#"
//!     [machine]
//!     name = "door"
//!     initial = "CLOSED"
//!     [states]
//!     CLOSED = "Shut"
//!     OPEN = "Open"
//!     [actions]
//!     open = { from = "CLOSED", to = "OPEN" }
//!     close = { from = "OPEN", to = "CLOSED" }
//! "#).unwrap();
//! assert_eq!(parsed.def.states.len(), 2);
//! assert_eq!(parsed.def.actions[1].name, "close");
//!
//! let errors = fsm_toml::parse("[machine]\nname = 3\n").unwrap_err();
//! assert_eq!(errors[0].message, "`name` of [machine]: expected a string, found an integer");
//! ```

#[cfg(feature = "cel")]
mod cel;
mod help;
mod location;
mod read;

pub use help::help;
pub use location::{Location, SourceMap};

use fsm_model::{Diagnostic, MachineDef};

/// A spec file read into a definition.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The machine as written.
    pub def: MachineDef,
    /// Where each site of `def` is in the text.
    pub map: SourceMap,
    /// Findings of the format that leave the definition usable (such as `to` and
    /// `to_origin` both given: `to` is kept).
    pub diagnostics: Vec<Diagnostic>,
}

/// Reads TOML spec text into a definition and its source map.
///
/// Text that is not TOML gives one `syntax` finding; a document whose values have
/// the wrong shape (a missing or unknown setting, a number where a name is due)
/// gives a `schema` finding for each, all of them, each at the value at fault.
pub fn parse(text: &str) -> Result<Parsed, Vec<Diagnostic>> {
    read::read(text)
}

/// This crate's README (its page on crates.io): its examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
