//! The rules, one function per lint, in the order they report. Each reads the
//! resolved definition ([`Cx`]) and pushes its findings; none looks a name up.

use fsm_model::{Diagnostic, Help, Lint, Site, StateKind};

use crate::resolve::{Cx, ResolvedTarget};

type Out = Vec<Diagnostic>;

/// Every rule, in the order findings are reported.
pub(crate) const LINTS: &[fn(&Cx<'_>, &mut Out)] = &[
    bad_name,
    missing_initial,
    transition_initial,
    terminal_transition,
    undescribed_guard,
    no_origin,
    duplicate_origin,
    transition_origin,
    static_via,
    missing_target,
    transition_target,
    per_origin_mismatch,
    hidden_move,
    unreachable,
    orphan_transition,
    dead_end,
    terminal_exit,
    shared_transition,
    unused_guard,
    unused_role,
    owner_conflict,
    unowned_state,
    rename_conflict,
    static_deadline,
    transition_remove,
    remove_owner,
];

/// Why `name` cannot serve as a name, if it cannot. A role's or a guard's name
/// (`spaced`) may hold spaces: it travels in no URL, key or event. The
/// machine's name (`segment`) may not hold a `/`: it is one segment of a URL
/// (`/v1/<machine>/objects`) and of a store's keys (`<prefix><machine>/`),
/// where `a/b` would read as the machine `a`'s keys.
fn name_fault(name: &str, spaced: bool, segment: bool) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.chars().any(char::is_control) {
        Some("holds a control character")
    } else if !spaced && name.chars().any(char::is_whitespace) {
        Some("holds whitespace")
    } else if segment && name.contains('/') {
        Some("holds a `/`")
    } else {
        None
    }
}

fn bad_name(cx: &Cx<'_>, out: &mut Out) {
    let def = cx.def;
    let mut names: Vec<(Site, &str, &str)> =
        vec![(Site::MachineName, "the machine's name", &def.name)];
    for (i, s) in def.states.iter().enumerate() {
        names.push((Site::State(i), "state", &s.name));
        let earlier = s.renamed_from.iter().enumerate();
        names.extend(
            earlier.map(|(k, old)| (Site::StateRename(i, k), "earlier state", old.as_str())),
        );
    }
    for (a, x) in def.actions.iter().enumerate() {
        names.push((Site::Action(a), "action", &x.name));
        let earlier = x.renamed_from.iter().enumerate();
        names.extend(
            earlier.map(|(k, old)| (Site::ActionRename(a, k), "earlier action", old.as_str())),
        );
    }
    names.extend(
        def.roles
            .iter()
            .enumerate()
            .map(|(i, r)| (Site::Role(i), "role", r.name.as_str())),
    );
    names.extend(
        def.guards
            .iter()
            .enumerate()
            .map(|(i, g)| (Site::Guard(i), "guard", g.name.as_str())),
    );
    for (site, what, name) in names {
        let spaced = matches!(site, Site::Role(_) | Site::Guard(_));
        let Some(fault) = name_fault(name, spaced, site == Site::MachineName) else {
            continue;
        };
        let message = match site {
            Site::MachineName => format!("{what} {fault}"),
            _ if name.is_empty() => {
                let vowel = what.starts_with(['a', 'e', 'i', 'o', 'u']);
                let article = if vowel { "an" } else { "a" };
                format!("{article} {what} name {fault}")
            }
            _ => format!("{what} name `{}` {fault}", name.escape_debug()),
        };
        // (No `.` advised: XState reads it in a state's name as a step into
        // a child state.)
        let (label, help) = if spaced {
            (
                "roles and guards are named in messages, diagrams and token files",
                "use printable characters",
            )
        } else {
            (
                "names travel in URLs, store keys, diagrams and other tools' formats",
                "use letters, digits, `_` or `-`",
            )
        };
        out.push(
            Diagnostic::new(Lint::BadName, site, message)
                .with_label(label)
                .with_help(Help::Text(help.into())),
        );
    }
}

fn missing_initial(cx: &Cx<'_>, out: &mut Out) {
    if cx.def.initial.is_none() {
        out.push(
            Diagnostic::new(
                Lint::MissingInitial,
                Site::Machine,
                "the machine has no initial state",
            )
            .with_help(Help::NameInitial),
        );
    }
}

fn transition_initial(cx: &Cx<'_>, out: &mut Out) {
    let Some(i) = cx.initial else { return };
    if cx.state_kind(i) == StateKind::Transition {
        out.push(
            Diagnostic::new(
                Lint::TransitionInitial,
                Site::Initial,
                format!(
                    "the initial state `{}` is a transition state",
                    cx.def.states[i].name
                ),
            )
            .with_label("an object cannot start in the middle of an action")
            .with_related(Site::State(i), "declared as a transition state here"),
        );
    }
}

fn terminal_transition(cx: &Cx<'_>, out: &mut Out) {
    for (i, s) in cx.def.states.iter().enumerate() {
        if s.terminal && s.kind == StateKind::Transition {
            out.push(
                Diagnostic::new(
                    Lint::TerminalTransition,
                    Site::StateTerminal(i),
                    format!("transition state `{}` is marked terminal", s.name),
                )
                .with_label("a transition state means an action is running, so it must end"),
            );
        }
    }
}

fn undescribed_guard(cx: &Cx<'_>, out: &mut Out) {
    for (i, g) in cx.def.guards.iter().enumerate() {
        if g.description.as_deref().is_none_or(|d| d.trim().is_empty()) {
            out.push(
                Diagnostic::new(
                    Lint::UndescribedGuard,
                    Site::Guard(i),
                    format!("guard `{}` has no description", g.name),
                )
                .with_label("user code implements this guard, so say what it checks")
                .with_help(Help::DescribeGuard(g.name.clone())),
            );
        }
    }
}

fn no_origin(cx: &Cx<'_>, out: &mut Out) {
    for (a, action) in cx.def.actions.iter().enumerate() {
        if action.from.is_empty() {
            out.push(
                Diagnostic::new(
                    Lint::NoOrigin,
                    Site::Action(a),
                    format!("action `{}` has no origin", action.name),
                )
                .with_help(Help::AddOrigin),
            );
        }
    }
}

fn duplicate_origin(cx: &Cx<'_>, out: &mut Out) {
    for (a, action) in cx.def.actions.iter().enumerate() {
        for (k, from) in action.from.iter().enumerate() {
            if let Some(j) = action.from[..k].iter().position(|f| f == from) {
                out.push(
                    Diagnostic::new(
                        Lint::DuplicateOrigin,
                        Site::ActionFrom(a, k),
                        format!("action `{}` lists origin `{from}` twice", action.name),
                    )
                    .with_label("listed again here")
                    .with_related(Site::ActionFrom(a, j), "first listed here"),
                );
            }
        }
    }
}

fn transition_origin(cx: &Cx<'_>, out: &mut Out) {
    for (a, act) in cx.actions.iter().enumerate() {
        for (k, &o) in act.origins.iter().enumerate() {
            let Some(o) = o.filter(|&o| cx.state_kind(o) == StateKind::Transition) else {
                continue;
            };
            out.push(
                Diagnostic::new(
                    Lint::TransitionOrigin,
                    Site::ActionFrom(a, k),
                    format!(
                        "action `{}` starts from transition state `{}`",
                        cx.def.actions[a].name, cx.def.states[o].name
                    ),
                )
                .with_label("another action is running in this state")
                .with_help(Help::Text(
                    "only static states can start an action; start it from the state the running action ends in".into(),
                )),
            );
        }
    }
}

fn static_via(cx: &Cx<'_>, out: &mut Out) {
    for (a, act) in cx.actions.iter().enumerate() {
        let Some(Some(v)) = act.via else { continue };
        if cx.state_kind(v) == StateKind::Static {
            let name = &cx.def.states[v].name;
            out.push(
                Diagnostic::new(
                    Lint::StaticVia,
                    Site::ActionVia(a),
                    format!(
                        "action `{}` passes through `{name}`, which is a static state",
                        cx.def.actions[a].name
                    ),
                )
                .with_label("`via` must name a transition state")
                .with_related(Site::State(v), "declared static here")
                .with_help(Help::MarkTransition(name.clone())),
            );
        }
    }
}

fn missing_target(cx: &Cx<'_>, out: &mut Out) {
    for (a, act) in cx.actions.iter().enumerate() {
        if matches!(act.target, ResolvedTarget::Missing) {
            let action = &cx.def.actions[a];
            let via = action.via.as_deref().unwrap_or_default();
            out.push(
                Diagnostic::new(
                    Lint::MissingTarget,
                    Site::ActionVia(a),
                    format!(
                        "transition state `{via}` of action `{}` has no target",
                        action.name
                    ),
                )
                .with_label("the object would stay in this transition state for ever")
                .with_help(Help::AddTarget),
            );
        }
    }
}

fn transition_target(cx: &Cx<'_>, out: &mut Out) {
    for (a, act) in cx.actions.iter().enumerate() {
        let targets: Vec<(Option<usize>, Site)> = match &act.target {
            ResolvedTarget::State(t) => vec![(*t, Site::ActionTo(a))],
            ResolvedTarget::PerOrigin(pairs) => pairs
                .iter()
                .enumerate()
                .map(|(k, &(_, t))| (t, Site::ActionToTarget(a, k)))
                .collect(),
            ResolvedTarget::Missing | ResolvedTarget::Origin => Vec::new(),
        };
        for (t, site) in targets {
            let Some(t) = t.filter(|&t| cx.state_kind(t) == StateKind::Transition) else {
                continue;
            };
            out.push(
                Diagnostic::new(
                    Lint::TransitionTarget,
                    site,
                    format!(
                        "action `{}` ends in transition state `{}`",
                        cx.def.actions[a].name, cx.def.states[t].name
                    ),
                )
                .with_label("an action must end in a static state")
                .with_related(Site::State(t), "declared as a transition state here"),
            );
        }
    }
}

fn per_origin_mismatch(cx: &Cx<'_>, out: &mut Out) {
    for (a, act) in cx.actions.iter().enumerate() {
        let ResolvedTarget::PerOrigin(pairs) = &act.target else {
            continue;
        };
        let action = &cx.def.actions[a];
        let written = match &action.to {
            fsm_model::TargetDef::PerOrigin(written) => written,
            _ => continue,
        };
        for (k, ((o, _), (origin, _))) in pairs.iter().zip(written).enumerate() {
            if o.is_some() && !action.from.contains(origin) {
                out.push(
                    Diagnostic::new(
                        Lint::PerOriginMismatch,
                        Site::ActionToOrigin(a, k),
                        format!(
                            "action `{}` gives a target for `{origin}`, which is not one of its origins",
                            action.name
                        ),
                    )
                    .with_label("not listed in `from`"),
                );
            }
        }
        for (k, from) in action.from.iter().enumerate() {
            if !written.iter().any(|(o, _)| o == from) {
                out.push(
                    Diagnostic::new(
                        Lint::PerOriginMismatch,
                        Site::ActionFrom(a, k),
                        format!("action `{}` has no target for origin `{from}`", action.name),
                    )
                    .with_label("an origin with no target")
                    .with_related(Site::ActionTo(a), "targets are given per origin here"),
                );
            }
        }
    }
}

fn hidden_move(cx: &Cx<'_>, out: &mut Out) {
    for (a, act) in cx.actions.iter().enumerate() {
        let action = &cx.def.actions[a];
        if action.hidden && act.changes_state() {
            out.push(
                Diagnostic::new(
                    Lint::HiddenMove,
                    Site::Action(a),
                    format!("hidden action `{}` changes the state", action.name),
                )
                .with_label("a hidden action keeps the object's status")
                .with_help(Help::KeepHiddenStill),
            );
        }
    }
}

/// A transition state no action passes through is an orphan, not unreachable.
fn orphan(cx: &Cx<'_>, i: usize) -> bool {
    cx.state_kind(i) == StateKind::Transition && cx.graph.entered_by[i].is_empty()
}

fn unreachable(cx: &Cx<'_>, out: &mut Out) {
    let Some(init) = cx.initial else { return };
    if cx.graph.incomplete {
        return;
    }
    for (i, s) in cx.def.states.iter().enumerate() {
        if !cx.graph.reachable[i] && !cx.duplicate[i] && !orphan(cx, i) {
            out.push(
                Diagnostic::new(
                    Lint::Unreachable,
                    Site::State(i),
                    format!(
                        "state `{}` cannot be reached from the initial state `{}`",
                        s.name, cx.def.states[init].name
                    ),
                )
                .with_label("no path of actions leads here"),
            );
        }
    }
}

fn orphan_transition(cx: &Cx<'_>, out: &mut Out) {
    if cx.graph.incomplete {
        return;
    }
    for (i, s) in cx.def.states.iter().enumerate() {
        if orphan(cx, i) && !cx.duplicate[i] {
            out.push(
                Diagnostic::new(
                    Lint::OrphanTransition,
                    Site::State(i),
                    format!("no action passes through transition state `{}`", s.name),
                )
                .with_label("a transition state exists only while an action runs")
                .with_help(Help::UseOrMakeStatic(s.name.clone())),
            );
        }
    }
}

fn dead_end(cx: &Cx<'_>, out: &mut Out) {
    if cx.graph.incomplete {
        return;
    }
    for (i, s) in cx.def.states.iter().enumerate() {
        if s.kind == StateKind::Static && !s.terminal && !cx.graph.left[i] && !cx.duplicate[i] {
            out.push(
                Diagnostic::new(
                    Lint::DeadEnd,
                    Site::State(i),
                    format!("state `{}` is not terminal but no action leaves it", s.name),
                )
                .with_label("an object here could never move again")
                .with_help(Help::LeaveOrTerminal),
            );
        }
    }
}

fn terminal_exit(cx: &Cx<'_>, out: &mut Out) {
    for (a, act) in cx.actions.iter().enumerate() {
        if !act.changes_state() {
            continue;
        }
        for (k, &o) in act.origins.iter().enumerate() {
            let Some(o) = o.filter(|&o| cx.def.states[o].terminal) else {
                continue;
            };
            out.push(
                Diagnostic::new(
                    Lint::TerminalExit,
                    Site::ActionFrom(a, k),
                    format!(
                        "action `{}` leaves terminal state `{}`",
                        cx.def.actions[a].name, cx.def.states[o].name
                    ),
                )
                .with_label("nothing may leave a terminal state")
                .with_related(Site::StateTerminal(o), "marked terminal here"),
            );
        }
    }
}

fn shared_transition(cx: &Cx<'_>, out: &mut Out) {
    let def = cx.def;
    for (i, users) in cx.graph.entered_by.iter().enumerate() {
        let Some((&first, rest)) = users.split_first() else {
            continue;
        };
        let mut d: Option<Diagnostic> = None;
        for &b in rest {
            if cx.actions[b].targets() == cx.actions[first].targets() {
                continue;
            }
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
        out.extend(d);
    }
}

fn unused_guard(cx: &Cx<'_>, out: &mut Out) {
    for (i, g) in cx.def.guards.iter().enumerate() {
        if !cx.def.actions.iter().any(|a| a.guards.contains(&g.name)) {
            out.push(
                Diagnostic::new(
                    Lint::UnusedGuard,
                    Site::Guard(i),
                    format!("guard `{}` is never used", g.name),
                )
                .with_label("no action names it among its guards"),
            );
        }
    }
}

fn unused_role(cx: &Cx<'_>, out: &mut Out) {
    let def = cx.def;
    for (i, r) in def.roles.iter().enumerate() {
        let used = def.actions.iter().any(|a| a.roles.contains(&r.name))
            || def.states.iter().any(|s| {
                s.owner.as_deref() == Some(&r.name)
                    || s.remove.iter().flatten().any(|x| *x == r.name)
            });
        if !used {
            out.push(
                Diagnostic::new(
                    Lint::UnusedRole,
                    Site::Role(i),
                    format!("role `{}` is never used", r.name),
                )
                .with_label("no action, owner or `remove` names it"),
            );
        }
    }
}

/// Under `single_mutator`, the actors that may move an object out of static state
/// `i`: its owner and the roles of the actions leaving it (an action without roles
/// is performed by the owner); and whether any action leaves it.
fn mutators<'d>(cx: &Cx<'d>, i: usize) -> (Vec<(&'d str, Site)>, bool) {
    let def = cx.def;
    let mut mutators: Vec<(&str, Site)> = Vec::new();
    if let Some(owner) = &def.states[i].owner {
        mutators.push((owner, Site::StateOwner(i)));
    }
    let mut leaving = false;
    for (a, act) in cx.actions.iter().enumerate() {
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
    (mutators, leaving)
}

/// The static states a `single_mutator` machine must give one mutator each.
fn single_mutator_states<'a>(cx: &'a Cx<'_>) -> impl Iterator<Item = usize> + 'a {
    (0..cx.def.states.len())
        .filter(|&i| cx.def.single_mutator && cx.state_kind(i) == StateKind::Static)
}

fn owner_conflict(cx: &Cx<'_>, out: &mut Out) {
    for i in single_mutator_states(cx) {
        let (mutators, _) = mutators(cx, i);
        if mutators.len() < 2 {
            continue;
        }
        let names: Vec<String> = mutators.iter().map(|(m, _)| format!("`{m}`")).collect();
        let mut d = Diagnostic::new(
            Lint::OwnerConflict,
            Site::State(i),
            format!(
                "state `{}` may be left by {} actors ({}) but the machine is single_mutator",
                cx.def.states[i].name,
                names.len(),
                names.join(", ")
            ),
        )
        .with_label("exactly one actor may move an object out of this state")
        .with_help(Help::Text(
            "give every action leaving it the role of the state's owner".into(),
        ));
        for (m, site) in &mutators {
            d = d.with_related(site.clone(), format!("`{m}` here"));
        }
        out.push(d);
    }
}

fn unowned_state(cx: &Cx<'_>, out: &mut Out) {
    for i in single_mutator_states(cx) {
        let (mutators, leaving) = mutators(cx, i);
        if mutators.is_empty() && leaving {
            out.push(
                Diagnostic::new(
                    Lint::UnownedState,
                    Site::State(i),
                    format!(
                        "nobody is named to move an object out of state `{}`",
                        cx.def.states[i].name
                    ),
                )
                .with_label("single_mutator needs one owner here")
                .with_help(Help::NameOwner),
            );
        }
    }
}

fn static_deadline(cx: &Cx<'_>, out: &mut Out) {
    for (i, s) in cx.def.states.iter().enumerate() {
        if s.deadline.is_some() && s.kind == StateKind::Static {
            out.push(
                Diagnostic::new(
                    Lint::StaticDeadline,
                    Site::StateDeadline(i),
                    format!("static state `{}` has a deadline", s.name),
                )
                .with_label("no action runs in a static state, so nothing can pass a deadline here")
                .with_help(Help::Text(
                    "put the deadline on the transition state the action passes through, or on the action".into(),
                )),
            );
        }
    }
}

/// Every earlier name must read as one thing: not a current name of its kind, and
/// claimed once.
fn rename_conflict(cx: &Cx<'_>, out: &mut Out) {
    let def = cx.def;
    let states = def
        .states
        .iter()
        .enumerate()
        .map(|(i, s)| (i, &s.name, &s.renamed_from));
    let actions = def
        .actions
        .iter()
        .enumerate()
        .map(|(a, x)| (a, &x.name, &x.renamed_from));
    check_renames("state", states.collect(), Site::StateRename, out);
    check_renames("action", actions.collect(), Site::ActionRename, out);
}

fn check_renames(
    kind: &str,
    items: Vec<(usize, &String, &Vec<String>)>,
    site: fn(usize, usize) -> Site,
    out: &mut Out,
) {
    let mut claimed: Vec<(&str, &str)> = Vec::new();
    for &(i, name, renames) in &items {
        for (k, old) in renames.iter().enumerate() {
            let current = items.iter().find(|(_, n, _)| n.eq_ignore_ascii_case(old));
            let earlier = claimed.iter().find(|(o, _)| o.eq_ignore_ascii_case(old));
            let problem = match (current, earlier) {
                (Some((_, n, _)), _) => format!("`{old}` is the name of {kind} `{n}`"),
                (None, Some((_, by))) => format!("{kind} `{by}` already claims `{old}`"),
                (None, None) => {
                    claimed.push((old, name));
                    continue;
                }
            };
            out.push(
                Diagnostic::new(
                    Lint::RenameConflict,
                    site(i, k),
                    format!("{kind} `{name}` was renamed from `{old}`, but {problem}"),
                )
                .with_label(format!("a stored `{old}` could not be read as one {kind}")),
            );
        }
    }
}

fn transition_remove(cx: &Cx<'_>, out: &mut Out) {
    for (i, s) in cx.def.states.iter().enumerate() {
        if s.remove.is_some() && s.kind == StateKind::Transition {
            out.push(
                Diagnostic::new(
                    Lint::TransitionRemove,
                    Site::StateRemove(i),
                    format!("transition state `{}` allows removal", s.name),
                )
                .with_label("an object in a transition state is held by its action, and a held object is never removed")
                .with_help(Help::Text(
                    "allow removal in the static state the action ends in".into(),
                )),
            );
        }
    }
}

fn remove_owner(cx: &Cx<'_>, out: &mut Out) {
    for (i, s) in cx.def.states.iter().enumerate() {
        let (Some(owner), Some(roles)) = (&s.owner, &s.remove) else {
            continue;
        };
        if !roles.is_empty() && !roles.contains(owner) {
            out.push(
                Diagnostic::new(
                    Lint::RemoveOwner,
                    Site::StateRemove(i),
                    format!(
                        "state `{}` lets {} remove objects, but it is owned by `{owner}`",
                        s.name,
                        roles
                            .iter()
                            .map(|r| format!("`{r}`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                )
                .with_label(
                    "only the owner moves an object out of its state, so no one could remove it",
                )
                .with_help(Help::Text(format!("name `{owner}` in `remove`"))),
            );
        }
    }
}
