//! Fixes said in the spec file's own syntax.

use fsm_model::Help;

/// How to apply `help` to a spec file, in TOML.
///
/// ```
/// use fsm_model::Help;
/// assert_eq!(fsm_toml::help(&Help::DeclareRole("admin".into())), r#"declare it: `[roles]` `admin = "who holds it"`"#);
/// ```
pub fn help(help: &Help) -> String {
    match help {
        Help::DidYouMean(name) => format!("did you mean `{name}`?"),
        Help::NameInitial => "name it in the machine header: `initial = \"STATE\"`".into(),
        Help::DeclareRole(role) => format!("declare it: `[roles]` `{role} = \"who holds it\"`"),
        Help::DeclareGuard(guard) => {
            format!("describe it: `[guards]` `{guard} = \"what must hold\"`")
        }
        Help::DescribeGuard(guard) => format!("`{guard} = \"what must hold\"`"),
        Help::AddOrigin => "list the states it may start from: `from = [\"STATE\"]`".into(),
        Help::AddTarget => {
            "add `to = \"STATE\"`, or `to_origin = true` to return where it started".into()
        }
        Help::MarkTransition(state) => format!(
            "mark it `{state} = {{ transition = true }}`, or make `{state}` the target with `to`"
        ),
        Help::UseOrMakeStatic(state) => {
            format!("name it in an action's `via`, or make `{state}` static")
        }
        Help::LeaveOrTerminal => {
            "add an action that leaves it, or mark it `terminal = true`".into()
        }
        Help::KeepHiddenStill => "remove `via` and `to`, or make the action visible".into(),
        Help::NameOwner => {
            "add `owner = \"ROLE\"` to the state or `roles` to the actions leaving it".into()
        }
        Help::Text(text) => text.clone(),
    }
}
