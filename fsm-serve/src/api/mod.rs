//! The REST API: its routes and their calls. Apart: refusals as JSON and the
//! status of each refusal of the runtime ([`error`]), what a request's path,
//! query and headers say ([`extract`]), and the watch streams ([`watch`](mod@watch)).

mod error;
mod extract;
mod watch;

use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use fsm_runtime::{Actor, Fence, ObjectId, Record, RuntimeError, Store, StoreError};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use self::error::{ApiError, refused};
use self::extract::{NoQuery, Path, Query, parse};
use self::watch::{watch, watch_all};
use crate::census::Census;
use crate::json::{entry_json, object_json};
use crate::{MachineService, Service};

/// The bearer's actor, or 401.
fn actor(service: &Service, headers: &HeaderMap) -> Result<Actor, ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "an `Authorization: Bearer <token>` header is required",
            )
        })?;
    service.tokens().actor(presented.trim()).ok_or_else(|| {
        tracing::warn!("refused: unknown token");
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "unknown token")
    })
}

fn machine<'s>(service: &'s Service, name: &str) -> Result<&'s Arc<MachineService>, ApiError> {
    service.machines.get(name).ok_or_else(|| {
        let known: Vec<&str> = service.machines.keys().map(String::as_str).collect();
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_machine",
            format!(
                "no machine `{name}`; this service has: {}",
                known.join(", ")
            ),
        )
        .with("machine", name)
    })
}

/// Runs an action's runtime calls, in their async forms, as a task of their
/// own: a store's write goes to its end, and a handle it made is ended or let
/// go, even when the request is dropped (its client gone) meanwhile, as
/// [`blocking`] work does; without the hop to a blocking thread and back,
/// which took more than a quarter of a request's time (BENCHMARKS.md).
///
/// What the work returns to a request that is gone (a started action's handle,
/// whose drop records it abandoned: a store call that blocks) is dropped on a
/// blocking thread, not on the async worker that ran the task.
async fn in_task<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, RuntimeError>> + Send + 'static,
) -> Result<T, RuntimeError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        if let Err(unclaimed) = tx.send(work.await) {
            tokio::task::spawn_blocking(move || drop(unclaimed));
        }
    });
    match rx.await {
        Ok(done) => done,
        // The task ended without sending: it panicked, or the runtime shut
        // down under it (the service stopping).
        Err(_) => match task.await {
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            _ => Err(RuntimeError::Store(StoreError::Unavailable {
                message: "the service is stopping".to_owned(),
                retryable: true,
            })),
        },
    }
}

/// Runs blocking runtime work off the async workers: what reads many records.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, RuntimeError> + Send + 'static,
) -> Result<T, RuntimeError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

fn with_etag(status: StatusCode, body: Value, version: u64) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    tag(&mut response, version);
    response
}

/// Tags `response` with the object's `version`: `ETag: "<version>"`.
fn tag(response: &mut Response, version: u64) {
    if let Ok(tag) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, tag);
    }
}

/// Logs a refusal with the actor and what refused, never the token.
fn logged(actor: &Actor, what: &str, e: RuntimeError) -> ApiError {
    log(actor, what, refused(e))
}

/// `answer`, but an object's 404 (`not_found`) for an id whose object was
/// removed, and not created again since, carries the removal's entry as
/// `removed`: who removed it, when, in which state. (Should the store fail
/// to say, the plain 404 is answered and the failure logged.)
async fn or_removed<T>(m: &MachineService, answer: Result<T, ApiError>) -> Result<T, ApiError> {
    let e = match answer {
        Err(e) if e.status == StatusCode::NOT_FOUND && e.kind == "not_found" => e,
        other => return other,
    };
    let Some(Value::String(id)) = e.facts.get("id") else {
        return Err(e);
    };
    match m.runtime.removal_of_async(id.as_str()).await {
        Ok(Some(entry)) => Err(e.with("removed", entry_json(m.runtime.machine(), &entry))),
        Ok(None) => Err(e),
        Err(lookup) => {
            tracing::warn!(%id, error = %lookup, "the removal of a missing object did not read");
            Err(e)
        }
    }
}

/// Logs a refusal as answered, with the actor and what refused.
fn log(actor: &Actor, what: &str, e: ApiError) -> ApiError {
    tracing::info!(
        actor = actor.name(),
        request = what,
        error = e.kind,
        "refused: {}",
        e.message
    );
    e
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    id: String,
    #[serde(default)]
    data: Option<Value>,
}

async fn create(
    State(service): State<Arc<Service>>,
    Path(name): Path<String>,
    Query(NoQuery {}): Query<NoQuery>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let actor = actor(&service, &headers)?;
    let m = machine(&service, &name)?.clone();
    let create: Create = parse(body)?;
    if create.id.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            "`id` is empty",
        ));
    }
    let data: Option<std::sync::Arc<str>> = create
        .data
        .filter(|d| !d.is_null())
        .map(|d| d.to_string().into());
    let (rt, id, who) = (m.runtime.clone(), create.id.clone(), actor.clone());
    let record = in_task(async move { rt.create_with_async(id, &who, data).await })
        .await
        .map_err(|e| logged(&actor, "create", e))?;
    let body = object_json(m.runtime.machine(), &create.id, &record);
    Ok(with_etag(StatusCode::CREATED, body, record.version))
}

async fn get_object(
    State(service): State<Arc<Service>>,
    Path((name, id)): Path<(String, String)>,
    Query(NoQuery {}): Query<NoQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = actor(&service, &headers)?;
    let m = machine(&service, &name)?.clone();
    let (rt, key) = (m.runtime.clone(), id.clone());
    let got = in_task(async move { rt.get_async(key).await }).await;
    let record = or_removed(&m, got.map_err(|e| logged(&actor, "get", e))).await?;
    if unchanged(&headers, record.version)? {
        let mut response = StatusCode::NOT_MODIFIED.into_response();
        tag(&mut response, record.version);
        return Ok(response);
    }
    let body = object_json(m.runtime.machine(), &id, &record);
    Ok(with_etag(StatusCode::OK, body, record.version))
}

/// Whether the request's `If-None-Match` names the object's `version`: then
/// the client's copy is current, and a read answers 304 without a body. The
/// header is a list of entity tags compared weakly (`W/"3"` matches version 3),
/// possibly empty, or `*` (any version of an object that exists), as RFC 9110
/// has it; one that is neither is refused as malformed, naming it.
fn unchanged(headers: &HeaderMap, version: u64) -> Result<bool, ApiError> {
    let Some(value) = headers.get(header::IF_NONE_MATCH) else {
        return Ok(false);
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    let text = text.trim();
    if text == "*" {
        return Ok(true);
    }
    if text.is_empty() {
        // An empty list of entity tags (RFC 9110): none names the version.
        return Ok(false);
    }
    let malformed = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            format!(
                "If-None-Match must be `*` or entity tags separated by commas (\"<version>\" or W/\"<version>\"), not `{text}`"
            ),
        )
        .with("parameter", "If-None-Match")
        .with("if_none_match", text)
    };
    let current = version.to_string();
    let (mut rest, mut matched, mut tags) = (text, false, 0);
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            break;
        }
        let quoted = rest.strip_prefix("W/").unwrap_or(rest);
        let (tag, after) = quoted
            .strip_prefix('"')
            .and_then(|t| t.split_once('"'))
            .ok_or_else(malformed)?;
        // Tags are separated by commas: anything else after one is not a tag.
        if !after.trim_start().is_empty() && !after.trim_start().starts_with(',') {
            return Err(malformed());
        }
        matched |= tag == current;
        tags += 1;
        rest = after;
    }
    if tags == 0 {
        return Err(malformed());
    }
    Ok(matched)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Only the objects in this state.
    state: Option<String>,
    /// At most this many objects, with `next` when objects past the last remain.
    limit: Option<NonZeroU64>,
    /// Only the objects past this one (the `next` of the page before).
    after: Option<String>,
}

/// How many records a listing in one state reads from the store at a time
/// at least: a state few objects are in is not looked for a few at a time.
const LIST_CHUNK: usize = 1_000;

/// `GET /v1/<machine>/objects`: the objects (in a state), all of them sorted by
/// id, or a page of them (`limit`, `after`) with the id to list the next page
/// after (`next`); the records met that cannot be read, named apart; and the
/// event id a watch resumes after (`Last-Event-ID`) to meet every write the
/// list may not show (`last_event_id`).
async fn list(
    State(service): State<Arc<Service>>,
    Path(name): Path<String>,
    Query(query): Query<ListQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = actor(&service, &headers)?;
    let m = machine(&service, &name)?.clone();
    let machine_def = m.runtime.machine();
    let wanted = match &query.state {
        Some(s) => Some(machine_def.state_id(s).ok_or_else(|| {
            let mut e = ApiError::new(
                StatusCode::BAD_REQUEST,
                "unknown_state",
                format!("`{s}` is not a state of {}", machine_def.name()),
            )
            .with("state", s.as_str());
            if let Some(close) = machine_def.suggest_state(s) {
                e = e.with("did_you_mean", close);
            }
            e
        })?),
        None => None,
    };
    // Numbered before the store is read: a write numbered past it may be
    // missing from the list, and one numbered at or before it is not.
    let last_event_id = m.feed.last_numbered();
    let rt = m.runtime.clone();
    let (listing, next) = blocking(move || {
        let (store, machine) = (rt.store(), rt.machine());
        let mut listing = Listing::default();
        if query.limit.is_none() && query.after.is_none() {
            // Every record at once (on etcd, one transaction), sorted by id.
            let records = store.records().map_err(RuntimeError::Store)?;
            for (id, record) in &records {
                listing.look(machine, wanted, id, record);
            }
            return Ok((listing, None));
        }
        // A page: read from the store a page at a time, in its order, until
        // `limit` objects are listed and one more record shows that more
        // remain (without a state, one read of `limit` and one more).
        let limit = page_size(query.limit);
        let chunk = match wanted {
            None => limit.saturating_add(1),
            Some(_) => limit.saturating_add(1).max(LIST_CHUNK),
        };
        let mut after = query.after.map(ObjectId::from);
        loop {
            let page = store
                .records_after(after.as_ref(), chunk)
                .map_err(RuntimeError::Store)?;
            let full = page.len() == chunk;
            for (id, record) in page {
                if listing.objects.len() == limit {
                    // A record past the last object listed: `after` is that
                    // object's id.
                    return Ok((listing, after));
                }
                listing.look(machine, wanted, &id, &record);
                after = Some(id);
            }
            if !full {
                return Ok((listing, None));
            }
        }
    })
    .await
    .map_err(|e| logged(&actor, "list", e))?;
    let mut body = json!({ "objects": listing.objects, "last_event_id": last_event_id });
    if !listing.unreadable.is_empty() {
        body["unreadable"] = json!(listing.unreadable);
    }
    if let Some(next) = next {
        body["next"] = json!(next.as_str());
    }
    Ok(axum::Json(body).into_response())
}

/// How many a page of a list or a history holds: `limit`, or every one.
fn page_size(limit: Option<NonZeroU64>) -> usize {
    limit.map_or(usize::MAX, |limit| {
        usize::try_from(limit.get()).unwrap_or(usize::MAX)
    })
}

/// What a list answers besides `next`: the objects, and the records it met
/// that cannot be read.
#[derive(Default)]
struct Listing {
    objects: Vec<Value>,
    unreadable: Vec<Value>,
}

impl Listing {
    /// Lists the object if it is in the state `wanted` (any: `None`); a record
    /// that cannot be read is in no state the service can tell, so it is named
    /// apart whatever the state asked.
    fn look(
        &mut self,
        machine: &fsm_core::Machine,
        wanted: Option<fsm_core::StateId>,
        id: &ObjectId,
        record: &Result<Record, StoreError>,
    ) {
        match record {
            Ok(record) if wanted.is_none_or(|s| s == record.state) => {
                self.objects.push(object_json(machine, id.as_str(), record));
            }
            Ok(_) => {}
            Err(e) => self
                .unreadable
                .push(json!({ "id": id.as_str(), "message": e.to_string() })),
        }
    }
}

/// `GET /v1/<machine>/summary`: what a view of the whole machine needs (the
/// page's), without every object: how many are in each state (every state of
/// the spec, zeros included), the objects an action holds (each with how many
/// requests wait for it here, `?wait`), how many are past their deadline, how
/// many records cannot be read, and how many requests wait on this service.
/// One look at each record ([`Census`]); its answer grows with the objects
/// held, not with all of them.
/// Its `last_event_id` is the list's: where a watch that keeps the summary up
/// to date starts.
async fn summary(
    State(service): State<Arc<Service>>,
    Path(name): Path<String>,
    Query(NoQuery {}): Query<NoQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = actor(&service, &headers)?;
    let m = machine(&service, &name)?.clone();
    // As the list's: a watch resumed after it meets every write the summary
    // may not count.
    let last_event_id = m.feed.last_numbered();
    let rt = m.runtime.clone();
    let census = blocking(move || Census::take(&rt, SystemTime::now()))
        .await
        .map_err(|e| logged(&actor, "summary", e))?;
    let machine_def = m.runtime.machine();
    let states: Map<String, Value> = machine_def
        .states()
        .iter()
        .zip(&census.per_state)
        .map(|(state, n)| (state.name.to_string(), json!(n)))
        .collect();
    let turns = &m.feed.turns;
    let held: Vec<Value> = census
        .held
        .iter()
        .map(|(id, record)| {
            let mut object = object_json(machine_def, id.as_str(), record);
            object["waiting"] = json!(turns.waiting_for(id.as_str()));
            object
        })
        .collect();
    Ok(axum::Json(json!({
        "machine": machine_def.name(),
        "total": census.total(),
        "states": states,
        "in_flight": held,
        "stuck": census.stuck,
        "unreadable": census.unreadable,
        "waiting": turns.waiting(),
        "last_event_id": last_event_id,
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionQuery {
    #[serde(default)]
    run: bool,
    /// Seconds to wait for the object while an action holds it.
    #[serde(default)]
    wait: u64,
}

/// The query of a removal: how long to wait for the object while an action
/// holds it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    #[serde(default)]
    wait: u64,
}

/// What an `If-Match` header asks of the object's version.
enum IfMatch {
    /// No header, or `*`.
    Any,
    /// `"<version>"`.
    At(u64),
    /// An empty field (RFC 9110: an empty list of entity tags), a version
    /// past `u64`, or a weak tag (`W/"<version>"`: If-Match compares strongly,
    /// so a weak tag never matches), as written: no version the object can be
    /// at.
    Never(String),
}

impl IfMatch {
    /// Read from the request's headers. Anything but one ETag or `*` (a list
    /// of several tags among them) is refused as malformed, as
    /// `/openapi.json` documents the header.
    fn read(headers: &HeaderMap) -> Result<IfMatch, ApiError> {
        let Some(value) = headers.get(header::IF_MATCH) else {
            return Ok(IfMatch::Any);
        };
        let text = String::from_utf8_lossy(value.as_bytes());
        let text = text.trim();
        if value.is_empty() {
            return Ok(IfMatch::Never(String::new()));
        }
        if text == "*" {
            return Ok(IfMatch::Any);
        }
        let (weak, tag) = match text.strip_prefix("W/") {
            Some(tag) => (true, tag),
            None => (false, text),
        };
        match tag.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                match digits.parse() {
                    Ok(version) if !weak => Ok(IfMatch::At(version)),
                    _ => Ok(IfMatch::Never(text.to_owned())),
                }
            }
            _ => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed",
                format!("If-Match must be one ETag this service gave (\"<version>\") or `*`, not `{text}`"),
            )
            .with("parameter", "If-Match")
            .with("if_match", text)),
        }
    }

    /// The version the runtime is to find. `Never` asks for version 0, which
    /// no object is at (its creation writes version 1 or later): the runtime's own
    /// checks (the action, the object) then come first, as RFC 9110 has a
    /// precondition weighed only for a request that would otherwise succeed,
    /// and the condition fails as a stale version's does.
    fn version(&self) -> Option<u64> {
        match self {
            IfMatch::Any => None,
            IfMatch::At(version) => Some(*version),
            IfMatch::Never(_) => Some(0),
        }
    }

    /// A refusal, its 412 saying why when the header named no version.
    fn explain(&self, mut e: ApiError) -> ApiError {
        if let IfMatch::Never(text) = self
            && e.status == StatusCode::PRECONDITION_FAILED
        {
            e.message = if text.starts_with("W/") {
                format!(
                    "If-Match `{text}` is a weak tag, which never matches: If-Match compares \
                     entity tags strongly (RFC 9110), and this service gives only strong ones"
                )
            } else {
                format!("If-Match `{text}` names no version the object can be at")
            };
            e.facts.remove("expected_version");
            e.facts.insert("if_match".into(), text.as_str().into());
        }
        e
    }
}

async fn start(
    State(service): State<Arc<Service>>,
    Path((name, id, action)): Path<(String, String, String)>,
    Query(query): Query<ActionQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Turn {
        actor,
        m,
        condition,
        version,
        wait,
    } = Turn::read(&service, &headers, &name, query.wait)?;
    let attempt = || {
        let (rt, key, who, action) = (m.runtime.clone(), id.clone(), actor.clone(), action.clone());
        in_task(async move {
            if query.run {
                // Started and completed at once, the clock read once.
                let ran = match version {
                    Some(at) => rt.run_at_async(key, at, &who, action.as_str()).await,
                    None => rt.run_async(key, &who, action.as_str()).await,
                };
                return ran.map(|r| (r, None));
            }
            // The record as the start wrote it: no read after, which would
            // cost a request on etcd and could fail with the action held.
            let started = rt.start_with_record_async(key, version, &who, action.as_str(), None);
            let (flight, record) = started.await?;
            Ok((record, Some(flight.into_owned())))
        })
    };
    let started = in_turn(&m, &id, &wait, attempt).await;
    let started = started.map_err(|e| conditional_refusal(&m, &actor, "start", &condition, e));
    let started = or_removed(&m, started).await?;
    let (record, flight) = started;
    let mut body = object_json(m.runtime.machine(), &id, &record);
    let status = match flight {
        Some(flight) => {
            let fence = flight.fence().0;
            body["fence"] = json!(fence);
            body["in_flight_url"] = json!(format!("/v1/{name}/objects/{id}/in-flight/{fence}"));
            let flight = crate::flights::Flight {
                handle: flight,
                actor: actor.name().to_owned(),
            };
            if let Some(ended) = service
                .flights
                .keep((name.clone(), id.clone(), fence), flight)
            {
                // Ended by another service already: dropped, the handle finds
                // its hold gone and writes nothing (a store call).
                tokio::task::spawn_blocking(move || drop(ended));
            }
            StatusCode::CREATED
        }
        None => StatusCode::OK,
    };
    Ok(with_etag(status, body, record.version))
}

/// How long a request may wait for a busy object (`?wait=SECONDS`).
struct Wait {
    time: Duration,
    /// Its place among the requests that may wait (none for no wait).
    _place: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// How long a request may wait for a busy object (`?wait=SECONDS`), with its
/// place among those that may; or its refusal, past the service's longest
/// wait ([`Config::max_wait`](crate::Config::max_wait)), 400, or when as many
/// as may wait already ([`Config::max_waiting`](crate::Config::max_waiting)),
/// 503.
fn wait_for(service: &Service, seconds: u64) -> Result<Wait, ApiError> {
    let most = service.max_wait.as_secs();
    if seconds > most {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            format!("the query's `wait`: at most {most} seconds on this service, not {seconds}"),
        )
        .with("parameter", "wait")
        .with("max_wait", most));
    }
    let place = match seconds {
        0 => None,
        _ => Some(service.waiting.clone().try_acquire_owned().map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_waiting",
                format!(
                    "this service lets no more requests wait for busy objects (at most {} at once)",
                    service.max_waiting
                ),
            )
        })?),
    };
    Ok(Wait {
        time: Duration::from_secs(seconds),
        _place: place,
    })
}

/// What a write that takes its turn on an object (a start, a data change, a
/// removal) reads of its request first: who asks, the machine, the
/// `If-Match` and the version it names, and the `?wait`.
struct Turn {
    actor: Actor,
    m: Arc<MachineService>,
    condition: IfMatch,
    version: Option<u64>,
    wait: Wait,
}

impl Turn {
    /// Read in this order, the first refusal answered: the actor (401), the
    /// machine (404), the `If-Match` (400), the wait (400, 503).
    fn read(
        service: &Service,
        headers: &HeaderMap,
        name: &str,
        wait: u64,
    ) -> Result<Turn, ApiError> {
        let actor = actor(service, headers)?;
        let m = machine(service, name)?.clone();
        let condition = IfMatch::read(headers)?;
        let version = condition.version();
        let wait = wait_for(service, wait)?;
        Ok(Turn {
            actor,
            m,
            condition,
            version,
            wait,
        })
    }
}

/// `attempt`'s answer; with a `wait`, tried in the object's line (after the
/// requests that waited before it, again at each of its writes) for as long
/// as it is refused because an action holds the object, within `wait`.
async fn in_turn<T, F>(
    m: &MachineService,
    id: &str,
    wait: &Wait,
    attempt: impl FnMut() -> F,
) -> Result<T, RuntimeError>
where
    F: std::future::Future<Output = Result<T, RuntimeError>>,
{
    let mut attempt = attempt;
    if wait.time.is_zero() {
        return attempt().await;
    }
    let deadline = tokio::time::Instant::now() + wait.time;
    let busy = |e: &RuntimeError| matches!(e, RuntimeError::Busy { .. });
    m.feed.turns.take(id, deadline, attempt, busy).await
}

/// The refusal of a request made under `condition` (its `If-Match`), logged,
/// a lost compare-and-set counted.
fn conditional_refusal(
    m: &MachineService,
    actor: &Actor,
    what: &str,
    condition: &IfMatch,
    e: RuntimeError,
) -> ApiError {
    if matches!(e, RuntimeError::Conflict { .. }) {
        m.feed.counters.conflicts.fetch_add(1, Ordering::Relaxed);
    }
    log(actor, what, condition.explain(refused(e)))
}

/// `DELETE /v1/{machine}/objects/{id}`: removes the object, if its state
/// allows it to the actor's roles and no action holds it (`If-Match` as a
/// start's); 200 and the removal's history entry, which watchers get as the
/// object's last `write`.
async fn remove(
    State(service): State<Arc<Service>>,
    Path((name, id)): Path<(String, String)>,
    Query(query): Query<WaitQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Turn {
        actor,
        m,
        condition,
        version,
        wait,
    } = Turn::read(&service, &headers, &name, query.wait)?;
    let attempt = || {
        let (rt, key, who) = (m.runtime.clone(), id.clone(), actor.clone());
        in_task(async move { rt.remove_async(key, version, &who).await })
    };
    let removed = in_turn(&m, &id, &wait, attempt)
        .await
        .map_err(|e| conditional_refusal(&m, &actor, "remove", &condition, e));
    let removed = or_removed(&m, removed).await?;
    let mut body = entry_json(m.runtime.machine(), &removed);
    body.insert("id".into(), id.into());
    Ok((StatusCode::OK, axum::Json(Value::Object(body))).into_response())
}

async fn finish(
    service: Arc<Service>,
    name: String,
    id: String,
    token: String,
    headers: HeaderMap,
    complete: bool,
) -> Result<Response, ApiError> {
    let actor = actor(&service, &headers)?;
    let m = machine(&service, &name)?.clone();
    let fence: u64 = token.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            format!("`{token}` is not a fence token"),
        )
        .with("parameter", "token")
    })?;
    let key = (name.clone(), id.clone(), fence);
    // The handle this service kept at the start, if it has it; otherwise the
    // action is taken up from the store by its fence (started by another
    // process on the same store, before a restart, or kept no longer after
    // a completion the store could not write), for the actor who started it.
    let flight = {
        let mut flights = service.flights.lock();
        match flights.handles.get(&key) {
            None => None,
            // The runtime's own refusal, as a resumed action would get it.
            Some(f) if f.actor != actor.name() => {
                let refused = RuntimeError::NotHolder {
                    id: id.as_str().into(),
                    action: m
                        .runtime
                        .machine()
                        .action(f.handle.action())
                        .name
                        .to_string(),
                    fence: Fence(fence),
                    holder: f.actor.clone(),
                    actor: actor.name().to_owned(),
                };
                return Err(logged(&actor, "end", refused));
            }
            Some(_) => Some(flights.handles.remove(&key).expect("just found").handle),
        }
    };
    let (runtime, by, object) = (m.runtime.clone(), actor.clone(), id.clone());
    let record = in_task(async move {
        let flight = match flight {
            Some(flight) => flight,
            None => runtime.resume_async(object, &by, Fence(fence)).await?,
        };
        match complete {
            true => flight.complete_async().await,
            false => flight.fail_async().await,
        }
    })
    .await
    .map_err(|e| {
        let counter = match &e {
            RuntimeError::Conflict { .. } => Some(&m.feed.counters.conflicts),
            RuntimeError::Revoked { .. } => Some(&m.feed.counters.revoked),
            _ => None,
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        logged(&actor, if complete { "complete" } else { "fail" }, e)
    });
    let record = or_removed(&m, record).await?;
    let body = object_json(m.runtime.machine(), &id, &record);
    Ok(with_etag(StatusCode::OK, body, record.version))
}

async fn complete(
    State(service): State<Arc<Service>>,
    Path((name, id, token)): Path<(String, String, String)>,
    Query(NoQuery {}): Query<NoQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    finish(service, name, id, token, headers, true).await
}

async fn fail(
    State(service): State<Arc<Service>>,
    Path((name, id, token)): Path<(String, String, String)>,
    Query(NoQuery {}): Query<NoQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    finish(service, name, id, token, headers, false).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchQuery {
    action: Option<String>,
    /// Seconds to wait for the object while an action holds it.
    #[serde(default)]
    wait: u64,
}

/// RFC 7396: `patch` merged into `target`; `null` removes a member.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(changes) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(fields) = target else {
        unreachable!("made an object")
    };
    for (key, value) in changes {
        if value.is_null() {
            fields.remove(key);
        } else {
            merge_patch(fields.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

async fn patch_data(
    State(service): State<Arc<Service>>,
    Path((name, id)): Path<(String, String)>,
    Query(query): Query<PatchQuery>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let Turn {
        actor,
        m,
        condition,
        version,
        wait,
    } = Turn::read(&service, &headers, &name, query.wait)?;
    let patch: Value = parse(body)?;
    let Some(action) = query.action else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            "name the action that makes this change (`?action=...`): data changes pass the table's rules for it",
        ));
    };
    let patch = Arc::new(patch);
    let attempt = || {
        let (rt, key, who) = (m.runtime.clone(), id.clone(), actor.clone());
        let (feed, action, patch) = (m.feed.clone(), action.clone(), patch.clone());
        in_task(async move {
            // The change is computed from one version's data and started at that
            // version, so the guards judge the data that will be written (the spec's
            // rules on changes see `object.data` and `proposed.data`) and nothing
            // written in between is lost. Without If-Match a concurrent write is
            // retried on the new data, as often as it takes: each retry means another
            // write landed, so the object moves on.
            loop {
                let current = rt.get_async(key.clone()).await?;
                let at = version.unwrap_or(current.version);
                let mut data = match &current.data {
                    Some(d) => serde_json::from_str(d).unwrap_or(Value::Null),
                    None => Value::Null,
                };
                merge_patch(&mut data, &patch);
                let started = rt
                    .start_changing_async(
                        key.clone(),
                        Some(at),
                        &who,
                        action.as_str(),
                        Some(data.to_string().into()),
                    )
                    .await;
                match started {
                    Err(RuntimeError::VersionMismatch { .. }) if version.is_none() => {
                        feed.counters.conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                    started => return started?.complete_async().await,
                }
            }
        })
    };
    let record = in_turn(&m, &id, &wait, attempt)
        .await
        .map_err(|e| log(&actor, "patch", condition.explain(refused(e))));
    let record = or_removed(&m, record).await?;
    let body = object_json(m.runtime.machine(), &id, &record);
    Ok(with_etag(StatusCode::OK, body, record.version))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    /// At most this many entries, with `next` when entries past the last remain.
    limit: Option<NonZeroU64>,
    /// Only the entries past this version (the `next` of the page before).
    after: Option<u64>,
}

/// `GET /v1/<machine>/objects/<id>/history`: the entries, oldest first; all of
/// them, or a page (`limit`, `after`) with the version to read the next page
/// after (`next`).
async fn history(
    State(service): State<Arc<Service>>,
    Path((name, id)): Path<(String, String)>,
    Query(query): Query<HistoryQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = actor(&service, &headers)?;
    let m = machine(&service, &name)?.clone();
    let (rt, key) = (m.runtime.clone(), ObjectId::from(id.as_str()));
    let read = blocking(move || {
        // An unknown object is a 404, not an empty history.
        rt.get(key.clone())?;
        if query.limit.is_none() && query.after.is_none() {
            return Ok((rt.history(key)?, None));
        }
        // One entry more than the page: whether entries remain past it.
        let limit = page_size(query.limit);
        let mut entries = rt
            .store()
            .history_after(&key, query.after, limit.saturating_add(1))
            .map_err(RuntimeError::Store)?;
        let next = (entries.len() > limit).then(|| {
            entries.truncate(limit);
            entries.last().map(|e| e.version)
        });
        Ok((entries, next.flatten()))
    })
    .await
    .map_err(|e| logged(&actor, "history", e));
    let (entries, next) = or_removed(&m, read).await?;
    let machine_def = m.runtime.machine();
    let entries: Vec<Value> = entries
        .iter()
        .map(|e| Value::Object(entry_json(machine_def, e)))
        .collect();
    let mut body = json!({ "id": id, "entries": entries });
    if let Some(next) = next {
        body["next"] = json!(next);
    }
    Ok(axum::Json(body).into_response())
}

async fn metrics(State(service): State<Arc<Service>>) -> Response {
    let text = crate::metrics::render(&service).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `GET /healthz`: the process serves (a liveness probe: it does not ask the
/// stores, so a store that is down does not get the process restarted).
async fn healthz() -> Response {
    axum::Json(json!({ "status": "ok" })).into_response()
}

/// `GET /readyz`: every machine's store answers a read (a readiness probe):
/// 200, or 503 `unavailable` naming each machine whose store does not, with
/// why (`down`).
async fn readyz(State(service): State<Arc<Service>>) -> Result<Response, ApiError> {
    let mut down = Map::new();
    for (name, m) in &service.machines {
        let rt = m.runtime.clone();
        // One read of the store's position (on etcd, a request; in memory, none).
        if let Ok(Err(e)) = blocking(move || Ok(rt.store().position())).await {
            down.insert(name.clone(), json!(e.to_string()));
        }
    }
    if down.is_empty() {
        return Ok(axum::Json(json!({ "status": "ready" })).into_response());
    }
    let names: Vec<&str> = down.keys().map(String::as_str).collect();
    let message = format!("the store of {} does not answer", names.join(", "));
    Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message).with("down", down))
}

async fn openapi(State(service): State<Arc<Service>>) -> Response {
    axum::Json(crate::openapi::document(&service)).into_response()
}

async fn page(State(service): State<Arc<Service>>) -> Html<String> {
    Html(crate::page::render(&service))
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such path; see /openapi.json",
    )
}

async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("this path takes no {method}; see /openapi.json"),
    )
    .with("method", method.as_str())
}

/// The service's routes.
pub fn router(service: Arc<Service>) -> Router {
    let limit = service.body_limit;
    // No CORS unless origins are configured: then those, and only those.
    let cors = (!service.cors_origins.is_empty()).then(|| {
        let origins: Vec<HeaderValue> = service
            .cors_origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        tower_http::cors::CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([
                axum::http::Method::GET,
                axum::http::Method::POST,
                axum::http::Method::PATCH,
                axum::http::Method::DELETE,
            ])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::IF_MATCH,
                header::IF_NONE_MATCH,
            ])
            .expose_headers([header::ETAG])
    });
    let router = Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi))
        .route("/v1/{machine}/objects", post(create).get(list))
        .route("/v1/{machine}/summary", get(summary))
        .route("/v1/{machine}/objects/{id}", get(get_object).delete(remove))
        .route(
            "/v1/{machine}/objects/{id}/data",
            axum::routing::patch(patch_data),
        )
        .route("/v1/{machine}/objects/{id}/history", get(history))
        .route("/v1/{machine}/objects/{id}/actions/{action}", post(start))
        .route(
            "/v1/{machine}/objects/{id}/in-flight/{token}/complete",
            post(complete),
        )
        .route(
            "/v1/{machine}/objects/{id}/in-flight/{token}/fail",
            post(fail),
        )
        .route("/v1/{machine}/watch", get(watch))
        .route("/v1/watch", get(watch_all))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(service);
    match cors {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::thread::ThreadId;
    use std::time::Duration;

    use fsm_runtime::{RuntimeError, StoreError};

    use super::in_task;

    /// Tells, when dropped, on which thread.
    struct Dropped(mpsc::Sender<ThreadId>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().id());
        }
    }

    /// A request whose client leaves while its task runs: what the task
    /// returns (a started action's handle, in the service) is dropped on a
    /// blocking thread, not on the async worker that ran the task (the test's
    /// own thread: a current-thread runtime).
    #[tokio::test]
    async fn what_a_request_gone_meanwhile_made_is_dropped_off_the_async_worker() {
        let (dropped, dropped_on) = mpsc::channel();
        let (go, ready) = tokio::sync::oneshot::channel::<()>();
        let mut request = Box::pin(in_task(async move {
            let _ = ready.await;
            Ok(Dropped(dropped))
        }));
        tokio::select! {
            biased;
            _ = &mut request => panic!("the task cannot have ended: it waits for `go`"),
            () = std::future::ready(()) => {}
        }
        drop(request);
        go.send(()).expect("the task waits");
        let on =
            tokio::task::spawn_blocking(move || dropped_on.recv_timeout(Duration::from_secs(10)))
                .await
                .expect("no panic")
                .expect("what the task made was dropped");
        assert_ne!(
            on,
            std::thread::current().id(),
            "dropped on the async worker"
        );
    }

    /// A task the runtime dropped (the service stopping) answers its request
    /// with a retryable refusal, not a panic.
    #[test]
    fn a_task_whose_runtime_stopped_answers_that_the_service_is_stopping() {
        let serving = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut request = Box::pin(in_task(std::future::pending::<Result<(), _>>()));
        serving.block_on(async {
            tokio::select! {
                biased;
                _ = &mut request => panic!("the task waits forever"),
                () = std::future::ready(()) => {}
            }
        });
        drop(serving);
        let answer = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(request);
        match answer {
            Err(RuntimeError::Store(StoreError::Unavailable { message, retryable })) => {
                assert!(retryable);
                assert_eq!(message, "the service is stopping");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A task's panic reaches its request, as it would without the task.
    #[tokio::test]
    #[should_panic(expected = "the work's own panic")]
    async fn a_panic_in_the_task_reaches_its_request() {
        fn work() -> Result<(), RuntimeError> {
            panic!("the work's own panic")
        }
        let _ = in_task(async { work() }).await;
    }
}
