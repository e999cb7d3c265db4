//! Refusals as the API answers them: a status and `{"error": kind,
//! "message", ...facts}`, and which status each refusal of the runtime is.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fsm_runtime::{RuntimeError, StoreError, rfc3339};
use serde_json::{Map, Value, json};

/// A refusal, as the API answers it: a status and `{"error": kind, "message",
/// ...facts}`.
#[derive(Debug)]
pub struct ApiError {
    pub(super) status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) message: String,
    pub(super) facts: Map<String, Value>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            facts: Map::new(),
        }
    }

    pub(super) fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.facts.insert(key.into(), value.into());
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("error".into(), json!(self.kind));
        body.insert("message".into(), json!(self.message));
        body.extend(self.facts);
        let mut response = (self.status, axum::Json(Value::Object(body))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // Every 503 passes (a store back, a place freed): say when to retry,
        // for clients and their retry policies that read it.
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// How each refusal of the runtime is answered, with its facts.
pub(super) fn refused(e: RuntimeError) -> ApiError {
    let message = e.to_string();
    match e {
        RuntimeError::NotFound { id } => {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", message).with("id", id.as_str())
        }
        RuntimeError::Exists { id, state } => {
            ApiError::new(StatusCode::CONFLICT, "exists", message)
                .with("id", id.as_str())
                .with("state", state)
        }
        RuntimeError::UnknownAction(u) => {
            let mut e = ApiError::new(StatusCode::NOT_FOUND, "unknown_action", message)
                .with("action", u.name);
            if let Some(s) = u.suggestion {
                e = e.with("did_you_mean", s);
            }
            e
        }
        RuntimeError::Busy {
            id,
            state,
            action,
            holder,
            abandoned,
        } => ApiError::new(StatusCode::CONFLICT, "busy", message)
            .with("id", id.as_str())
            .with("state", state)
            .with("action", action)
            .with("holder", holder)
            .with("abandoned", abandoned),
        RuntimeError::Conflict {
            id,
            expected_state,
            expected_version,
            found,
        } => {
            let mut e = ApiError::new(StatusCode::CONFLICT, "conflict", message)
                .with("id", id.as_str())
                .with("expected_state", expected_state)
                .with("expected_version", expected_version);
            if let Some((state, version)) = found {
                e = e.with("found_state", state).with("found_version", version);
            }
            e
        }
        RuntimeError::VersionMismatch {
            id,
            expected,
            found,
            state,
        } => ApiError::new(
            StatusCode::PRECONDITION_FAILED,
            "precondition_failed",
            message,
        )
        .with("id", id.as_str())
        .with("expected_version", expected)
        .with("found_version", found)
        .with("found_state", state),
        RuntimeError::NoRule { id, refused } => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "no_rule", message)
                .with("id", id.as_str())
                .with("refused", refused.to_string())
        }
        RuntimeError::MissingRole {
            actor,
            action,
            roles,
        } => ApiError::new(StatusCode::FORBIDDEN, "missing_role", message)
            .with("actor", actor)
            .with("action", action)
            .with("roles_required", roles),
        RuntimeError::NotOwner {
            id,
            actor,
            state,
            owner,
            ..
        } => ApiError::new(StatusCode::FORBIDDEN, "not_owner", message)
            .with("id", id.as_str())
            .with("actor", actor)
            .with("state", state)
            .with("owner", owner),
        RuntimeError::NotRemovable {
            id,
            state,
            removable,
        } => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "not_removable", message)
            .with("id", id.as_str())
            .with("state", state)
            .with("removable_in", removable),
        RuntimeError::MayNotRemove {
            id,
            actor,
            state,
            roles,
        } => ApiError::new(StatusCode::FORBIDDEN, "missing_role", message)
            .with("id", id.as_str())
            .with("actor", actor)
            .with("state", state)
            .with("roles_required", roles),
        RuntimeError::Guard {
            id, action, guard, ..
        } => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "guard", message)
            .with("id", id.as_str())
            .with("action", action)
            .with("guard", guard),
        RuntimeError::Revoked {
            id,
            action,
            fence,
            by,
        } => {
            let mut e = ApiError::new(StatusCode::CONFLICT, "revoked", message)
                .with("id", id.as_str())
                .with("action", action)
                .with("fence", fence.0);
            if let Some(by) = by {
                e = e
                    .with("revoked_by", by.by)
                    .with("revoked_at", rfc3339(by.at));
            }
            e
        }
        RuntimeError::NotHolder {
            id,
            action,
            fence,
            holder,
            actor,
        } => ApiError::new(StatusCode::FORBIDDEN, "not_holder", message)
            .with("id", id.as_str())
            .with("action", action)
            .with("fence", fence.0)
            .with("holder", holder)
            .with("actor", actor),
        RuntimeError::NoHold { id, fence } => {
            ApiError::new(StatusCode::NOT_FOUND, "not_in_flight", message)
                .with("id", id.as_str())
                .with("fence", fence.0)
        }
        RuntimeError::Store(StoreError::Unavailable { .. }) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
        }
        // The object's record, with what this request adds, is past what the
        // store takes: the same request will never be taken.
        RuntimeError::Store(StoreError::TooLarge { id, .. }) => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
                .with("id", id.as_str())
        }
        _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message),
    }
}
