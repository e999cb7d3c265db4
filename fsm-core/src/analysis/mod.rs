//! Analysis: resolving a [`MachineDef`] into a checked [`Machine`], and every finding
//! on the way.
//!
//! The checks are the single source of truth for what a valid machine is: `fsm check`
//! runs them on spec files and the derive macro runs them on its attributes.

mod check;
mod lint;
mod report;

pub use lint::{Lint, Severity};
pub use report::{Location, render, render_styled};

use crate::Machine;
use crate::spec::{MachineDef, Site};

/// One finding: what is wrong, where, and what would fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The kind of finding.
    pub lint: Lint,
    /// What is wrong, with the names involved.
    pub message: String,
    /// Where: the element of the definition at fault.
    pub site: Site,
    /// A short remark shown under the element at fault.
    pub label: Option<String>,
    /// Other places that explain the finding, each with its remark.
    pub related: Vec<(Site, String)>,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A finding of `lint` at `site`.
    pub fn new(lint: Lint, site: Site, message: impl Into<String>) -> Self {
        Diagnostic {
            lint,
            message: message.into(),
            site,
            label: None,
            related: Vec::new(),
            help: None,
        }
    }

    /// The severity of its lint.
    pub fn severity(&self) -> Severity {
        self.lint.severity()
    }

    /// True for an error.
    pub fn is_error(&self) -> bool {
        self.severity() == Severity::Error
    }

    /// Sets the remark under the element at fault.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Adds a related place.
    pub fn with_related(mut self, site: Site, label: impl Into<String>) -> Self {
        self.related.push((site, label.into()));
        self
    }

    /// Sets how to fix it.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// The result of checking a definition.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The machine, when the analysis found no error.
    pub machine: Option<Machine>,
    /// Every finding not allowed by the definition, in the order found.
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks a definition and, if it has no error, builds the machine.
///
/// Every finding is reported, not only the first. Warnings named in the definition's
/// `allow` list are dropped.
pub fn check(def: &MachineDef) -> Checked {
    check::Checker::new(def).run()
}
