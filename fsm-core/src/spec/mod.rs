//! The spec model: a machine's definition as written ([`MachineDef`]), the checked
//! [`Machine`] built from it, and the TOML spec-file front end.

mod def;
mod machine;
mod toml;

use std::path::{Path, PathBuf};

pub use self::def::{ActionDef, MachineDef, NamedDef, Site, StateDef, StateKind, TargetDef};
pub use self::machine::{
    Action, ActionId, Guard, GuardId, Machine, Plan, PlanError, Role, State, StateId, Step, Target,
    Text, TransitionError,
};
pub use self::toml::{Parsed, SourceMap, parse};

#[doc(hidden)]
pub use self::machine::__private;

use crate::analysis::{self, Diagnostic, Location};

/// A spec file: its path (as given, for messages) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecFile {
    path: PathBuf,
    text: String,
}

impl SpecFile {
    /// A spec held in memory; `path` is used only in messages.
    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        SpecFile {
            path: path.into(),
            text: text.into(),
        }
    }

    /// Reads a spec file.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, SpecError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(SpecFile::new(path, text))
    }

    /// The path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Parses and checks the spec, collecting every finding.
    pub fn check(self) -> Report {
        match parse(&self.text) {
            Err(d) => Report {
                file: self,
                machine: None,
                diagnostics: vec![*d],
                map: SourceMap::default(),
            },
            Ok(Parsed {
                def,
                map,
                mut diagnostics,
            }) => {
                let checked = analysis::check(&def);
                diagnostics.extend(checked.diagnostics);
                let machine = if diagnostics.iter().any(Diagnostic::is_error) {
                    None
                } else {
                    checked.machine
                };
                Report {
                    file: self,
                    machine,
                    diagnostics,
                    map,
                }
            }
        }
    }
}

/// What checking a [`SpecFile`] found.
#[derive(Debug, Clone)]
pub struct Report {
    file: SpecFile,
    map: SourceMap,
    /// The machine, when the spec has no error.
    pub machine: Option<Machine>,
    /// Every finding, in the order found.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// The file checked.
    pub fn file(&self) -> &SpecFile {
        &self.file
    }

    /// Where a finding points in the file.
    pub fn location(&self, diagnostic: &Diagnostic) -> Option<Location> {
        self.map
            .span(&diagnostic.site)
            .map(|span| Location::of(&self.file.text, span))
    }

    /// True when a finding is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Every finding rendered as plain text with file, line, column and source.
    pub fn render(&self) -> String {
        analysis::render(
            &self.diagnostics,
            &self.file.path.display().to_string(),
            &self.file.text,
            &self.map,
        )
    }

    /// Like [`Report::render`], with terminal colours.
    pub fn render_styled(&self) -> String {
        analysis::render_styled(
            &self.diagnostics,
            &self.file.path.display().to_string(),
            &self.file.text,
            &self.map,
        )
    }

    /// The machine, or an error carrying every finding if the spec has an error.
    pub fn into_machine(self) -> Result<Machine, SpecError> {
        match self.machine {
            Some(m) => Ok(m),
            None => {
                let first = self
                    .diagnostics
                    .iter()
                    .find(|d| d.is_error())
                    .and_then(|d| self.location(d));
                Err(SpecError::Invalid {
                    path: self.file.path.clone(),
                    line: first.as_ref().map_or(0, |l| l.line),
                    column: first.as_ref().map_or(0, |l| l.column),
                    rendered: self.render(),
                    diagnostics: self.diagnostics,
                })
            }
        }
    }
}

/// A spec that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read spec {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The spec has errors.
    #[error("invalid spec {}:{line}:{column}\n{rendered}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Line of the first error.
        line: usize,
        /// Column of the first error.
        column: usize,
        /// Every finding.
        diagnostics: Vec<Diagnostic>,
        /// Every finding rendered with its source line.
        rendered: String,
    },
}

impl Machine {
    /// Loads and checks a spec file.
    pub fn from_spec_file(path: impl AsRef<Path>) -> Result<Machine, SpecError> {
        SpecFile::read(path)?.check().into_machine()
    }

    /// Checks spec text held in memory; `path` is used only in messages.
    ///
    /// ```
    /// let vm = fsm_core::Machine::from_toml("vm.toml", r#"
    ///     [machine]
    ///     name = "vm"
    ///     initial = "HALTED"
    ///     [states]
    ///     HALTED = "Stopped"
    ///     STARTING = { transition = true }
    ///     RUNNING = "Running"
    ///     [actions]
    ///     start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
    ///     stop = { from = "RUNNING", to = "HALTED" }
    /// "#).unwrap();
    /// let halted = vm.find_state("halted").unwrap();
    /// let running = vm.find_state("RUNNING").unwrap();
    /// assert!(vm.validate_transition(halted, running).is_ok());
    /// ```
    pub fn from_toml(
        path: impl Into<PathBuf>,
        text: impl Into<String>,
    ) -> Result<Machine, SpecError> {
        SpecFile::new(path, text).check().into_machine()
    }
}
