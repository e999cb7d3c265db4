//! Findings as data: what is wrong ([`Lint`]), where ([`Site`]), and how to fix it
//! ([`Help`]). The analysis and the front ends produce them; each front end renders
//! them in its own syntax (a TOML spec file, `#[fsm(...)]` attributes), which is why
//! a fix is a [`Help`] value and not a sentence.

use alloc::{string::String, vec::Vec};
use core::fmt;

use crate::Site;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Probably unintended, but the machine still works; can be allowed per machine.
    Warning,
    /// The machine is wrong or incomplete; no [`crate::Machine`] is built.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

macro_rules! lints {
    ($($(#[doc = $doc:literal])* $variant:ident = ($code:literal, $severity:ident),)*) => {
        /// A kind of finding. Its [`Lint::code`] is stable and is what a spec's `allow`
        /// list names. New lints come with new checks, so a `match` on it needs
        /// a wildcard arm.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Lint {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Lint {
            /// Every lint, in the order of this list.
            pub const ALL: &'static [Lint] = &[$(Lint::$variant,)*];

            /// The lint's stable name, such as `unknown-state`.
            pub const fn code(self) -> &'static str {
                match self {
                    $(Lint::$variant => $code,)*
                }
            }

            /// Whether the lint is an error or a warning.
            pub const fn severity(self) -> Severity {
                match self {
                    $(Lint::$variant => Severity::$severity,)*
                }
            }
        }
    };
}

lints! {
    /// The text does not parse (not valid TOML, an attribute that is not a list of
    /// items).
    Syntax = ("syntax", Error),
    /// A value has the wrong type, a setting is missing or unknown.
    Schema = ("schema", Error),
    /// A guard's CEL expression does not parse, or names a variable a guard
    /// does not see.
    Cel = ("cel", Error),
    /// An action gives both `to` and `to_origin`.
    ConflictingTarget = ("conflicting-target", Error),
    /// A state is referred to that the spec does not declare.
    UnknownState = ("unknown-state", Error),
    /// A role is referred to that the spec does not declare.
    UnknownRole = ("unknown-role", Error),
    /// A guard is referred to that the spec does not describe.
    UnknownGuard = ("unknown-guard", Error),
    /// A guard is declared without a description.
    UndescribedGuard = ("undescribed-guard", Error),
    /// An `allow` entry names no warning lint.
    UnknownLint = ("unknown-lint", Error),
    /// A name that is empty or holds a control character; or the machine's, a
    /// state's or an action's name (or an earlier one) holding whitespace:
    /// those travel in URLs, store keys, diagrams and other tools' formats,
    /// where such a name is lost or splits in two; or a machine's name holding
    /// a `/` (one segment of URLs and of store keys).
    BadName = ("bad-name", Error),
    /// Two states have the same name, ignoring case.
    DuplicateState = ("duplicate-state", Error),
    /// Two actions have the same name, ignoring case.
    DuplicateAction = ("duplicate-action", Error),
    /// An action lists the same origin twice.
    DuplicateOrigin = ("duplicate-origin", Error),
    /// The machine names no initial state.
    MissingInitial = ("missing-initial", Error),
    /// The initial state is a transition state.
    TransitionInitial = ("transition-initial", Error),
    /// An action has no origin.
    NoOrigin = ("no-origin", Error),
    /// An action starts from a transition state (another action is running there).
    TransitionOrigin = ("transition-origin", Error),
    /// An action's `via` names a static state.
    StaticVia = ("static-via", Error),
    /// An action ends in a transition state.
    TransitionTarget = ("transition-target", Error),
    /// An action passes through a transition state but names no target.
    MissingTarget = ("missing-target", Error),
    /// A per-origin target does not match the action's origins.
    PerOriginMismatch = ("per-origin-mismatch", Error),
    /// A transition state that no action passes through.
    OrphanTransition = ("orphan-transition", Error),
    /// A non-terminal state with no way out.
    DeadEnd = ("dead-end", Error),
    /// An action leaves a terminal state.
    TerminalExit = ("terminal-exit", Error),
    /// A transition state is marked terminal.
    TerminalTransition = ("terminal-transition", Error),
    /// A hidden action changes the state.
    HiddenMove = ("hidden-move", Error),
    /// Under `single_mutator`, more than one actor may move an object out of a state.
    OwnerConflict = ("owner-conflict", Error),
    /// Under `single_mutator`, nobody is named to move an object out of a state.
    UnownedState = ("unowned-state", Error),
    /// A state or action claims an earlier name that is a current name, or that
    /// another one claims too: stored objects could not be read unambiguously.
    RenameConflict = ("rename-conflict", Error),
    /// A deadline on a static state, where no action runs.
    StaticDeadline = ("static-deadline", Error),
    /// A transition state allows removal: an object there is held by its
    /// action, and a held object is never removed.
    TransitionRemove = ("transition-remove", Error),
    /// A state's `remove` names roles, but not its owner's: only the owner
    /// may remove an object in an owned state, so no one ever could.
    RemoveOwner = ("remove-owner", Error),
    /// No path from the initial state reaches this state.
    Unreachable = ("unreachable", Warning),
    /// A declared guard that no action uses.
    UnusedGuard = ("unused-guard", Warning),
    /// A declared role that no action or state uses.
    UnusedRole = ("unused-role", Warning),
    /// Actions with different targets share one transition state, so the state alone
    /// does not tell where the object is heading.
    SharedTransition = ("shared-transition", Warning),
}

impl Lint {
    /// True for a finding about the machine as a whole (reachability, dead ends,
    /// ownership, what is unused), which a part missing from the definition can
    /// cause on its own. A front end that could not read part of a definition
    /// leaves these out, so that one mistake gives one finding.
    pub fn is_global(self) -> bool {
        matches!(
            self,
            Lint::MissingInitial
                | Lint::Unreachable
                | Lint::DeadEnd
                | Lint::OrphanTransition
                | Lint::OwnerConflict
                | Lint::UnownedState
                | Lint::UnusedGuard
                | Lint::UnusedRole
                | Lint::SharedTransition
        )
    }

    /// The lint with this stable name.
    pub fn from_code(code: &str) -> Option<Lint> {
        Lint::ALL.iter().copied().find(|l| l.code() == code)
    }
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

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
    /// How to fix it, as data: each front end says it in its own syntax.
    pub help: Option<Help>,
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
    pub fn with_help(mut self, help: Help) -> Self {
        self.help = Some(help);
        self
    }
}

/// How to fix a finding. Most fixes name a setting, and a setting is spelled
/// differently in each front end (`[roles]` in a spec file, `#[fsm(roles(...))]` on
/// an enum), so the fix is data; [`Help::Text`] is for advice that names no setting.
///
/// Not `non_exhaustive` on purpose: a new kind of fix must be said by every front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Help {
    /// A name close to the one written: probably a typo.
    DidYouMean(String),
    /// Name the machine's initial state.
    NameInitial,
    /// Declare this role.
    DeclareRole(String),
    /// Declare this guard, saying what it checks.
    DeclareGuard(String),
    /// Say what this guard checks.
    DescribeGuard(String),
    /// List the states the action may start from.
    AddOrigin,
    /// Give the action a target, or send it back to where it started.
    AddTarget,
    /// Mark this state as a transition state, or make it the target instead of `via`.
    MarkTransition(String),
    /// Name this transition state in an action's `via`, or make it static.
    UseOrMakeStatic(String),
    /// Add an action leaving this state, or mark it terminal.
    LeaveOrTerminal,
    /// Remove the hidden action's `via` and target, or make it visible.
    KeepHiddenStill,
    /// Name an owner for the state, or roles for the actions leaving it.
    NameOwner,
    /// Advice that names no setting.
    Text(String),
}
