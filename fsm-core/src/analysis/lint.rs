//! The findings the analysis can report, each with a stable name.

use std::fmt;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Probably unintended, but the machine still works; can be allowed per spec.
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
        /// list names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// The text is not valid TOML.
    Syntax = ("syntax", Error),
    /// A value has the wrong type, a field is missing or unknown.
    Schema = ("schema", Error),
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
