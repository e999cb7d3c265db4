//! Test paths through a machine: the shortest way to every state, and a small set
//! of paths that together take every action from every origin it can be reached in.
//!
//! A path starts in the initial state and is a list of [`Rule`]s taken one after the
//! other: perform the rule's action from its origin, expect its target (the
//! transition state it passes through is visited on the way); an action that
//! changes no state expects the state it started in.
//!
//! ```
//! use fsm_core::paths::TestPaths;
//!
//! let node = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/ovc/node.toml"))?;
//! let paths = TestPaths::of(&node);
//! let to_decommissioned = paths.shortest.iter().find(|p| node.state(p.reaches).name == "DECOMMISSIONED").unwrap();
//! assert_eq!(to_decommissioned.path.describe(&node), "decommission -> DECOMMISSIONED");
//! // Every rule from a reachable origin, in as few paths as the greedy cover finds.
//! assert!(paths.uncovered.is_empty());
//! let cover: Vec<_> = paths.cover.iter().map(|p| p.describe(&node)).collect();
//! assert_eq!(cover, [
//!     "put_in_maintenance -> MAINTENANCE, enable -> ENABLED, decommission -> DECOMMISSIONED",
//!     "put_in_maintenance -> MAINTENANCE, decommission -> DECOMMISSIONED",
//! ]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;

use crate::{Machine, Rule, StateId};

/// A path from the initial state: rules taken one after the other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path {
    /// The rules, in order; each starts where the one before ended.
    pub rules: Vec<Rule>,
}

impl Path {
    /// `deploy -> RUNNING, pause -> PAUSED`; `(start)` for the empty path.
    pub fn describe(&self, machine: &Machine) -> String {
        if self.rules.is_empty() {
            return "(start)".into();
        }
        self.rules
            .iter()
            .map(|r| {
                format!(
                    "{} -> {}",
                    machine.action(r.action).name,
                    machine.state(r.target).name
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
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
    /// Paths that together take every rule whose origin is reachable.
    pub cover: Vec<Path>,
    /// Rules no path can take: their origin is unreachable.
    pub uncovered: Vec<Rule>,
}

/// Breadth-first from `start` over `edges`: for each state, the edge that first
/// reached it.
fn bfs(machine: &Machine, edges: &[Rule], start: StateId) -> Vec<Option<Rule>> {
    let mut via: Vec<Option<Rule>> = vec![None; machine.states().len()];
    let mut seen = vec![false; machine.states().len()];
    seen[start.0] = true;
    let mut queue = VecDeque::from([start]);
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
}

/// The path `bfs` found from its start to `to`, if `to` was reached.
fn walk_back(via: &[Option<Rule>], start: StateId, to: StateId) -> Option<Path> {
    let mut steps = Vec::new();
    let mut at = to;
    while at != start {
        let step = via[at.0]?;
        steps.push(step);
        at = step.origin;
    }
    steps.reverse();
    Some(Path { rules: steps })
}

impl TestPaths {
    /// Computes the shortest paths and the edge cover of `machine`.
    pub fn of(machine: &Machine) -> Self {
        let edges: Vec<Rule> = machine.rules().collect();
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
                        let mut p = walk_back(&via, initial, e.origin)?;
                        p.rules.push(*e);
                        Some(p)
                    })
                    .min_by_key(|p| p.rules.len());
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
                if let Some(i) = (0..edges.len()).find(|&i| !taken[i] && edges[i].origin == at) {
                    taken[i] = true;
                    path.rules.push(edges[i]);
                    at = edges[i].target;
                    continue;
                }
                let via = bfs(machine, &edges, at);
                let nearest = (0..edges.len())
                    .filter(|&i| !taken[i])
                    .filter_map(|i| walk_back(&via, at, edges[i].origin))
                    .min_by_key(|p| p.rules.len());
                match nearest {
                    Some(detour) => {
                        for step in &detour.rules {
                            if let Some(i) = edges.iter().position(|e| e == step) {
                                taken[i] = true;
                            }
                        }
                        at = detour.rules.last().map_or(at, |s| s.target);
                        path.rules.extend(detour.rules);
                    }
                    None => break,
                }
            }
            if path.rules.is_empty() {
                break;
            }
            cover.push(path);
        }
        let uncovered = (0..edges.len())
            .filter(|&i| !taken[i])
            .map(|i| edges[i])
            .collect();
        TestPaths {
            shortest,
            cover,
            uncovered,
        }
    }
}
