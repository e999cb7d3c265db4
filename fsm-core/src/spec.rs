//! Spec files: the pipeline from text to a checked [`Machine`] (read with the TOML
//! front end, checked by the analysis), and the definition types it goes through.
//!
//! ```
//! let vm = fsm_core::spec::load_str("vm.toml", r#"
//!     [machine]
//!     name = "vm"
//!     initial = "HALTED"
//!     [states]
//!     HALTED = "Stopped"
//!     STARTING = { transition = true }
//!     RUNNING = "Running"
//!     [actions]
//!     start = { from = "HALTED", via = "STARTING", to = "RUNNING" }
//!     stop = { from = "RUNNING", to = "HALTED" }
//! "#)?;
//! let halted = vm.find_state("halted").unwrap();
//! let running = vm.find_state("RUNNING").unwrap();
//! assert!(vm.validate_transition(halted, running).is_ok());
//!
//! // A spec with mistakes: every finding, with file, line and column.
//! let err = fsm_core::spec::load_str("bad.toml", "[machine]\nname = \"x\"\ninitial = \"A\"\n").unwrap_err();
//! assert!(err.to_string().starts_with("invalid spec bad.toml:3:11"), "{err}");
//! # Ok::<(), fsm_core::spec::SpecError>(())
//! ```

use std::path::{Path, PathBuf};

pub use fsm_model::{ActionDef, MachineDef, NamedDef, Site, StateDef, StateKind, TargetDef};
pub use fsm_toml::{Location, NotUtf8, Parsed, SourceMap, parse, utf8_text};

use crate::analysis;
use fsm_model::{Diagnostic, Machine};

/// Loads and checks a spec file.
pub fn load(path: impl AsRef<Path>) -> Result<Machine, SpecError> {
    SpecFile::read(path)?.check().into_machine()
}

/// Checks spec text held in memory; `path` is used only in messages.
pub fn load_str(path: impl Into<PathBuf>, text: impl Into<String>) -> Result<Machine, SpecError> {
    SpecFile::new(path, text).check().into_machine()
}

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
        let bytes = std::fs::read(path).map_err(|source| SpecError::Io {
            path: path.to_owned(),
            source,
        })?;
        let text = fsm_toml::utf8_text(bytes).map_err(|source| SpecError::NotUtf8 {
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

    /// Reads the spec with the TOML front end, checks it with the analysis, and
    /// collects every finding, in the order they appear in the file.
    ///
    /// A spec with values of the wrong shape (`schema` errors) builds no machine,
    /// and the rules of the table are not run on what could be read of it (they
    /// would report what is missing); but the names it uses are still checked
    /// ([`check_names`](crate::analysis::check_names)), against every kind of name
    /// whose section was read whole, so that one run reports both kinds of mistake.
    pub fn check(self) -> Checked {
        let read = fsm_toml::read(&self.text).check_names_with(analysis::check_names);
        let usable = read.is_usable();
        let mut diagnostics = read.diagnostics;
        let machine = if usable {
            let analysis = analysis::check(&read.def);
            diagnostics.extend(analysis.diagnostics);
            analysis
                .machine
                .filter(|_| !diagnostics.iter().any(Diagnostic::is_error))
        } else {
            None
        };
        let map = read.map;
        // In the order a reader meets them; findings with no place come last.
        diagnostics.sort_by_key(|d| map.span(&d.site).map_or(usize::MAX, |s| s.start));
        Checked {
            file: self,
            machine,
            diagnostics,
            map,
        }
    }
}

/// What checking a [`SpecFile`] found.
#[derive(Debug, Clone)]
pub struct Checked {
    file: SpecFile,
    map: SourceMap,
    /// The machine, when the spec has no error.
    pub machine: Option<Machine>,
    /// Every finding, in the order they appear in the file.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    /// The file checked.
    pub fn file(&self) -> &SpecFile {
        &self.file
    }

    /// Where a finding points in the file.
    pub fn location(&self, diagnostic: &Diagnostic) -> Option<Location> {
        self.locate(&diagnostic.site)
    }

    /// Where a site of the definition is in the file: for a finding's related
    /// places ([`Diagnostic::related`]).
    pub fn locate(&self, site: &Site) -> Option<Location> {
        self.map.locate(&self.file.text, site)
    }

    /// A finding's fix, said in the spec file's own syntax.
    pub fn help(&self, diagnostic: &Diagnostic) -> Option<String> {
        diagnostic.help.as_ref().map(fsm_toml::help)
    }

    /// True when a finding is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Every finding rendered as plain text with file, line, column and source.
    pub fn render(&self) -> String {
        analysis::render(&self.diagnostics, &self.source())
    }

    /// Like [`Checked::render`], with terminal colours.
    pub fn render_styled(&self) -> String {
        analysis::render_styled(&self.diagnostics, &self.source())
    }

    fn source(&self) -> analysis::Source<'_> {
        analysis::Source {
            path: self.file.path.display().to_string(),
            text: &self.file.text,
            map: &self.map,
        }
    }

    /// The machine, or an error carrying every finding if the spec has an error.
    pub fn into_machine(self) -> Result<Machine, SpecError> {
        if let Some(m) = self.machine {
            return Ok(m);
        }
        let first = self
            .diagnostics
            .iter()
            .find(|d| d.is_error())
            .and_then(|d| self.location(d));
        Err(SpecError::Invalid {
            line: first.as_ref().map_or(0, |l| l.line),
            column: first.as_ref().map_or(0, |l| l.column),
            rendered: self.render(),
            path: self.file.path,
            diagnostics: self.diagnostics,
        })
    }
}

/// A spec that could not be loaded.
#[derive(Debug)]
pub enum SpecError {
    /// The file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where its first byte that is not UTF-8 stands.
        source: fsm_toml::NotUtf8,
    },
    /// The spec has errors.
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

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecError::Io { path, source } => {
                write!(f, "cannot read spec {}: {source}", path.display())
            }
            SpecError::NotUtf8 { path, source } => write!(
                f,
                "cannot read spec {} (a spec is UTF-8 text)",
                source.in_file(path)
            ),
            SpecError::Invalid {
                path,
                line,
                column,
                rendered,
                ..
            } => write!(
                f,
                "invalid spec {}:{line}:{column}\n{rendered}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpecError::Io { source, .. } => Some(source),
            // Its place and byte are in the message, and in the variant's fields.
            SpecError::NotUtf8 { .. } | SpecError::Invalid { .. } => None,
        }
    }
}
