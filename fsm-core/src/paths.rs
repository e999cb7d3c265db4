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
//! let node = fsm_core::spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/node.toml"))?;
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

/// The rules of a machine with, for each state, the indices of the rules that
/// start there, in rule order.
struct Graph {
    edges: Vec<Rule>,
    out: Vec<Vec<usize>>,
}

impl Graph {
    fn of(machine: &Machine) -> Graph {
        let edges: Vec<Rule> = machine.rules().collect();
        let mut out = vec![Vec::new(); machine.states().len()];
        for (i, e) in edges.iter().enumerate() {
            out[e.origin.0].push(i);
        }
        Graph { edges, out }
    }

    /// Breadth-first from `start`: for each state, the rule that first reached it
    /// (rules tried in rule order, so ties go to the rule written first).
    fn bfs(&self, start: StateId) -> Vec<Option<usize>> {
        let mut via: Vec<Option<usize>> = vec![None; self.out.len()];
        let mut seen = vec![false; self.out.len()];
        seen[start.0] = true;
        let mut queue = VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            for &i in &self.out[s.0] {
                let to = self.edges[i].target;
                if !seen[to.0] {
                    seen[to.0] = true;
                    via[to.0] = Some(i);
                    queue.push_back(to);
                }
            }
        }
        via
    }

    /// The rules a search from `start` found to `to`, read back through `via`
    /// (the rule that first reached each state), if `to` was reached.
    fn walk_back(
        &self,
        via: impl Fn(StateId) -> Option<usize>,
        start: StateId,
        to: StateId,
    ) -> Option<Vec<usize>> {
        let mut steps = Vec::new();
        let mut at = to;
        while at != start {
            let step = via(at)?;
            steps.push(step);
            at = self.edges[step].origin;
        }
        steps.reverse();
        Some(steps)
    }

    fn path(&self, steps: &[usize]) -> Path {
        Path {
            rules: steps.iter().map(|&i| self.edges[i]).collect(),
        }
    }
}

/// Which rules the cover has taken, and for each state where its first untaken
/// rule may be (every rule before it is taken), so that finding one is amortised
/// constant time.
struct Taken {
    taken: Vec<bool>,
    next: Vec<usize>,
}

impl Taken {
    fn first_untaken(&mut self, graph: &Graph, s: StateId) -> Option<usize> {
        let out = &graph.out[s.0];
        let next = &mut self.next[s.0];
        while *next < out.len() && self.taken[out[*next]] {
            *next += 1;
        }
        out.get(*next).copied()
    }
}

/// The detour from `at` to the nearest state that starts an untaken rule, as
/// rule indices: breadth-first, layer by layer, stopping at the first layer that
/// has one; in it, the origin of the untaken rule written first. `None` when no
/// untaken rule is reachable. `stamp` and `via` are scratch space reused between
/// calls (a state is seen in this search when its stamp is `round`).
fn detour(
    graph: &Graph,
    taken: &mut Taken,
    at: StateId,
    scratch: &mut (Vec<u32>, Vec<usize>, u32),
) -> Option<Vec<usize>> {
    let (stamp, via, round) = scratch;
    *round += 1;
    let round = *round;
    stamp[at.0] = round;
    let mut layer = vec![at];
    loop {
        let mut next = Vec::new();
        for &s in &layer {
            for &i in &graph.out[s.0] {
                let to = graph.edges[i].target;
                if stamp[to.0] != round {
                    stamp[to.0] = round;
                    via[to.0] = i;
                    next.push(to);
                }
            }
        }
        if next.is_empty() {
            return None;
        }
        let nearest = next
            .iter()
            .filter_map(|&s| taken.first_untaken(graph, s).map(|i| (i, s)))
            .min();
        if let Some((_, origin)) = nearest {
            // Every state of this search has its `via`.
            return graph.walk_back(|s| Some(via[s.0]), at, origin);
        }
        layer = next;
    }
}

impl TestPaths {
    /// Computes the shortest paths and the edge cover of `machine`, in time
    /// near-linear in the size of the table (a breadth-first search per detour,
    /// stopped at the nearest untaken rule).
    pub fn of(machine: &Machine) -> Self {
        let graph = Graph::of(machine);
        let initial = machine.initial();
        let via = graph.bfs(initial);

        // The rules through each transition state, in rule order.
        let mut through: Vec<Vec<usize>> = vec![Vec::new(); machine.states().len()];
        for (i, e) in graph.edges.iter().enumerate() {
            if let Some(v) = e.via {
                through[v.0].push(i);
            }
        }
        let mut shortest = Vec::new();
        for s in machine.state_ids() {
            let steps = if machine.state(s).is_transition() {
                // The shortest path to an origin of an action through `s`, plus it.
                through[s.0]
                    .iter()
                    .filter_map(|&i| {
                        let mut steps =
                            graph.walk_back(|s| via[s.0], initial, graph.edges[i].origin)?;
                        steps.push(i);
                        Some(steps)
                    })
                    .min_by_key(Vec::len)
            } else {
                graph.walk_back(|t| via[t.0], initial, s)
            };
            if let Some(steps) = steps {
                shortest.push(ShortestPath {
                    reaches: s,
                    path: graph.path(&steps),
                });
            }
        }

        // Greedy cover: from where we are, take an untaken rule if there is one,
        // else go the shortest way to the nearest state that has one; when none is
        // reachable from here, end the path and start again from the initial state.
        let n = machine.states().len();
        let mut taken = Taken {
            taken: vec![false; graph.edges.len()],
            next: vec![0; n],
        };
        let mut scratch = (vec![0u32; n], vec![0usize; n], 0u32);
        let mut cover = Vec::new();
        loop {
            let mut steps = Vec::new();
            let mut at = initial;
            loop {
                if let Some(i) = taken.first_untaken(&graph, at) {
                    taken.taken[i] = true;
                    steps.push(i);
                    at = graph.edges[i].target;
                    continue;
                }
                match detour(&graph, &mut taken, at, &mut scratch) {
                    Some(detour) => {
                        for &i in &detour {
                            taken.taken[i] = true;
                        }
                        at = detour.last().map_or(at, |&i| graph.edges[i].target);
                        steps.extend(detour);
                    }
                    None => break,
                }
            }
            if steps.is_empty() {
                break;
            }
            cover.push(graph.path(&steps));
        }
        let uncovered = (0..graph.edges.len())
            .filter(|&i| !taken.taken[i])
            .map(|i| graph.edges[i])
            .collect();
        TestPaths {
            shortest,
            cover,
            uncovered,
        }
    }
}
