//! The checked machine, built from a definition that has no error, so every
//! reference in it resolved.

use fsm_model::__private::{owned_action, owned_guard, owned_machine, owned_role, owned_state};
use fsm_model::{GuardId, Machine, StateId, Target};

use crate::resolve::{Cx, ResolvedTarget};

pub(crate) fn machine(cx: &Cx<'_>, initial: usize) -> Machine {
    let def = cx.def;
    let states = def.states.iter().map(owned_state).collect();
    let ids = |v: &[Option<usize>]| v.iter().flatten().map(|&i| StateId(i)).collect();
    let actions = def
        .actions
        .iter()
        .zip(&cx.actions)
        .map(|(d, r)| {
            let target = match &r.target {
                ResolvedTarget::State(t) => Target::State(StateId(t.unwrap_or_default())),
                ResolvedTarget::Origin | ResolvedTarget::Missing => Target::Origin,
                ResolvedTarget::PerOrigin(pairs) => Target::PerOrigin(
                    pairs
                        .iter()
                        .filter_map(|(o, t)| Some((StateId((*o)?), StateId((*t)?))))
                        .collect::<Vec<_>>()
                        .into(),
                ),
            };
            owned_action(
                d,
                ids(&r.origins),
                r.via.flatten().map(StateId),
                target,
                r.guards.iter().flatten().map(|&g| GuardId(g)).collect(),
            )
        })
        .collect();
    let guards = def
        .guards
        .iter()
        .map(|g| {
            owned_guard(
                g.name.clone(),
                g.description.clone().unwrap_or_default(),
                g.cel.clone(),
            )
        })
        .collect();
    let roles = def
        .roles
        .iter()
        .map(|r| owned_role(r.name.clone(), r.description.clone()))
        .collect();
    owned_machine(
        def.name.clone(),
        def.description.clone(),
        StateId(initial),
        def.single_mutator,
        states,
        actions,
        guards,
        roles,
    )
}
