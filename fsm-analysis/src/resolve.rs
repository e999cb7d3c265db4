//! Name resolution, apart from the rules: every name the definition uses is looked
//! up once here, and what could not be found is reported here (unknown and
//! duplicated names). The rules then read the resolved definition, and the graph
//! derived from it, without looking anything up again.

use std::collections::{BTreeSet, HashMap, VecDeque};

use fsm_model::{Diagnostic, Help, Lint, MachineDef, Site, StateKind, TargetDef};

/// A definition with its names resolved as far as they could be. An index that
/// did not resolve is `None` and was reported; rules skip it.
pub(crate) struct Cx<'d> {
    pub def: &'d MachineDef,
    /// The initial state, if named and known.
    pub initial: Option<usize>,
    /// States that repeat an earlier name (ignoring case): reported once, then left
    /// out of the graph rules so that one mistake gives one finding.
    pub duplicate: Vec<bool>,
    pub actions: Vec<Resolved>,
    pub graph: Graph,
}

/// An action with its references resolved.
pub(crate) struct Resolved {
    pub origins: Vec<Option<usize>>,
    /// `None`: no transition state; `Some(None)`: one that did not resolve.
    pub via: Option<Option<usize>>,
    pub target: ResolvedTarget,
    pub guards: Vec<Option<usize>>,
}

pub(crate) enum ResolvedTarget {
    /// No target although a transition state is named (the `missing-target` rule).
    Missing,
    State(Option<usize>),
    Origin,
    PerOrigin(Vec<(Option<usize>, Option<usize>)>),
}

impl Resolved {
    /// The state the action ends in from `origin`, if known.
    pub fn target_from(&self, origin: usize) -> Option<usize> {
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

    /// True when a state the action names did not resolve, or an origin has no
    /// target (none given, or none for it among targets per origin): the graph
    /// lacks edges of it.
    fn misses_a_state(&self) -> bool {
        let unresolved_pair = match &self.target {
            ResolvedTarget::PerOrigin(pairs) => pairs.iter().any(|(o, _)| o.is_none()),
            _ => false,
        };
        unresolved_pair
            || self.via == Some(None)
            || self.origins.contains(&None)
            || (self.origins.iter().flatten()).any(|&o| self.target_from(o).is_none())
    }

    pub fn changes_state(&self) -> bool {
        self.via.is_some() || !matches!(self.target, ResolvedTarget::Origin)
    }

    /// Every known target, each once.
    pub fn targets(&self) -> BTreeSet<usize> {
        self.origins
            .iter()
            .flatten()
            .filter_map(|&o| self.target_from(o))
            .collect()
    }
}

/// The machine as a graph of states, from the resolved actions.
pub(crate) struct Graph {
    /// States reachable from the initial state (all false without one).
    pub reachable: Vec<bool>,
    /// Static states some action that changes the state leaves.
    pub left: Vec<bool>,
    /// For each transition state, the actions passing through it.
    pub entered_by: Vec<Vec<usize>>,
    /// Some action names a state that did not resolve (or names no target), so
    /// edges the author meant are missing: the rules that read the whole graph
    /// (unreachable, dead-end, orphan-transition) would report what follows from
    /// that one mistake as mistakes of their own, and wait until it is fixed.
    pub incomplete: bool,
}

impl Graph {
    fn of(n: usize, initial: Option<usize>, actions: &[Resolved]) -> Graph {
        let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut left = vec![false; n];
        let mut entered_by: Vec<Vec<usize>> = vec![Vec::new(); n];
        let incomplete = actions.iter().any(Resolved::misses_a_state);
        for (a, act) in actions.iter().enumerate() {
            if let Some(Some(v)) = act.via {
                entered_by[v].push(a);
            }
            if !act.changes_state() {
                continue;
            }
            for &o in act.origins.iter().flatten() {
                left[o] = true;
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
        let mut reachable = vec![false; n];
        if let Some(init) = initial {
            let mut queue = VecDeque::from([init]);
            reachable[init] = true;
            while let Some(s) = queue.pop_front() {
                for &t in &edges[s] {
                    if !reachable[t] {
                        reachable[t] = true;
                        queue.push_back(t);
                    }
                }
            }
        }
        Graph {
            reachable,
            left,
            entered_by,
            incomplete,
        }
    }
}

struct Resolver<'d, 'o> {
    def: &'d MachineDef,
    states: HashMap<&'d str, usize>,
    out: &'o mut Vec<Diagnostic>,
}

pub(crate) fn resolve<'d>(def: &'d MachineDef, out: &mut Vec<Diagnostic>) -> Cx<'d> {
    let mut states = HashMap::new();
    for (i, s) in def.states.iter().enumerate() {
        states.entry(s.name.as_str()).or_insert(i);
    }
    let mut r = Resolver { def, states, out };
    let duplicate = r.duplicates();
    let initial = def
        .initial
        .as_ref()
        .and_then(|name| r.state(name, Site::Initial, "`initial`"));
    for (i, s) in def.states.iter().enumerate() {
        if let Some(owner) = &s.owner {
            r.role(owner, Site::StateOwner(i));
        }
        for (k, role) in s.remove.iter().flatten().enumerate() {
            r.role(role, Site::StateRemoveRole(i, k));
        }
    }
    let actions: Vec<Resolved> = (0..def.actions.len()).map(|a| r.action(a)).collect();
    let graph = Graph::of(def.states.len(), initial, &actions);
    Cx {
        def,
        initial,
        duplicate,
        actions,
        graph,
    }
}

impl Resolver<'_, '_> {
    /// Resolves a state name, reporting it if unknown.
    fn state(&mut self, name: &str, site: Site, what: &str) -> Option<usize> {
        if let Some(&i) = self.states.get(name) {
            return Some(i);
        }
        let mut d = Diagnostic::new(
            Lint::UnknownState,
            site,
            format!("unknown state `{name}` in {what}"),
        )
        .with_label("not a state of this machine");
        let names = self.def.states.iter().map(|s| s.name.as_str());
        if let Some(near) = fsm_model::suggest(name, names) {
            d = d.with_help(Help::DidYouMean(near.to_owned()));
        }
        self.out.push(d);
        None
    }

    fn role(&mut self, role: &str, site: Site) {
        if self.def.roles.iter().any(|r| r.name == role) {
            return;
        }
        let d = Diagnostic::new(Lint::UnknownRole, site, format!("unknown role `{role}`"))
            .with_label("not a declared role");
        let near = fsm_model::suggest(role, self.def.roles.iter().map(|r| r.name.as_str()));
        self.out.push(match near {
            Some(near) => d.with_help(Help::DidYouMean(near.to_owned())),
            None => d.with_help(Help::DeclareRole(role.to_owned())),
        });
    }

    fn guard(&mut self, guard: &str, site: Site, action: &str) -> Option<usize> {
        let guards = &self.def.guards;
        if let Some(g) = guards.iter().position(|g| g.name == guard) {
            return Some(g);
        }
        let d = Diagnostic::new(
            Lint::UnknownGuard,
            site,
            format!("guard `{guard}` is used by action `{action}` but never described"),
        )
        .with_label("not a declared guard");
        let near = fsm_model::suggest(guard, guards.iter().map(|g| g.name.as_str()));
        self.out.push(match near {
            Some(near) => d.with_help(Help::DidYouMean(near.to_owned())),
            None => d.with_help(Help::DeclareGuard(guard.to_owned())),
        });
        None
    }

    /// Reports names declared twice (ignoring case); returns which states repeat.
    /// One pass with a map from each name, lowercased, to its first declaration:
    /// linear in the size of the table.
    fn duplicates(&mut self) -> Vec<bool> {
        let def = self.def;
        let mut duplicate = vec![false; def.states.len()];
        let mut first: HashMap<String, usize> = HashMap::with_capacity(def.states.len());
        for (i, s) in def.states.iter().enumerate() {
            let j = *first.entry(s.name.to_ascii_lowercase()).or_insert(i);
            if j != i {
                duplicate[i] = true;
                self.out.push(twice(
                    Lint::DuplicateState,
                    ("state", &s.name, &def.states[j].name),
                    Site::State(i),
                    Site::State(j),
                ));
            }
        }
        let mut first: HashMap<String, usize> = HashMap::with_capacity(def.actions.len());
        for (i, a) in def.actions.iter().enumerate() {
            let j = *first.entry(a.name.to_ascii_lowercase()).or_insert(i);
            if j != i {
                self.out.push(twice(
                    Lint::DuplicateAction,
                    ("action", &a.name, &def.actions[j].name),
                    Site::Action(i),
                    Site::Action(j),
                ));
            }
        }
        duplicate
    }

    fn action(&mut self, a: usize) -> Resolved {
        let action = &self.def.actions[a];
        let name = &action.name;
        let origins = action
            .from
            .iter()
            .enumerate()
            .map(|(k, from)| {
                let what = format!("the origins of action `{name}`");
                self.state(from, Site::ActionFrom(a, k), &what)
            })
            .collect();
        let via = action.via.as_ref().map(|v| {
            let what = format!("`via` of action `{name}`");
            self.state(v, Site::ActionVia(a), &what)
        });
        let what = format!("the target of action `{name}`");
        let target = match &action.to {
            TargetDef::Unset if via.is_some() => ResolvedTarget::Missing,
            TargetDef::Unset | TargetDef::Origin => ResolvedTarget::Origin,
            TargetDef::State(t) => ResolvedTarget::State(self.state(t, Site::ActionTo(a), &what)),
            TargetDef::PerOrigin(pairs) => {
                let what = format!("the targets of action `{name}`");
                ResolvedTarget::PerOrigin(
                    pairs
                        .iter()
                        .enumerate()
                        .map(|(k, (o, t))| {
                            let o = self.state(o, Site::ActionToOrigin(a, k), &what);
                            let t = self.state(t, Site::ActionToTarget(a, k), &what);
                            (o, t)
                        })
                        .collect(),
                )
            }
        };
        for (k, role) in action.roles.iter().enumerate() {
            self.role(role, Site::ActionRole(a, k));
        }
        let guards = action
            .guards
            .iter()
            .enumerate()
            .map(|(k, g)| self.guard(g, Site::ActionGuard(a, k), name))
            .collect();
        Resolved {
            origins,
            via,
            target,
            guards,
        }
    }
}

/// A name declared a second time: `(kind, name, first declaration's name)`.
fn twice(
    lint: Lint,
    (kind, name, first): (&str, &str, &str),
    at: Site,
    first_at: Site,
) -> Diagnostic {
    Diagnostic::new(
        lint,
        at,
        format!("{kind} `{name}` is declared twice (names are compared ignoring case)"),
    )
    .with_label("declared again here")
    .with_related(first_at, format!("`{first}` first declared here"))
}

impl Cx<'_> {
    pub fn state_kind(&self, i: usize) -> StateKind {
        self.def.states[i].kind
    }
}
