//! The checks themselves. Resolution and graph checks run over whatever resolved, so
//! one pass reports every finding.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, VecDeque};

use super::{Checked, Diagnostic, Lint, Severity};
use crate::spec::{
    Action, Guard, GuardId, Machine, MachineDef, Role, Site, State, StateId, StateKind, Target,
    TargetDef,
};

/// An action with its references resolved as far as they could be.
struct Resolved {
    origins: Vec<Option<usize>>,
    via: Option<Option<usize>>,
    target: ResolvedTarget,
    guards: Vec<Option<usize>>,
}

enum ResolvedTarget {
    /// No target and a transition state: reported as missing.
    Missing,
    State(Option<usize>),
    Origin,
    PerOrigin(Vec<(Option<usize>, Option<usize>)>),
}

impl Resolved {
    /// The state the action ends in from `origin`, if known.
    fn target_from(&self, origin: usize) -> Option<usize> {
        match &self.target {
            ResolvedTarget::Missing => None,
            ResolvedTarget::State(t) => *t,
            ResolvedTarget::Origin => Some(origin),
            ResolvedTarget::PerOrigin(pairs) => pairs
                .iter()
                .find(|(o, _)| *o == Some(origin))
                .and_then(|p| p.1),
        }
    }

    fn changes_state(&self) -> bool {
        self.via.is_some() || !matches!(self.target, ResolvedTarget::Origin)
    }

    /// Every known target, each once.
    fn targets(&self) -> BTreeSet<usize> {
        self.origins
            .iter()
            .flatten()
            .filter_map(|&o| self.target_from(o))
            .collect()
    }
}

pub(super) struct Checker<'d> {
    def: &'d MachineDef,
    states: HashMap<&'d str, usize>,
    /// States that repeat an earlier name: reported once, then left out of the graph
    /// checks so one mistake gives one finding.
    duplicate: Vec<bool>,
    out: Vec<Diagnostic>,
}

impl<'d> Checker<'d> {
    pub(super) fn new(def: &'d MachineDef) -> Self {
        let mut states = HashMap::new();
        for (i, s) in def.states.iter().enumerate() {
            states.entry(s.name.as_str()).or_insert(i);
        }
        let duplicate = vec![false; def.states.len()];
        Checker {
            def,
            states,
            duplicate,
            out: Vec::new(),
        }
    }

    pub(super) fn run(mut self) -> Checked {
        self.duplicates();
        let initial = self.initial();
        self.state_settings();
        let actions: Vec<Resolved> = (0..self.def.actions.len())
            .map(|a| self.action(a))
            .collect();
        self.graph(initial, &actions);
        self.usage();
        if self.def.single_mutator {
            self.owners(&actions);
        }
        self.apply_allow();
        let machine = if self.out.iter().any(Diagnostic::is_error) {
            None
        } else {
            initial.map(|i| build(self.def, i, &actions))
        };
        Checked {
            machine,
            diagnostics: self.out,
        }
    }

    fn push(&mut self, d: Diagnostic) {
        self.out.push(d);
    }

    fn state_name(&self, i: usize) -> &'d str {
        &self.def.states[i].name
    }

    /// Resolves a state name, reporting it if unknown.
    fn resolve(&mut self, name: &str, site: Site, what: &str) -> Option<usize> {
        if let Some(&i) = self.states.get(name) {
            return Some(i);
        }
        let names = self.def.states.iter().map(|s| s.name.as_str());
        let mut d = Diagnostic::new(
            Lint::UnknownState,
            site,
            format!("unknown state `{name}` in {what}"),
        )
        .with_label("not a state of this machine");
        if let Some(near) = crate::suggest(name, names) {
            d = d.with_help(format!("did you mean `{near}`?"));
        }
        self.push(d);
        None
    }

    fn duplicates(&mut self) {
        let def = self.def;
        for (i, s) in def.states.iter().enumerate() {
            if let Some(j) = def.states[..i]
                .iter()
                .position(|t| t.name.eq_ignore_ascii_case(&s.name))
            {
                self.duplicate[i] = true;
                self.push(
                    Diagnostic::new(
                        Lint::DuplicateState,
                        Site::State(i),
                        format!(
                            "state `{}` is declared twice (names are compared ignoring case)",
                            s.name
                        ),
                    )
                    .with_label("declared again here")
                    .with_related(
                        Site::State(j),
                        format!("`{}` first declared here", def.states[j].name),
                    ),
                );
            }
        }
        for (i, a) in def.actions.iter().enumerate() {
            if let Some(j) = def.actions[..i]
                .iter()
                .position(|b| b.name.eq_ignore_ascii_case(&a.name))
            {
                self.push(
                    Diagnostic::new(
                        Lint::DuplicateAction,
                        Site::Action(i),
                        format!(
                            "action `{}` is declared twice (names are compared ignoring case)",
                            a.name
                        ),
                    )
                    .with_label("declared again here")
                    .with_related(
                        Site::Action(j),
                        format!("`{}` first declared here", def.actions[j].name),
                    ),
                );
            }
        }
    }

    fn initial(&mut self) -> Option<usize> {
        let Some(name) = &self.def.initial else {
            self.push(
                Diagnostic::new(
                    Lint::MissingInitial,
                    Site::Machine,
                    "the machine has no initial state",
                )
                .with_help("name it in the machine header: `initial = \"STATE\"`"),
            );
            return None;
        };
        let i = self.resolve(name, Site::Initial, "`initial`")?;
        if self.def.states[i].kind == StateKind::Transition {
            self.push(
                Diagnostic::new(
                    Lint::TransitionInitial,
                    Site::Initial,
                    format!("the initial state `{name}` is a transition state"),
                )
                .with_label("an object cannot start in the middle of an action")
                .with_related(Site::State(i), "declared as a transition state here"),
            );
        }
        Some(i)
    }

    fn role_declared(&self, role: &str) -> bool {
        self.def.roles.iter().any(|r| r.name == role)
    }

    fn unknown_role(&mut self, role: &str, site: Site) {
        let mut d = Diagnostic::new(Lint::UnknownRole, site, format!("unknown role `{role}`"))
            .with_label("not declared under [roles]");
        d = match crate::suggest(role, self.def.roles.iter().map(|r| r.name.as_str())) {
            Some(near) => d.with_help(format!("did you mean `{near}`?")),
            None => d.with_help(format!("declare it: `[roles]` `{role} = \"who holds it\"`")),
        };
        self.push(d);
    }

    fn state_settings(&mut self) {
        let def = self.def;
        for (i, s) in def.states.iter().enumerate() {
            if s.terminal && s.kind == StateKind::Transition {
                self.push(
                    Diagnostic::new(
                        Lint::TerminalTransition,
                        Site::StateTerminal(i),
                        format!("transition state `{}` is marked terminal", s.name),
                    )
                    .with_label("a transition state means an action is running, so it must end"),
                );
            }
            if let Some(owner) = &s.owner {
                if !self.role_declared(owner) {
                    self.unknown_role(owner, Site::StateOwner(i));
                }
            }
        }
        for (i, g) in def.guards.iter().enumerate() {
            if g.description.as_deref().is_none_or(|d| d.trim().is_empty()) {
                self.push(
                    Diagnostic::new(
                        Lint::UndescribedGuard,
                        Site::Guard(i),
                        format!("guard `{}` has no description", g.name),
                    )
                    .with_label("user code implements this guard, so say what it checks")
                    .with_help(format!("`{} = \"what must hold\"`", g.name)),
                );
            }
        }
    }

    fn action(&mut self, a: usize) -> Resolved {
        let def = self.def;
        let action = &def.actions[a];
        let name = &action.name;
        if action.from.is_empty() {
            self.push(
                Diagnostic::new(
                    Lint::NoOrigin,
                    Site::Action(a),
                    format!("action `{name}` has no origin"),
                )
                .with_help("list the states it may start from: `from = [\"STATE\"]`"),
            );
        }
        let mut origins = Vec::new();
        for (k, from) in action.from.iter().enumerate() {
            if let Some(j) = action.from[..k].iter().position(|f| f == from) {
                self.push(
                    Diagnostic::new(
                        Lint::DuplicateOrigin,
                        Site::ActionFrom(a, k),
                        format!("action `{name}` lists origin `{from}` twice"),
                    )
                    .with_label("listed again here")
                    .with_related(Site::ActionFrom(a, j), "first listed here"),
                );
            }
            let o = self.resolve(
                from,
                Site::ActionFrom(a, k),
                &format!("the origins of action `{name}`"),
            );
            if let Some(o) = o {
                if def.states[o].kind == StateKind::Transition {
                    self.push(
                        Diagnostic::new(
                            Lint::TransitionOrigin,
                            Site::ActionFrom(a, k),
                            format!("action `{name}` starts from transition state `{from}`"),
                        )
                        .with_label("another action is running in this state")
                        .with_help("only static states can start an action; start it from the state the running action ends in"),
                    );
                }
            }
            origins.push(o);
        }
        let via = action.via.as_ref().map(|v| {
            let i = self.resolve(v, Site::ActionVia(a), &format!("`via` of action `{name}`"));
            if let Some(i) = i {
                if def.states[i].kind == StateKind::Static {
                    self.push(
                        Diagnostic::new(
                            Lint::StaticVia,
                            Site::ActionVia(a),
                            format!("action `{name}` passes through `{v}`, which is a static state"),
                        )
                        .with_label("`via` must name a transition state")
                        .with_related(Site::State(i), "declared static here")
                        .with_help(format!("mark it `{v} = {{ transition = true }}`, or make `{v}` the target with `to`")),
                    );
                }
            }
            i
        });
        let target = match &action.to {
            TargetDef::Unset if via.is_some() => {
                let v = action.via.as_deref().unwrap_or_default();
                self.push(
                    Diagnostic::new(
                        Lint::MissingTarget,
                        Site::ActionVia(a),
                        format!("transition state `{v}` of action `{name}` has no target"),
                    )
                    .with_label("the object would stay in this transition state for ever")
                    .with_help(
                        "add `to = \"STATE\"`, or `to_origin = true` to return where it started",
                    ),
                );
                ResolvedTarget::Missing
            }
            TargetDef::Unset | TargetDef::Origin => ResolvedTarget::Origin,
            TargetDef::State(t) => {
                let i = self.resolve(
                    t,
                    Site::ActionTo(a),
                    &format!("the target of action `{name}`"),
                );
                self.static_target(a, i, Site::ActionTo(a));
                ResolvedTarget::State(i)
            }
            TargetDef::PerOrigin(pairs) => {
                let mut out = Vec::new();
                for (k, (o, t)) in pairs.iter().enumerate() {
                    let what = format!("the targets of action `{name}`");
                    let oi = self.resolve(o, Site::ActionToOrigin(a, k), &what);
                    if oi.is_some() && !action.from.contains(o) {
                        self.push(
                            Diagnostic::new(
                                Lint::PerOriginMismatch,
                                Site::ActionToOrigin(a, k),
                                format!("action `{name}` gives a target for `{o}`, which is not one of its origins"),
                            )
                            .with_label("not listed in `from`"),
                        );
                    }
                    let ti = self.resolve(t, Site::ActionToTarget(a, k), &what);
                    self.static_target(a, ti, Site::ActionToTarget(a, k));
                    out.push((oi, ti));
                }
                for (k, from) in action.from.iter().enumerate() {
                    if !pairs.iter().any(|(o, _)| o == from) {
                        self.push(
                            Diagnostic::new(
                                Lint::PerOriginMismatch,
                                Site::ActionFrom(a, k),
                                format!("action `{name}` has no target for origin `{from}`"),
                            )
                            .with_label("an origin with no target")
                            .with_related(Site::ActionTo(a), "targets are given per origin here"),
                        );
                    }
                }
                ResolvedTarget::PerOrigin(out)
            }
        };
        for (k, role) in action.roles.iter().enumerate() {
            if !self.role_declared(role) {
                self.unknown_role(role, Site::ActionRole(a, k));
            }
        }
        let mut guards = Vec::new();
        for (k, guard) in action.guards.iter().enumerate() {
            let g = def.guards.iter().position(|g| &g.name == guard);
            if g.is_none() {
                let mut d = Diagnostic::new(
                    Lint::UnknownGuard,
                    Site::ActionGuard(a, k),
                    format!("guard `{guard}` is used by action `{name}` but never described"),
                )
                .with_label("not declared under [guards]");
                d = match crate::suggest(guard, def.guards.iter().map(|g| g.name.as_str())) {
                    Some(near) => d.with_help(format!("did you mean `{near}`?")),
                    None => d.with_help(format!(
                        "describe it: `[guards]` `{guard} = \"what must hold\"`"
                    )),
                };
                self.push(d);
            }
            guards.push(g);
        }
        let resolved = Resolved {
            origins,
            via,
            target,
            guards,
        };
        if action.hidden && resolved.changes_state() {
            self.push(
                Diagnostic::new(
                    Lint::HiddenMove,
                    Site::Action(a),
                    format!("hidden action `{name}` changes the state"),
                )
                .with_label("a hidden action keeps the object's status")
                .with_help("remove `via` and `to`, or make the action visible"),
            );
        }
        resolved
    }

    fn static_target(&mut self, a: usize, target: Option<usize>, site: Site) {
        let Some(t) = target else { return };
        if self.def.states[t].kind == StateKind::Transition {
            let name = &self.def.actions[a].name;
            let t_name = self.state_name(t);
            self.push(
                Diagnostic::new(
                    Lint::TransitionTarget,
                    site,
                    format!("action `{name}` ends in transition state `{t_name}`"),
                )
                .with_label("an action must end in a static state")
                .with_related(Site::State(t), "declared as a transition state here"),
            );
        }
    }

    fn graph(&mut self, initial: Option<usize>, actions: &[Resolved]) {
        let def = self.def;
        let n = def.states.len();
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut leaves = vec![false; n];
        let mut entered_by: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (a, act) in actions.iter().enumerate() {
            if let Some(Some(v)) = act.via {
                entered_by[v].push(a);
            }
            for &o in act.origins.iter().flatten() {
                if !act.changes_state() {
                    continue;
                }
                leaves[o] = true;
                let target = act.target_from(o);
                match act.via {
                    Some(Some(v)) => {
                        edges[o].push(v);
                        edges[v].extend(target);
                    }
                    Some(None) => {}
                    None => edges[o].extend(target),
                }
            }
        }
        if let Some(init) = initial {
            let mut seen = vec![false; n];
            let mut queue = VecDeque::from([init]);
            seen[init] = true;
            while let Some(s) = queue.pop_front() {
                for &t in &edges[s] {
                    if !seen[t] {
                        seen[t] = true;
                        queue.push_back(t);
                    }
                }
            }
            for (i, s) in def.states.iter().enumerate() {
                let orphan = s.kind == StateKind::Transition && entered_by[i].is_empty();
                if !seen[i] && !self.duplicate[i] && !orphan {
                    self.push(
                        Diagnostic::new(
                            Lint::Unreachable,
                            Site::State(i),
                            format!(
                                "state `{}` cannot be reached from the initial state `{}`",
                                s.name, def.states[init].name
                            ),
                        )
                        .with_label("no path of actions leads here"),
                    );
                }
            }
        }
        for (i, s) in def.states.iter().enumerate() {
            if self.duplicate[i] {
                continue;
            }
            match s.kind {
                StateKind::Transition if entered_by[i].is_empty() => self.push(
                    Diagnostic::new(
                        Lint::OrphanTransition,
                        Site::State(i),
                        format!("no action passes through transition state `{}`", s.name),
                    )
                    .with_label("a transition state exists only while an action runs")
                    .with_help(format!(
                        "name it in an action's `via`, or make `{}` static",
                        s.name
                    )),
                ),
                StateKind::Static if !s.terminal && !leaves[i] => self.push(
                    Diagnostic::new(
                        Lint::DeadEnd,
                        Site::State(i),
                        format!("state `{}` is not terminal but no action leaves it", s.name),
                    )
                    .with_label("an object here could never move again")
                    .with_help("add an action from it, or mark it `terminal = true`"),
                ),
                _ => {}
            }
        }
        for (a, act) in actions.iter().enumerate() {
            if !act.changes_state() {
                continue;
            }
            for (k, o) in act.origins.iter().enumerate() {
                if let Some(o) = *o {
                    if def.states[o].terminal {
                        self.push(
                            Diagnostic::new(
                                Lint::TerminalExit,
                                Site::ActionFrom(a, k),
                                format!(
                                    "action `{}` leaves terminal state `{}`",
                                    def.actions[a].name, def.states[o].name
                                ),
                            )
                            .with_label("nothing may leave a terminal state")
                            .with_related(Site::StateTerminal(o), "marked terminal here"),
                        );
                    }
                }
            }
        }
        for (i, users) in entered_by.iter().enumerate() {
            let first = match users.first() {
                Some(&first) => first,
                None => continue,
            };
            let mut d = None;
            for &b in &users[1..] {
                if actions[b].targets() != actions[first].targets() {
                    let diag = d.get_or_insert_with(|| {
                        Diagnostic::new(
                            Lint::SharedTransition,
                            Site::State(i),
                            format!(
                                "transition state `{}` is shared by actions with different targets",
                                def.states[i].name
                            ),
                        )
                        .with_label("the state alone does not tell which action is running")
                        .with_related(
                            Site::ActionVia(first),
                            format!("`{}` passes through it", def.actions[first].name),
                        )
                    });
                    diag.related.push((
                        Site::ActionVia(b),
                        format!("so does `{}`", def.actions[b].name),
                    ));
                }
            }
            if let Some(d) = d {
                self.push(d);
            }
        }
    }

    fn usage(&mut self) {
        let def = self.def;
        for (i, g) in def.guards.iter().enumerate() {
            if !def.actions.iter().any(|a| a.guards.contains(&g.name)) {
                self.push(
                    Diagnostic::new(
                        Lint::UnusedGuard,
                        Site::Guard(i),
                        format!("guard `{}` is never used", g.name),
                    )
                    .with_label("no action names it in `guards`"),
                );
            }
        }
        for (i, r) in def.roles.iter().enumerate() {
            let used = def.actions.iter().any(|a| a.roles.contains(&r.name))
                || def
                    .states
                    .iter()
                    .any(|s| s.owner.as_deref() == Some(&r.name));
            if !used {
                self.push(
                    Diagnostic::new(
                        Lint::UnusedRole,
                        Site::Role(i),
                        format!("role `{}` is never used", r.name),
                    )
                    .with_label("no action names it and no state is owned by it"),
                );
            }
        }
    }

    /// Under `single_mutator`, the actors that may move an object out of a static
    /// state are its owner and the roles of the actions leaving it; exactly one must
    /// remain. Actions without roles are performed by the owner.
    fn owners(&mut self, actions: &[Resolved]) {
        let def = self.def;
        for (i, s) in def.states.iter().enumerate() {
            if s.kind == StateKind::Transition {
                continue;
            }
            let mut mutators: Vec<(&str, Site)> = Vec::new();
            if let Some(owner) = &s.owner {
                mutators.push((owner, Site::StateOwner(i)));
            }
            let mut leaving = false;
            for (a, act) in actions.iter().enumerate() {
                if !act.changes_state() || !act.origins.contains(&Some(i)) {
                    continue;
                }
                leaving = true;
                for (k, role) in def.actions[a].roles.iter().enumerate() {
                    if !mutators.iter().any(|(m, _)| m == role) {
                        mutators.push((role, Site::ActionRole(a, k)));
                    }
                }
            }
            if mutators.len() > 1 {
                let names: Vec<String> = mutators.iter().map(|(m, _)| format!("`{m}`")).collect();
                let mut d = Diagnostic::new(
                    Lint::OwnerConflict,
                    Site::State(i),
                    format!("state `{}` may be left by {} actors ({}) but the machine is single_mutator", s.name, names.len(), names.join(", ")),
                )
                .with_label("exactly one actor may move an object out of this state")
                .with_help("give every action leaving it the role of the state's owner");
                for (m, site) in &mutators {
                    d = d.with_related(site.clone(), format!("`{m}` here"));
                }
                self.push(d);
            } else if mutators.is_empty() && leaving {
                self.push(
                    Diagnostic::new(
                        Lint::UnownedState,
                        Site::State(i),
                        format!(
                            "nobody is named to move an object out of state `{}`",
                            s.name
                        ),
                    )
                    .with_label("single_mutator needs one owner here")
                    .with_help(
                        "add `owner = \"ROLE\"` to the state or `roles` to the actions leaving it",
                    ),
                );
            }
        }
    }

    fn apply_allow(&mut self) {
        let mut allowed = Vec::new();
        for (i, code) in self.def.allow.iter().enumerate() {
            match Lint::from_code(code) {
                Some(lint) if lint.severity() == Severity::Warning => allowed.push(lint),
                Some(lint) => self.push(
                    Diagnostic::new(
                        Lint::UnknownLint,
                        Site::Allow(i),
                        format!("`{code}` is an error and cannot be allowed"),
                    )
                    .with_label(format!("{lint} findings make the machine unusable")),
                ),
                None => {
                    let warnings = Lint::ALL
                        .iter()
                        .filter(|l| l.severity() == Severity::Warning)
                        .map(|l| l.code());
                    let mut d = Diagnostic::new(
                        Lint::UnknownLint,
                        Site::Allow(i),
                        format!("unknown lint `{code}`"),
                    )
                    .with_label("not the name of a warning");
                    if let Some(near) = crate::suggest(code, warnings) {
                        d = d.with_help(format!("did you mean `{near}`?"));
                    }
                    self.push(d);
                }
            }
        }
        self.out.retain(|d| !allowed.contains(&d.lint));
    }
}

/// Builds the machine from a definition that has no error, so every reference resolved.
fn build(def: &MachineDef, initial: usize, actions: &[Resolved]) -> Machine {
    let text = |s: &String| Cow::Owned(s.clone());
    let states = def
        .states
        .iter()
        .map(|s| State {
            name: text(&s.name),
            kind: s.kind,
            terminal: s.terminal,
            persisted: s.persisted,
            owner: s.owner.as_ref().map(text),
            description: s.description.as_ref().map(text),
        })
        .collect::<Vec<_>>();
    let ids = |v: &[Option<usize>]| v.iter().flatten().map(|&i| StateId(i)).collect::<Vec<_>>();
    let actions = def
        .actions
        .iter()
        .zip(actions)
        .map(|(d, r)| Action {
            name: text(&d.name),
            origins: Cow::Owned(ids(&r.origins)),
            via: r.via.flatten().map(StateId),
            target: match &r.target {
                ResolvedTarget::State(t) => Target::State(StateId(t.unwrap_or_default())),
                ResolvedTarget::Origin | ResolvedTarget::Missing => Target::Origin,
                ResolvedTarget::PerOrigin(pairs) => Target::PerOrigin(Cow::Owned(
                    pairs
                        .iter()
                        .filter_map(|(o, t)| Some((StateId((*o)?), StateId((*t)?))))
                        .collect(),
                )),
            },
            roles: Cow::Owned(d.roles.iter().map(text).collect()),
            guards: Cow::Owned(r.guards.iter().flatten().map(|&g| GuardId(g)).collect()),
            hidden: d.hidden,
            description: d.description.as_ref().map(text),
        })
        .collect::<Vec<_>>();
    Machine {
        name: text(&def.name),
        description: def.description.as_ref().map(text),
        initial: StateId(initial),
        single_mutator: def.single_mutator,
        states: Cow::Owned(states),
        actions: Cow::Owned(actions),
        guards: Cow::Owned(
            def.guards
                .iter()
                .map(|g| Guard {
                    name: text(&g.name),
                    description: text(g.description.as_ref().unwrap_or(&String::new())),
                })
                .collect(),
        ),
        roles: Cow::Owned(
            def.roles
                .iter()
                .map(|r| Role {
                    name: text(&r.name),
                    description: r.description.as_ref().map(text),
                })
                .collect(),
        ),
    }
}
