//! What a request's path, query and headers say, each refused as the API
//! refuses (a JSON error naming the parameter), not as axum does.

use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::Deserialize;

use super::error::ApiError;

/// axum's `Path`, refused as the API refuses: a JSON error (a path segment that
/// is not UTF-8 once decoded, say) whose `parameter` names the segment as the
/// OpenAPI document does, not axum's plain text.
pub(super) struct Path<T>(pub(super) T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        axum::extract::Path::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|e| {
                let key = match &e {
                    PathRejection::FailedToDeserializePathParams(failed) => match failed.kind() {
                        ErrorKind::InvalidUtf8InPathParam { key }
                        | ErrorKind::ParseErrorAtKey { key, .. }
                        | ErrorKind::DeserializeError { key, .. } => Some(key.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                let refused = ApiError::new(e.status(), "malformed", e.body_text());
                match key {
                    Some(key) => refused.with("parameter", key),
                    None => refused,
                }
            })
    }
}

/// A call's query parameters, refused as a JSON error whose `parameter` names
/// the one at fault (`{"error": "malformed", "parameter": "run", "message":
/// "the query's `run`: provided string was not `true` or `false`"}`), not as
/// plain text.
///
/// Every `/v1` call reads its query through one, and every query type denies
/// unknown fields: a misspelt parameter is a 400, not ignored. (`?rn=true`
/// ignored would start and hold the action where `?run=true` runs it.)
pub(super) struct Query<T>(pub(super) T);

/// The query of a call that takes no parameters: any is refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoQuery {}

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default().as_bytes();
        // A parameter given twice is named here: serde's own refusal of a
        // duplicate field does not say which.
        let mut given = std::collections::HashSet::new();
        if let Some((twice, _)) =
            form_urlencoded::parse(query).find(|(k, _)| !given.insert(k.clone()))
        {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed",
                format!("the query gives `{twice}` twice"),
            )
            .with("parameter", twice.into_owned()));
        }
        let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query));
        serde_path_to_error::deserialize(pairs)
            .map(Query)
            .map_err(|e| {
                let parameter = e.path().to_string();
                let e = e.into_inner();
                // A mistake of the whole query (none names a parameter) has
                // the path `.`.
                if parameter == "." {
                    return ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "malformed",
                        format!("the query: {e}"),
                    );
                }
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "malformed",
                    format!("the query's `{parameter}`: {e}"),
                )
                .with("parameter", parameter)
            })
    }
}

/// The query of `GET /v1/watch`: `machine`, once per machine to follow
/// (none: every machine). Read here rather than by [`Query`], which refuses a
/// parameter given twice.
pub(super) struct Followed(pub(super) Option<std::collections::BTreeSet<String>>);

impl<S: Send + Sync> FromRequestParts<S> for Followed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default().as_bytes();
        let mut names = std::collections::BTreeSet::new();
        for (key, value) in form_urlencoded::parse(query) {
            let refused = |message: String| {
                ApiError::new(StatusCode::BAD_REQUEST, "malformed", message)
                    .with("parameter", key.to_string())
            };
            if key != "machine" {
                return Err(refused(format!(
                    "the query's `{key}`: unknown field `{key}`, expected `machine`"
                )));
            }
            if value.is_empty() {
                return Err(refused(
                    "the query's `machine`: a machine's name, not empty".into(),
                ));
            }
            names.insert(value.into_owned());
        }
        Ok(Followed((!names.is_empty()).then_some(names)))
    }
}

/// A body as JSON, or 400 with the position of the mistake (or 413 when too big).
pub(super) fn parse<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let body = body.map_err(|e| {
        ApiError::new(
            e.status(),
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                "too_large"
            } else {
                "malformed"
            },
            e.body_text(),
        )
    })?;
    if body.trim_ascii().is_empty() {
        // (serde_json would say "EOF ... at line 1 column 0": its columns
        // start at 1, and 0 there means before the first character.)
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            "the body is empty: a JSON body is expected",
        )
        .with("line", 1)
        .with("column", 1));
    }
    serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            format!("the body is not the JSON expected: {e}"),
        )
        .with("line", e.line())
        .with("column", e.column())
    })
}

#[cfg(test)]
mod tests {
    use axum::extract::FromRequestParts;
    use axum::http::StatusCode;
    use serde::Deserialize;

    use super::Query;

    /// A query with a parameter it cannot go without.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Required {
        action: String,
    }

    /// A mistake of the whole query, which names no parameter (one the call
    /// cannot go without is missing), is refused as the query's, with no
    /// `parameter`; a parameter the query does not take is named.
    #[tokio::test(flavor = "current_thread")]
    async fn a_query_missing_what_it_needs_is_refused_whole() {
        let read = async |uri: &str| {
            let request = axum::http::Request::builder().uri(uri).body(()).unwrap();
            let (mut parts, ()) = request.into_parts();
            let read = Query::<Required>::from_request_parts(&mut parts, &()).await;
            read.map(|Query(query)| query.action)
        };
        let refused = async |uri: &str| read(uri).await.unwrap_err();
        assert_eq!(read("/x?action=a").await.unwrap(), "a");
        let whole = refused("/x?").await;
        assert_eq!(
            (whole.status, whole.kind, whole.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                "malformed",
                "the query: missing field `action`"
            )
        );
        assert!(!whole.facts.contains_key("parameter"), "{:?}", whole.facts);
        let named = refused("/x?action=a&run=yes").await;
        assert_eq!(named.facts["parameter"], "run");
    }
}
