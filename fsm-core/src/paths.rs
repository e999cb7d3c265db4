//! Test paths through a machine: the shortest way to every state, and a small set
//! of paths that together take every action from every origin it can be reached in.
//!
//! A path starts in the initial state and is a list of [`PathStep`]s: perform an
//! action, expect a state. An action is one step, from its origin to its target (the
//! transition state it passes through is visited during the step); an action that
//! changes no state expects the state it started in.
//!
//! ```
//! use fsm_core::Machine;
//! use fsm_core::paths::TestPaths;
//!
//! let node = Machine::from_spec_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/ovc/node.toml"))?;
//! let paths = TestPaths::of(&node);
//! let to_decommissioned = paths.shortest.iter().find(|p| node.state(p.reaches).name == "DECOMMISSIONED").unwrap();
//! assert_eq!(to_decommissioned.path.describe(&node), "decommission -> DECOMMISSIONED");
//! // Every action from every reachable origin, in as few paths as the greedy cover finds.
//! assert!(paths.uncovered.is_empty());
//! let cover: Vec<_> = paths.cover.iter().map(|p| p.describe(&node)).collect();
//! assert_eq!(cover, [
//!     "put_in_maintenance -> MAINTENANCE, enable -> ENABLED, decommission -> DECOMMISSIONED",
//!     "put_in_maintenance -> MAINTENANCE, decommission -> DECOMMISSIONED",
//! ]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;

use serde::Serialize;

use crate::{ActionId, Machine, StateId};

/// One step of a path: perform `action` from `from`, expect `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathStep {
    /// The action to perform.
    pub action: ActionId,
    /// The state it starts from.
    pub from: StateId,
    /// The state it must end in.
    pub to: StateId,
}

/// A path from the initial state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path {
    /// The steps, in order.
    pub steps: Vec<PathStep>,
}

impl Path {
    /// `deploy -> RUNNING, pause -> PAUSED`; `(start)` for the empty path.
    pub fn describe(&self, machine: &Machine) -> String {
        if self.steps.is_empty() {
            return "(start)".into();
        }
        self.steps
            .iter()
            .map(|s| {
                format!(
                    "{} -> {}",
                    machine.action(s.action).name,
                    machine.state(s.to).name
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The path with names, for JSON.
    pub fn named(&self, machine: &Machine) -> Vec<NamedStep> {
        self.steps
            .iter()
            .map(|s| NamedStep {
                action: machine.action(s.action).name.to_string(),
                from: machine.state(s.from).name.to_string(),
                to: machine.state(s.to).name.to_string(),
            })
            .collect()
    }
}

/// A [`PathStep`] with names, as `fsm paths --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedStep {
    /// The action.
    pub action: String,
    /// The state before.
    pub from: String,
    /// The state expected after.
    pub to: String,
}

/// The shortest path to one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortestPath {
    /// The state. A transition state is reached by the path's last step, while its
    /// action runs.
    pub reaches: StateId,
    /// The path.
    pub path: Path,
}

/// Test paths of a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestPaths {
    /// The shortest path to every reachable state, in state order.
    pub shortest: Vec<ShortestPath>,
    /// Paths that together take every action from every reachable origin.
    pub cover: Vec<Path>,
    /// (action, origin) pairs no path can take: the origin is unreachable.
    pub uncovered: Vec<(ActionId, StateId)>,
}

/// Every (action, origin) edge of the machine, in table order.
pub fn edges(machine: &Machine) -> Vec<PathStep> {
    machine
        .action_ids()
        .flat_map(|a| {
            let def = machine.action(a);
            def.origins.iter().map(move |&o| PathStep {
                action: a,
                from: o,
                to: def.target_from(o).unwrap_or(o),
            })
        })
        .collect()
}

/// Breadth-first from `start` over `edges`: for each state, the edge that first
/// reached it.
fn bfs(machine: &Machine, edges: &[PathStep], start: StateId) -> Vec<Option<PathStep>> {
    let mut via: Vec<Option<PathStep>> = vec![None; machine.states().len()];
    let mut seen = vec![false; machine.states().len()];
    seen[start.0] = true;
    let mut queue = VecDeque::from([start]);
    while let Some(s) = queue.pop_front() {
        for e in edges.iter().filter(|e| e.from == s) {
            if !seen[e.to.0] {
                seen[e.to.0] = true;
                via[e.to.0] = Some(*e);
                queue.push_back(e.to);
            }
        }
    }
    via
}

/// The path `bfs` found from its start to `to`, if `to` was reached.
fn walk_back(via: &[Option<PathStep>], start: StateId, to: StateId) -> Option<Path> {
    let mut steps = Vec::new();
    let mut at = to;
    while at != start {
        let step = via[at.0]?;
        steps.push(step);
        at = step.from;
    }
    steps.reverse();
    Some(Path { steps })
}

impl TestPaths {
    /// Computes the shortest paths and the edge cover of `machine`.
    pub fn of(machine: &Machine) -> Self {
        let edges = edges(machine);
        let initial = machine.initial();
        let via = bfs(machine, &edges, initial);

        let mut shortest = Vec::new();
        for s in machine.state_ids() {
            if machine.state(s).is_transition() {
                // The shortest path to an origin of an action through `s`, plus it.
                let best = machine
                    .actions_via(s)
                    .flat_map(|a| edges.iter().filter(move |e| e.action == a))
                    .filter_map(|e| {
                        let mut p = walk_back(&via, initial, e.from)?;
                        p.steps.push(*e);
                        Some(p)
                    })
                    .min_by_key(|p| p.steps.len());
                if let Some(path) = best {
                    shortest.push(ShortestPath { reaches: s, path });
                }
            } else if let Some(path) = walk_back(&via, initial, s) {
                shortest.push(ShortestPath { reaches: s, path });
            }
        }

        // Greedy cover: from where we are, take an untaken edge if there is one,
        // else go the shortest way to the nearest state that has one; when none is
        // reachable from here, end the path and start again from the initial state.
        let mut taken = vec![false; edges.len()];
        let mut cover = Vec::new();
        loop {
            let mut path = Path::default();
            let mut at = initial;
            loop {
                if let Some(i) = (0..edges.len()).find(|&i| !taken[i] && edges[i].from == at) {
                    taken[i] = true;
                    path.steps.push(edges[i]);
                    at = edges[i].to;
                    continue;
                }
                let via = bfs(machine, &edges, at);
                let nearest = (0..edges.len())
                    .filter(|&i| !taken[i])
                    .filter_map(|i| walk_back(&via, at, edges[i].from))
                    .min_by_key(|p| p.steps.len());
                match nearest {
                    Some(detour) => {
                        for step in &detour.steps {
                            if let Some(i) = edges.iter().position(|e| e == step) {
                                taken[i] = true;
                            }
                        }
                        at = detour.steps.last().map_or(at, |s| s.to);
                        path.steps.extend(detour.steps);
                    }
                    None => break,
                }
            }
            if path.steps.is_empty() {
                break;
            }
            cover.push(path);
        }
        let uncovered = (0..edges.len())
            .filter(|&i| !taken[i])
            .map(|i| (edges[i].action, edges[i].from))
            .collect();
        TestPaths {
            shortest,
            cover,
            uncovered,
        }
    }
}
