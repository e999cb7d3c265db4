//! Test paths of every shipped spec, checked by replaying them through the table.

mod common;
#[path = "common/generated.rs"]
mod generated;

use std::collections::BTreeSet;

use fsm_core::paths::{Path, TestPaths};
use fsm_core::{Action, ActionId, Machine, StateId, Target};

/// Where `action` leads from `origin`, read from the action as written: a second
/// statement of the rule, to check the first by.
fn target_of(action: &Action, origin: StateId) -> Option<StateId> {
    if !action.origins.contains(&origin) {
        return None;
    }
    match &action.target {
        Target::State(t) => Some(*t),
        Target::Origin => Some(origin),
        Target::PerOrigin(pairs) => pairs.iter().find(|p| p.0 == origin).map(|p| p.1),
    }
}

/// Every (action, origin) pair of the table.
fn pairs(m: &Machine) -> Vec<(ActionId, StateId)> {
    m.action_ids()
        .flat_map(|a| m.action(a).origins.iter().map(move |&o| (a, o)))
        .collect()
}

/// Replays `path` from the initial state: every step an action of the table from
/// where the object is, to the action's target. Returns the (action, origin) pairs
/// taken.
fn replay(m: &Machine, path: &Path) -> Vec<(ActionId, StateId)> {
    let mut at = m.initial();
    let mut taken = Vec::new();
    for step in &path.rules {
        assert_eq!(step.origin, at, "{}: the path jumps", m.name());
        let def = m.action(step.action);
        let target = target_of(def, at).unwrap_or_else(|| {
            panic!(
                "{}: `{}` cannot start in {}",
                m.name(),
                def.name,
                m.state(at).name
            )
        });
        assert_eq!(step.target, target);
        taken.push((step.action, at));
        at = target;
    }
    taken
}

/// Distances from the initial state over (action, origin) moves, by relaxing
/// every edge until nothing changes: independent of the breadth-first search.
fn distances(m: &Machine) -> Vec<Option<usize>> {
    let mut d = vec![None; m.states().len()];
    d[m.initial().0] = Some(0);
    loop {
        let mut changed = false;
        for a in m.action_ids() {
            let def = m.action(a);
            for &o in def.origins.iter() {
                let (Some(t), Some(k)) = (target_of(def, o), d[o.0]) else {
                    continue;
                };
                if d[t.0].is_none_or(|dt: usize| k + 1 < dt) {
                    d[t.0] = Some(k + 1);
                    changed = true;
                }
            }
        }
        if !changed {
            return d;
        }
    }
}

#[test]
fn the_cover_takes_every_action_from_every_reachable_origin() {
    for spec in common::specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        let paths = TestPaths::of(&m);
        let taken: BTreeSet<_> = paths.cover.iter().flat_map(|p| replay(&m, p)).collect();
        let dist = distances(&m);
        let reachable: BTreeSet<_> = pairs(&m)
            .into_iter()
            .filter(|&(_, o)| dist[o.0].is_some())
            .collect();
        assert_eq!(taken, reachable, "{}", spec.display());
        // No shipped spec has an unreachable origin, so nothing is left out.
        assert_eq!(paths.uncovered, [], "{}", spec.display());
        let uncovered: BTreeSet<_> = paths
            .uncovered
            .iter()
            .map(|r| (r.action, r.origin))
            .collect();
        assert!(uncovered.is_disjoint(&reachable), "{}", spec.display());
        assert_eq!(
            uncovered.len() + reachable.len(),
            pairs(&m).len(),
            "{}: every rule is covered or reported",
            spec.display()
        );
        // Hence every action with a reachable origin is taken at least once.
        for a in m.action_ids() {
            if m.action(a).origins.iter().any(|o| dist[o.0].is_some()) {
                assert!(
                    taken.iter().any(|&(t, _)| t == a),
                    "{}: `{}`",
                    spec.display(),
                    m.action(a).name
                );
            }
        }
    }
}

#[test]
fn the_shortest_paths_are_shortest() {
    for spec in common::specs() {
        let m = fsm_core::spec::load(&spec).unwrap();
        let dist = distances(&m);
        let paths = TestPaths::of(&m);
        for s in m.state_ids().filter(|&s| !m.state(s).is_transition()) {
            let found = paths.shortest.iter().find(|p| p.reaches == s);
            match (dist[s.0], found) {
                (Some(d), Some(p)) => {
                    replay(&m, &p.path);
                    assert_eq!(
                        p.path.rules.len(),
                        d,
                        "{}: {}",
                        spec.display(),
                        m.state(s).name
                    );
                }
                (None, None) => {}
                (d, p) => panic!(
                    "{}: {} distance {d:?}, path {p:?}",
                    spec.display(),
                    m.state(s).name
                ),
            }
        }
        // A transition state is reached by a last step whose action passes through it.
        for p in paths
            .shortest
            .iter()
            .filter(|p| m.state(p.reaches).is_transition())
        {
            replay(&m, &p.path);
            let last = p.path.rules.last().unwrap();
            assert_eq!(m.action(last.action).via, Some(p.reaches));
        }
    }
}

/// The greedy cover as first written, a breadth-first search over every rule per
/// step: quadratic, but plainly what the cover means. `TestPaths::of` computes
/// the same paths in near-linear time.
fn greedy_cover_by_definition(m: &Machine) -> Vec<Path> {
    let edges: Vec<fsm_core::Rule> = m.rules().collect();
    let bfs = |start: StateId| {
        let mut via: Vec<Option<fsm_core::Rule>> = vec![None; m.states().len()];
        let mut seen = vec![false; m.states().len()];
        seen[start.0] = true;
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            for e in edges.iter().filter(|e| e.origin == s) {
                if !seen[e.target.0] {
                    seen[e.target.0] = true;
                    via[e.target.0] = Some(*e);
                    queue.push_back(e.target);
                }
            }
        }
        via
    };
    let walk_back = |via: &[Option<fsm_core::Rule>], start: StateId, to: StateId| {
        let mut steps = Vec::new();
        let mut at = to;
        while at != start {
            let step = via[at.0]?;
            steps.push(step);
            at = step.origin;
        }
        steps.reverse();
        Some(steps)
    };
    let mut taken = vec![false; edges.len()];
    let mut cover = Vec::new();
    loop {
        let mut rules = Vec::new();
        let mut at = m.initial();
        loop {
            if let Some(i) = (0..edges.len()).find(|&i| !taken[i] && edges[i].origin == at) {
                taken[i] = true;
                rules.push(edges[i]);
                at = edges[i].target;
                continue;
            }
            let via = bfs(at);
            let nearest = (0..edges.len())
                .filter(|&i| !taken[i])
                .filter_map(|i| walk_back(&via, at, edges[i].origin))
                .min_by_key(Vec::len);
            let Some(detour) = nearest else { break };
            for step in &detour {
                let i = edges.iter().position(|e| e == step).unwrap();
                taken[i] = true;
            }
            at = detour.last().map_or(at, |s| s.target);
            rules.extend(detour);
        }
        if rules.is_empty() {
            return cover;
        }
        cover.push(Path { rules });
    }
}

#[test]
fn the_cover_is_the_greedy_cover_by_its_definition() {
    let mut machines: Vec<(String, Machine)> = common::specs()
        .iter()
        .map(|spec| {
            (
                spec.display().to_string(),
                fsm_core::spec::load(spec).unwrap(),
            )
        })
        .collect();
    for seed in 0..20 {
        let text = generated::spec(40, 160, seed);
        let m = fsm_core::spec::load_str("generated.toml", &text).unwrap();
        machines.push((format!("generated, seed {seed}"), m));
    }
    for (name, m) in &machines {
        let paths = TestPaths::of(m);
        assert_eq!(paths.cover, greedy_cover_by_definition(m), "{name}");
        let taken: BTreeSet<_> = paths.cover.iter().flat_map(|p| replay(m, p)).collect();
        assert_eq!(taken.len(), pairs(m).len(), "{name}: every rule is taken");
    }
}
