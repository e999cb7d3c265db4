//! Guards written in the spec as CEL expressions (feature `cel`): compiled when a
//! runtime is built, evaluated over the object, the action and the actor. What a
//! user writes and sees is in the crate's documentation, "Guards in CEL".

use std::sync::Arc;

use cel::{Context, Program, Value};
use serde_json::json;

use crate::admit::GuardContext;

/// A guard's CEL expression, compiled.
pub(crate) struct CelGuard {
    name: String,
    program: Arc<Program>,
}

impl CelGuard {
    /// Compiles `expression`, or says why it is not CEL.
    pub(crate) fn compile(name: &str, expression: &str) -> Result<CelGuard, String> {
        let program = Program::compile(expression).map_err(|e| e.to_string())?;
        Ok(CelGuard {
            name: name.to_owned(),
            program: Arc::new(program),
        })
    }

    /// Whether the guard lets the action start.
    pub(crate) fn check(&self, ctx: &GuardContext<'_>) -> bool {
        match self.evaluate(ctx) {
            Ok(allowed) => allowed,
            Err(why) => {
                tracing::warn!(guard = %self.name, object = %ctx.id, "guard refused: {why}");
                false
            }
        }
    }

    fn evaluate(&self, ctx: &GuardContext<'_>) -> Result<bool, String> {
        let m = ctx.machine;
        let json = |text: Option<&str>| match text {
            Some(text) => {
                serde_json::from_str(text).map_err(|e| format!("the data is not JSON: {e}"))
            }
            None => Ok(serde_json::Value::Null),
        };
        let data = json(ctx.record.data.as_deref())?;
        let proposed = match ctx.proposed {
            Some(text) => json!({ "data": json(Some(text))? }),
            None => serde_json::Value::Null,
        };
        let mut context = Context::default();
        let object = json!({
            "id": ctx.id.as_str(),
            "state": m.state(ctx.record.state).name.as_ref(),
            "version": ctx.record.version,
            "data": data,
        });
        let actor = json!({
            "name": ctx.actor.name(),
            "roles": ctx.actor.roles().collect::<Vec<_>>(),
        });
        let bind = |context: &mut Context, name: &str, value: serde_json::Value| {
            context
                .add_variable(name, value)
                .map_err(|e| format!("`{name}` cannot be given to CEL: {e}"))
        };
        bind(&mut context, "object", object)?;
        bind(&mut context, "actor", actor)?;
        bind(&mut context, "proposed", proposed)?;
        bind(
            &mut context,
            "action",
            json!(m.action(ctx.action).name.as_ref()),
        )?;
        match self.program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("the expression answered {other:?}, not a boolean")),
            Err(e) => Err(e.to_string()),
        }
    }
}
