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
pub use location::{Location, NotUtf8, SourceMap, utf8_text};

use fsm_model::{Diagnostic, Lint, MachineDef};

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
/// [`read`] gives what such a document still says.
pub fn parse(text: &str) -> Result<Parsed, Vec<Diagnostic>> {
    let read = read(text);
    if read.is_usable() {
        return Ok(Parsed {
            def: read.def,
            map: read.map,
            diagnostics: read.diagnostics,
        });
    }
    Err(read.diagnostics.into_iter().filter(unreadable).collect())
}

/// Reads TOML spec text as far as its values' shapes allow: the definition and
/// its source map even when [`parse`] refuses the document, so that a checker can
/// report what the names of a spec get wrong beside the values that have the wrong
/// shape, and its user fixes both at once.
///
/// A value of the wrong shape is left out of the definition; the state, action,
/// role or guard it belongs to is kept, by name. A section that is not a table
/// declares none of its names ([`Declared`]).
///
/// ```
/// let read = fsm_toml::read(r#"
///     [machine]
///     name = "door"
///     initial = "CLOSED"
///     [states]
///     CLOSED = { description = 5 }
///     OPEN = "Open"
///     [actions]
///     open = { from = "CLOSED", to = "OPEN" }
/// "#);
/// assert!(!read.is_usable());
/// assert_eq!(read.diagnostics[0].message, "`description` of state `CLOSED`: expected a string, found an integer");
/// // The state whose description is wrong is still a state of the definition.
/// assert_eq!(read.def.states[0].name, "CLOSED");
/// assert!(read.declared.states && !read.declared.roles);
/// ```
pub fn read(text: &str) -> Read {
    read::read(text)
}

/// A spec read as far as its values' shapes allow: see [`read`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Read {
    /// The machine as written, less the values of the wrong shape.
    pub def: MachineDef,
    /// Where each site of `def` is in the text.
    pub map: SourceMap,
    /// Every finding of the format: the `syntax` and `schema` errors, then the
    /// findings that leave the definition usable.
    pub diagnostics: Vec<Diagnostic>,
    /// Which kinds of names `def` declares in full.
    pub declared: Declared,
}

impl Read {
    /// Whether the definition is the whole spec: no `syntax` or `schema` error
    /// (what [`parse`] accepts).
    pub fn is_usable(&self) -> bool {
        !self.diagnostics.iter().any(unreadable)
    }

    /// For a spec that is not usable, adds to its findings those of `check`, the
    /// analysis' name check (`fsm_analysis::check_names`) run on what was read,
    /// each kind of name only where it is declared in full ([`Declared::admits`]):
    /// both kinds of mistake, reported in one run. A usable spec is left as it
    /// is, for the whole analysis to check.
    ///
    /// ```
    /// use fsm_model::{Diagnostic, Lint, Site};
    ///
    /// // `[states]` is read, `[roles]` is missing; `description = 5` is wrong.
    /// let read = fsm_toml::read(r#"
    ///     [machine]
    ///     name = "door"
    ///     initial = "CLOSED"
    ///     [states]
    ///     CLOSED = { description = 5 }
    /// "#);
    /// // A name check that finds an unknown state and an unknown role.
    /// let read = read.check_names_with(|_| vec![
    ///     Diagnostic::new(Lint::UnknownState, Site::Initial, "unknown state `CLOSD`"),
    ///     Diagnostic::new(Lint::UnknownRole, Site::Machine, "unknown role `admin`"),
    /// ]);
    /// let lints: Vec<_> = read.diagnostics.iter().map(|d| d.lint).collect();
    /// // The role's finding is left out: `[roles]` may be what declares it.
    /// assert_eq!(lints, [Lint::Schema, Lint::UnknownState]);
    /// ```
    pub fn check_names_with(mut self, check: impl FnOnce(&MachineDef) -> Vec<Diagnostic>) -> Self {
        if !self.is_usable() {
            let declared = self.declared;
            let names = check(&self.def).into_iter();
            self.diagnostics
                .extend(names.filter(|d| declared.admits(d)));
        }
        self
    }
}

/// Which kinds of names a [`Read`] definition declares in full: those whose
/// section was read as a table. A name used and not declared is a mistake of the
/// spec only where its kind is declared in full: with `[roles]` missing or not a
/// table, a role an action names may be one the section meant to declare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Declared {
    /// `[states]` was read.
    pub states: bool,
    /// `[roles]` was read.
    pub roles: bool,
    /// `[guards]` was read.
    pub guards: bool,
}

impl Declared {
    /// Whether a name check's finding on a [`Read`] definition is a mistake of
    /// the spec: an unknown state, role or guard only where its kind is declared
    /// in full; every other finding (a name declared twice) always.
    pub fn admits(&self, finding: &Diagnostic) -> bool {
        match finding.lint {
            Lint::UnknownState => self.states,
            Lint::UnknownRole => self.roles,
            Lint::UnknownGuard => self.guards,
            _ => true,
        }
    }
}

/// A finding that leaves the definition unusable: the text is not TOML, or a
/// value has the wrong shape.
fn unreadable(d: &Diagnostic) -> bool {
    matches!(d.lint, Lint::Syntax | Lint::Schema)
}

/// This crate's README (its page on crates.io): its examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
