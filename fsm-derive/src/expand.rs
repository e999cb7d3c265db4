//! Code generation. The tables are computed here, from the checked machine, by the
//! same `Machine` methods `fsm validate` uses; the generated code is plain `match`es
//! and `const` slices.

use fsm_core::spec::{Machine, StateId, StateKind, Step, Target};
use heck::ToUpperCamelCase;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::Ident;

use crate::ast::Input;

pub fn expand(input: &Input) -> syn::Result<TokenStream> {
    let m = &input.machine;
    let krate = &input.krate;
    let vis = &input.vis;
    let ident = &input.ident;
    let action_enum = &input.action_enum;
    let markers = &input.markers;

    let action_variants = action_variants(input)?;
    let state = |id: StateId| {
        let v = &input.variants[id.0];
        quote!(#ident::#v)
    };
    let action = |id: fsm_core::ActionId| {
        let v = &action_variants[id.0];
        quote!(#action_enum::#v)
    };
    let states_where = |pred: &dyn Fn(StateId) -> bool| -> TokenStream {
        let matching: Vec<_> = m.state_ids().filter(|&s| pred(s)).map(state).collect();
        if matching.is_empty() {
            quote!(false)
        } else {
            quote!(matches!(self, #(#matching)|*))
        }
    };

    let all_states: Vec<_> = m.state_ids().map(state).collect();
    let n_states = all_states.len();
    let all_actions: Vec<_> = m.action_ids().map(action).collect();
    let n_actions = all_actions.len();
    let state_names: Vec<_> = m.states().iter().map(|s| s.name.to_string()).collect();
    let state_ids: Vec<_> = (0..n_states).collect();
    let initial = state(m.initial());
    let is_transition = states_where(&|s| m.state(s).kind == StateKind::Transition);
    let is_terminal = states_where(&|s| m.state(s).terminal);

    // Every allowed move, decided by the core machine. One bit per (from, to) as
    // well: row `from`, word `to / 64`, bit `to % 64`, a lookup with no branch,
    // which the benchmark finds faster than a `match` on unpredictable queries.
    let words = n_states.div_ceil(64).max(1);
    let mut bits = vec![vec![0u64; words]; n_states];
    let mut step_arms = Vec::new();
    let mut marker_moves = Vec::new();
    for from in m.state_ids() {
        for (to, step) in m.steps_from(from) {
            bits[from.0][to.0 / 64] |= 1 << (to.0 % 64);
            let (f, t, a) = (state(from), state(to), action(step.action()));
            let kind = match step {
                Step::Start(_) => quote!(Start),
                Step::Finish(_) => quote!(Finish),
                Step::Whole(_) => quote!(Whole),
            };
            step_arms
                .push(quote!((#f, #t) => ::core::result::Result::Ok(#krate::Step::#kind(#a)),));
            let (fm, tm) = (&input.variants[from.0], &input.variants[to.0]);
            marker_moves
                .push(quote!(impl #krate::typed::MoveTo<#markers::#tm> for #markers::#fm {}));
        }
    }
    let move_rows = bits.iter().map(|row| quote!([#(#row),*]));
    let busy: Vec<_> = m
        .state_ids()
        .filter(|&s| m.state(s).is_transition())
        .map(state)
        .collect();
    let terminal: Vec<_> = m
        .state_ids()
        .filter(|&s| m.state(s).terminal)
        .map(state)
        .collect();
    let busy_arm = (!busy.is_empty()).then(|| quote!(#(#busy)|* => #krate::typed::Refusal::Busy,));
    let terminal_arm =
        (!terminal.is_empty()).then(|| quote!(#(#terminal)|* => #krate::typed::Refusal::Terminal,));

    let successors: Vec<_> = m
        .state_ids()
        .map(|s| {
            let (f, next) = (state(s), m.successors(s).into_iter().map(state));
            quote!(#f => &[#(#next),*],)
        })
        .collect();
    let actions_from: Vec<_> = m
        .state_ids()
        .map(|s| {
            let (f, acts) = (state(s), m.actions_from(s).map(action));
            quote!(#f => &[#(#acts),*],)
        })
        .collect();

    // The action enum's tables.
    let action_names: Vec<_> = m.actions().iter().map(|a| a.name.to_string()).collect();
    let action_docs: Vec<_> = m
        .actions()
        .iter()
        .map(|a| {
            let mut doc = format!("`{}`", a.name);
            if let Some(d) = &a.description {
                doc.push_str(&format!(": {d}"));
            }
            doc
        })
        .collect();
    let origins: Vec<_> = m
        .actions()
        .iter()
        .map(|a| a.origins.iter().map(|&o| state(o)).collect::<Vec<_>>())
        .collect();
    let vias: Vec<_> = m
        .actions()
        .iter()
        .map(|a| match a.via {
            Some(v) => {
                let v = state(v);
                quote!(::core::option::Option::Some(#v))
            }
            None => quote!(::core::option::Option::None),
        })
        .collect();
    let mut target_arms = Vec::new();
    for a in m.action_ids() {
        for &o in m.action(a).origins.iter() {
            if let Some(t) = m.action(a).target_from(o) {
                let (av, os, ts) = (action(a), state(o), state(t));
                target_arms.push(quote!((#av, #os) => ::core::option::Option::Some(#ts),));
            }
        }
    }
    let changes: Vec<_> = m.actions().iter().map(|a| a.changes_state()).collect();
    let hidden: Vec<_> = m.actions().iter().map(|a| a.hidden).collect();
    let roles: Vec<_> = m
        .actions()
        .iter()
        .map(|a| a.roles.iter().map(|r| r.to_string()).collect::<Vec<_>>())
        .collect();
    let guards: Vec<_> = m
        .actions()
        .iter()
        .map(|a| {
            a.guards
                .iter()
                .map(|&g| m.guard(g).name.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let action_ids: Vec<_> = (0..n_actions).collect();

    let machine = static_machine(m, krate);
    let marker_types = &input.variants;
    let marker_vis = marker_visibility(vis);
    let rebuild = input.spec_file.as_ref().map(|path| {
        let path = path.display().to_string();
        quote!(
            const _: &[u8] = ::core::include_bytes!(#path);
        )
    });
    let name_doc = format!(
        "The state machine `{}`, generated by `#[derive(StateMachine)]`.",
        m.name()
    );
    let action_enum_doc =
        format!("The actions of [`{ident}`], generated by `#[derive(StateMachine)]`.");
    let markers_doc = format!(
        "One marker type per state of [`{ident}`]: `{krate}::typed::checked_move::<From, To>()` compiles only for moves the table allows.",
        krate = quote!(#krate).to_string().replace(' ', "")
    );
    let marker_docs: Vec<_> = state_names
        .iter()
        .map(|n| format!("The state `{n}`."))
        .collect();

    Ok(quote! {
        #rebuild

        #[doc = #action_enum_doc]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::cmp::PartialEq, ::core::cmp::Eq, ::core::hash::Hash, ::core::fmt::Debug)]
        #vis enum #action_enum {
            #( #[doc = #action_docs] #action_variants, )*
        }

        #[doc = #name_doc]
        impl #ident {
            /// Every state, in the order of the table.
            pub const ALL: [#ident; #n_states] = [#(#all_states),*];

            /// The state's name, as the spec spells it.
            pub const fn name(self) -> &'static str {
                match self { #(#all_states => #state_names,)* }
            }

            /// The state's id in [`Self::machine`].
            pub const fn id(self) -> #krate::StateId {
                match self { #(#all_states => #krate::StateId(#state_ids),)* }
            }

            /// The state with this id in [`Self::machine`], if there is one.
            pub const fn from_id(id: #krate::StateId) -> ::core::option::Option<Self> {
                if id.0 < #n_states { ::core::option::Option::Some(Self::ALL[id.0]) } else { ::core::option::Option::None }
            }

            /// The state where new objects start.
            pub const fn initial() -> Self {
                #initial
            }

            /// True for a transition state: an action is running.
            pub const fn is_transition(self) -> bool {
                #is_transition
            }

            /// True for a static state: no action is running.
            pub const fn is_static(self) -> bool {
                !self.is_transition()
            }

            /// True for a terminal state: nothing leaves it.
            pub const fn is_terminal(self) -> bool {
                #is_terminal
            }

            /// Is `from → to` one step of the table? Usable in `const` context.
            pub const fn can_transition(from: Self, to: Self) -> bool {
                const MOVES: [[u64; #words]; #n_states] = [#(#move_rows),*];
                let (from, to) = (from.id().0, to.id().0);
                MOVES[from][to / 64] >> (to % 64) & 1 != 0
            }

            /// The step of the table that allows `from → to`, or why it is refused.
            pub const fn step(from: Self, to: Self) -> ::core::result::Result<#krate::Step<#action_enum>, #krate::typed::TransitionError<Self>> {
                match (from, to) {
                    #(#step_arms)*
                    _ => ::core::result::Result::Err(#krate::typed::TransitionError { from, to, refusal: Self::refusal(from) }),
                }
            }

            /// Why no move leaves `from` for a state its row does not allow.
            #[cold]
            const fn refusal(from: Self) -> #krate::typed::Refusal {
                match from {
                    #busy_arm
                    #terminal_arm
                    #[allow(unreachable_patterns)]
                    _ => #krate::typed::Refusal::NoRule,
                }
            }

            /// `Ok(())` when `from → to` is one step of the table (an action starts,
            /// finishes, or runs whole); otherwise the error says from, to and why.
            pub const fn validate_transition(from: Self, to: Self) -> ::core::result::Result<(), #krate::typed::TransitionError<Self>> {
                if Self::can_transition(from, to) {
                    ::core::result::Result::Ok(())
                } else {
                    ::core::result::Result::Err(#krate::typed::TransitionError { from, to, refusal: Self::refusal(from) })
                }
            }

            /// The states one step of the table leads to.
            pub const fn successors(self) -> &'static [Self] {
                match self { #(#successors)* }
            }

            /// The actions that may start in this state.
            pub const fn actions_from(self) -> &'static [#action_enum] {
                match self { #(#actions_from)* }
            }

            /// The state whose name matches, ignoring ASCII case.
            pub fn from_name(name: &str) -> ::core::option::Option<Self> {
                Self::ALL.into_iter().find(|s| s.name().eq_ignore_ascii_case(name))
            }

            /// The checked machine this enum was derived from.
            pub fn machine() -> &'static #krate::Machine {
                #machine
                &MACHINE
            }

            /// The machine as a Mermaid `stateDiagram-v2`.
            pub fn mermaid() -> ::std::string::String {
                #krate::render::diagram(Self::machine(), #krate::render::Format::Mermaid)
            }

            /// The machine as Graphviz DOT.
            pub fn dot() -> ::std::string::String {
                #krate::render::diagram(Self::machine(), #krate::render::Format::Dot)
            }

            /// The machine as a PlantUML state diagram.
            pub fn plantuml() -> ::std::string::String {
                #krate::render::diagram(Self::machine(), #krate::render::Format::PlantUml)
            }
        }

        impl #action_enum {
            /// Every action, in the order of the table.
            pub const ALL: [#action_enum; #n_actions] = [#(#all_actions),*];

            /// The action's name, as the spec spells it.
            pub const fn name(self) -> &'static str {
                match self { #(#all_actions => #action_names,)* }
            }

            /// The action's id in the machine.
            pub const fn id(self) -> #krate::ActionId {
                match self { #(#all_actions => #krate::ActionId(#action_ids),)* }
            }

            /// The static states the action may start from.
            pub const fn origins(self) -> &'static [#ident] {
                match self { #(#all_actions => &[#(#origins),*],)* }
            }

            /// The transition state the object shows while the action runs.
            pub const fn via(self) -> ::core::option::Option<#ident> {
                match self { #(#all_actions => #vias,)* }
            }

            /// The state the action ends in when started from `from`.
            pub const fn target_from(self, from: #ident) -> ::core::option::Option<#ident> {
                #[allow(unreachable_patterns)]
                match (self, from) {
                    #(#target_arms)*
                    _ => ::core::option::Option::None,
                }
            }

            /// True when the action moves the object (it is not only allowed in
            /// some states, like a hidden `migrate`).
            pub const fn changes_state(self) -> bool {
                match self { #(#all_actions => #changes,)* }
            }

            /// True for a hidden action, which keeps the object's status.
            pub const fn is_hidden(self) -> bool {
                match self { #(#all_actions => #hidden,)* }
            }

            /// The roles allowed to perform it; empty means anyone.
            pub const fn roles(self) -> &'static [&'static str] {
                match self { #(#all_actions => &[#(#roles),*],)* }
            }

            /// The guards that must pass before it starts.
            pub const fn guards(self) -> &'static [&'static str] {
                match self { #(#all_actions => &[#(#guards),*],)* }
            }

            /// What running the action from `from` does: its transition state and
            /// the state it ends in (back-to-origin and per-origin targets resolved).
            pub const fn plan(self, from: #ident) -> ::core::result::Result<#krate::typed::Plan<#ident>, #krate::typed::PlanError<#ident>> {
                match self.target_from(from) {
                    ::core::option::Option::Some(target) => ::core::result::Result::Ok(#krate::typed::Plan { origin: from, via: self.via(), target }),
                    ::core::option::Option::None => ::core::result::Result::Err(#krate::typed::PlanError { action: self, state: from }),
                }
            }
        }

        impl #krate::typed::StateMachine for #ident {
            type Action = #action_enum;
            const ALL: &'static [Self] = &#ident::ALL;
            const ACTIONS: &'static [#action_enum] = &#action_enum::ALL;
            fn machine() -> &'static #krate::Machine { #ident::machine() }
            fn id(self) -> #krate::StateId { #ident::id(self) }
            fn action_id(action: #action_enum) -> #krate::ActionId { action.id() }
            fn initial() -> Self { #ident::initial() }
            fn name(self) -> &'static str { #ident::name(self) }
            fn is_transition(self) -> bool { #ident::is_transition(self) }
            fn is_terminal(self) -> bool { #ident::is_terminal(self) }
            fn step(from: Self, to: Self) -> ::core::result::Result<#krate::Step<#action_enum>, #krate::typed::TransitionError<Self>> { #ident::step(from, to) }
            fn can_transition(from: Self, to: Self) -> bool { #ident::can_transition(from, to) }
            fn successors(self) -> &'static [Self] { #ident::successors(self) }
            fn actions_from(self) -> &'static [#action_enum] { #ident::actions_from(self) }
        }

        impl ::core::convert::From<#ident> for #krate::StateId {
            fn from(state: #ident) -> Self { state.id() }
        }

        impl ::core::convert::From<#action_enum> for #krate::ActionId {
            fn from(action: #action_enum) -> Self { action.id() }
        }

        // The module names nothing outside it, and the impls stand beside the enum,
        // so both work wherever the enum is declared, a function body included.
        #[doc = #markers_doc]
        #vis mod #markers {
            #(
                #[doc = #marker_docs]
                #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug)]
                #marker_vis struct #marker_types;
            )*
        }
        #(
            impl #krate::typed::StateMarker for #markers::#marker_types {
                type Machine = #ident;
                const STATE: #ident = #ident::#marker_types;
            }
        )*
        #(#marker_moves)*
    })
}

/// The marker structs live one module below the enum and must be seen exactly where
/// the enum is.
fn marker_visibility(vis: &syn::Visibility) -> TokenStream {
    match vis {
        syn::Visibility::Public(_) => quote!(pub),
        syn::Visibility::Inherited => quote!(pub(super)),
        syn::Visibility::Restricted(r) if r.path.is_ident("crate") => quote!(pub(crate)),
        syn::Visibility::Restricted(r) if r.path.is_ident("super") => quote!(pub(in super::super)),
        syn::Visibility::Restricted(r) if r.path.is_ident("self") => quote!(pub(super)),
        syn::Visibility::Restricted(r) => {
            let path = &r.path;
            if path.leading_colon.is_none()
                && path.segments.first().is_some_and(|s| s.ident == "crate")
            {
                quote!(pub(in #path))
            } else {
                quote!(pub(in super::#path))
            }
        }
    }
}

/// The action enum's variants: the actions' names in UpperCamelCase, which must stay
/// distinct.
fn action_variants(input: &Input) -> syn::Result<Vec<Ident>> {
    let mut out: Vec<Ident> = Vec::new();
    for a in input.machine.actions() {
        let camel = a.name.to_upper_camel_case();
        let ident = syn::parse_str::<Ident>(&camel).unwrap_or_else(|_| format_ident!("_{camel}"));
        let ident = Ident::new(&ident.to_string(), input.ident.span());
        if let Some(prev) = out.iter().position(|o| *o == ident) {
            return Err(syn::Error::new(
                input.ident.span(),
                format!(
                    "actions `{}` and `{}` both become the variant `{ident}` of {}",
                    input.machine.actions()[prev].name,
                    a.name,
                    input.action_enum
                ),
            ));
        }
        out.push(ident);
    }
    Ok(out)
}

fn opt_str(s: Option<&str>) -> TokenStream {
    match s {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    }
}

/// The machine as `static` items built by `__private` constructors, the last one
/// `MACHINE`.
fn static_machine(m: &Machine, krate: &syn::Path) -> TokenStream {
    let p = quote!(#krate::__private);
    let id = |s: StateId| {
        let i = s.0;
        quote!(#krate::StateId(#i))
    };
    let states = m.states().iter().map(|s| {
        let name = s.name.as_ref();
        let kind = match s.kind {
            StateKind::Static => quote!(#krate::StateKind::Static),
            StateKind::Transition => quote!(#krate::StateKind::Transition),
        };
        let (terminal, persisted) = (s.terminal, s.persisted);
        let owner = opt_str(s.owner.as_deref());
        let description = opt_str(s.description.as_deref());
        quote!(#p::state(#name, #kind, #terminal, #persisted, #owner, #description))
    });
    let actions = m.actions().iter().map(|a| {
        let name = a.name.as_ref();
        let origins = a.origins.iter().map(|&o| id(o));
        let via = match a.via {
            Some(v) => {
                let v = id(v);
                quote!(::core::option::Option::Some(#v))
            }
            None => quote!(::core::option::Option::None),
        };
        let target = match &a.target {
            Target::State(t) => {
                let t = id(*t);
                quote!(#krate::Target::State(#t))
            }
            Target::Origin => quote!(#krate::Target::Origin),
            Target::PerOrigin(pairs) => {
                let pairs = pairs.iter().map(|&(o, t)| {
                    let (o, t) = (id(o), id(t));
                    quote!((#o, #t))
                });
                quote!(#p::per_origin(&[#(#pairs),*]))
            }
        };
        let roles = a.roles.iter().map(|r| {
            let r = r.as_ref();
            quote!(::std::borrow::Cow::Borrowed(#r))
        });
        let guards = a.guards.iter().map(|g| {
            let g = g.0;
            quote!(#krate::spec::GuardId(#g))
        });
        let hidden = a.hidden;
        let description = opt_str(a.description.as_deref());
        quote!(#p::action(#name, &[#(#origins),*], #via, #target, &[#(#roles),*], &[#(#guards),*], #hidden, #description))
    });
    let guards = m.guards().iter().map(|g| {
        let (name, description) = (g.name.as_ref(), g.description.as_ref());
        quote!(#p::guard(#name, #description))
    });
    let roles = m.roles().iter().map(|r| {
        let name = r.name.as_ref();
        let description = opt_str(r.description.as_deref());
        quote!(#p::role(#name, #description))
    });
    let name = m.name();
    let description = opt_str(m.description());
    let initial = id(m.initial());
    let single = m.single_mutator();
    let (n_states, n_actions, n_guards, n_roles) = (
        m.states().len(),
        m.actions().len(),
        m.guards().len(),
        m.roles().len(),
    );
    // Results of const fns are not promoted to `'static`, so each table is a static.
    quote! {
        static STATES: [#krate::State; #n_states] = [#(#states),*];
        static ACTIONS: [#krate::Action; #n_actions] = [#(#actions),*];
        static GUARDS: [#krate::spec::Guard; #n_guards] = [#(#guards),*];
        static ROLES: [#krate::spec::Role; #n_roles] = [#(#roles),*];
        static MACHINE: #krate::Machine = #p::machine(#name, #description, #initial, #single, &STATES, &ACTIONS, &GUARDS, &ROLES);
    }
}
