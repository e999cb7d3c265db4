//! The watch streams (Server-Sent Events): one machine's, or several
//! machines' in one stream, resumed after the event a client names.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::json;

use super::error::ApiError;
use super::extract::{Followed, NoQuery, Path, Query};
use super::{actor, blocking, machine};
use crate::feed::Note;
use crate::{MachineService, Service};

/// The event a watch resumes after: `Last-Event-ID`, an event id this
/// service (or, on etcd, any service of the store) gave. Refused when it is
/// not one: read as absent, the stream would start at the next write and the
/// client would miss, unwarned, the writes since the event it names.
fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("").trim();
    text.parse().map(Some).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            format!("Last-Event-ID must be an event id a service gave (a number), not `{text}`"),
        )
        .with("parameter", "Last-Event-ID")
        .with("last_event_id", text)
    })
}

/// A place among the service's watch streams, or 503.
fn watch_permit(service: &Service) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    service.watchers.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_watchers",
            format!(
                "this service serves at most {} watch streams at once",
                service.max_watchers
            ),
        )
    })
}

/// `m`'s feed from the event after `after` (from now on when `None`). On
/// etcd, a client may resume with a number another service gave, past what
/// this one has seen yet: the store's revision says whether it is one.
/// (Unread, the number is taken as unknown: a gap, then what comes next.)
async fn subscribed(m: &MachineService, after: Option<u64>) -> crate::feed::Subscription {
    let store_at = match after {
        Some(_) => {
            let rt = m.runtime.clone();
            let read = blocking(move || Ok(rt.store().position())).await;
            read.ok().and_then(Result::ok).flatten()
        }
        None => None,
    };
    m.feed.subscribe(after, store_at)
}

/// A subscription's notes as a stream sends them: a gap first when the
/// client missed some, the kept ones, then each new one. A write numbered at
/// or before the last sent is not sent again; a gap always is (the write
/// after it may have its number), and a stream that fell behind the feed
/// gets one.
fn notes(subscription: crate::feed::Subscription) -> impl Stream<Item = Note> + Send + 'static {
    use futures_util::StreamExt;
    use tokio::sync::broadcast::error::RecvError;
    let crate::feed::Subscription {
        rx,
        replay,
        complete,
        from,
    } = subscription;
    let last = (replay.iter())
        .filter_map(|note| match note {
            Note::Write { seq, .. } => Some(*seq),
            Note::Gap { .. } => None,
        })
        .fold(from, u64::max);
    let first = (!complete).then_some(Note::Gap { seq: from });
    let live = futures_util::stream::unfold((rx, last), |(mut rx, mut last)| async move {
        loop {
            match rx.recv().await {
                Ok(Note::Write { seq, .. }) if seq <= last => {}
                Ok(note) => {
                    if let Note::Write { seq, .. } = note {
                        last = seq;
                    }
                    return Some((note, (rx, last)));
                }
                Err(RecvError::Lagged(_)) => return Some((Note::Gap { seq: last }, (rx, last))),
                Err(RecvError::Closed) => return None,
            }
        }
    });
    futures_util::stream::iter(first.into_iter().chain(replay)).chain(live)
}

pub(super) async fn watch(
    State(service): State<Arc<Service>>,
    Path(name): Path<String>,
    Query(NoQuery {}): Query<NoQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let _actor = actor(&service, &headers)?;
    let m = machine(&service, &name)?.clone();
    let after = last_event_id(&headers)?;
    let permit = watch_permit(&service)?;
    let notes = notes(subscribed(&m, after).await);
    let stream = async_stream(move |tx| async move {
        use futures_util::StreamExt;
        let _permit = permit;
        let mut notes = std::pin::pin!(notes);
        loop {
            // The client going away ends the stream at once, and frees its place.
            let note = tokio::select! {
                note = notes.next() => note,
                () = tx.closed() => return,
            };
            let Some(note) = note else { return };
            if tx.send(note_event(note)).await.is_err() {
                return;
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// The positions an all-machines stream resumes after: its `Last-Event-ID`,
/// each machine's event id as the stream's ids give them ([`position_id`]:
/// `door=41&vm=7`). A machine the service does not have is passed over (a
/// service restarted with fewer specs); one not named starts from the
/// stream's opening.
fn positions(headers: &HeaderMap) -> Result<std::collections::BTreeMap<String, u64>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(Default::default());
    };
    let text = value.to_str().unwrap_or("\u{0}").trim();
    read_positions(text).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            format!(
                "Last-Event-ID of the machines' stream must be an id it gave \
                 (`machine=event-id`, joined by `&`, names percent-encoded), not `{}`",
                text.escape_debug()
            ),
        )
        .with("parameter", "Last-Event-ID")
        .with("last_event_id", text)
    })
}

/// `text` as [`position_id`] writes it, or `None`: each pair a name of
/// unreserved characters and `%XX` escapes (upper-case hex), `=`, and an
/// event id without leading zeros. A name that is not UTF-8 once decoded
/// names no machine, and is passed over.
fn read_positions(text: &str) -> Option<std::collections::BTreeMap<String, u64>> {
    let mut positions = std::collections::BTreeMap::new();
    if text.is_empty() {
        return Some(positions);
    }
    for pair in text.split('&') {
        let (name, seq) = pair.split_once('=')?;
        let mut bytes = Vec::new();
        let mut rest = name.as_bytes();
        while let Some((&b, after)) = rest.split_first() {
            rest = after;
            if b == b'%' {
                let hex = rest.get(..2)?;
                let upper = |c: &u8| c.is_ascii_digit() || (b'A'..=b'F').contains(c);
                if !hex.iter().all(upper) {
                    return None;
                }
                bytes.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
                rest = &rest[2..];
            } else if b.is_ascii_alphanumeric() || b"._~-".contains(&b) {
                bytes.push(b);
            } else {
                return None;
            }
        }
        let digits = seq.len() <= 19 && seq.bytes().all(|b| b.is_ascii_digit());
        if name.is_empty() || !digits || seq.is_empty() || (seq.len() > 1 && seq.starts_with('0')) {
            return None;
        }
        if let Ok(name) = String::from_utf8(bytes) {
            positions.insert(name, seq.parse().ok()?);
        }
    }
    Some(positions)
}

/// An all-machines stream's event id: each machine's last event id, as
/// `name=id` pairs joined by `&`, each name percent-encoded but for
/// unreserved characters (ASCII, so that a browser sends it back as a
/// header).
fn position_id(positions: &std::collections::BTreeMap<String, u64>) -> String {
    let mut out = String::new();
    for (name, seq) in positions {
        if !out.is_empty() {
            out.push('&');
        }
        for b in name.bytes() {
            if b.is_ascii_alphanumeric() || b"._~-".contains(&b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out.push_str(&format!("={seq}"));
    }
    out
}

/// `GET /v1/watch`: every machine's writes in one stream, so that a client
/// following several machines holds one connection (a browser gives a host
/// six over HTTP/1.1); with `machine` (given once per machine), only those
/// machines'. Each event's data is the machine's stream's, with `machine`; a
/// `write`'s id names each followed machine's last event id so far
/// (`door=41&vm=7`), and resumes the whole stream as `Last-Event-ID`.
pub(super) async fn watch_all(
    State(service): State<Arc<Service>>,
    Followed(followed): Followed,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    use futures_util::StreamExt;
    let _actor = actor(&service, &headers)?;
    for name in followed.iter().flatten() {
        machine(&service, name)?;
    }
    let after = positions(&headers)?;
    let permit = watch_permit(&service)?;
    let mut at = std::collections::BTreeMap::new();
    let mut streams = Vec::new();
    let machines = (service.machines.iter())
        .filter(|(name, _)| followed.as_ref().is_none_or(|f| f.contains(*name)));
    for (name, m) in machines {
        let subscription = subscribed(m, after.get(name).copied()).await;
        at.insert(name.clone(), subscription.from);
        let name: Arc<str> = name.as_str().into();
        streams.push(
            notes(subscription)
                .map(move |note| (name.clone(), note))
                .boxed(),
        );
    }
    let all = futures_util::stream::select_all(streams);
    let stream = async_stream(move |tx| async move {
        let _permit = permit;
        let mut all = all;
        loop {
            let next = tokio::select! {
                next = all.next() => next,
                () = tx.closed() => return,
            };
            let Some((name, note)) = next else { return };
            let machine = serde_json::to_string(&*name).unwrap_or_default();
            let event = match note {
                Note::Write { seq, json } => {
                    at.insert(name.to_string(), seq);
                    // The machine's event, `machine` first.
                    let rest = json.strip_prefix('{').unwrap_or(&json);
                    SseEvent::default()
                        .event("write")
                        .id(position_id(&at))
                        .data(format!("{{\"machine\":{machine},{rest}"))
                }
                Note::Gap { seq } => SseEvent::default().event("gap").data(
                    json!({ "machine": &*name, "after": seq, "message": "writes were missed: re-read the machine's objects" })
                        .to_string(),
                ),
            };
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

fn note_event(note: Note) -> Result<SseEvent, Infallible> {
    Ok(match note {
        Note::Write { seq, json } => SseEvent::default()
            .event("write")
            .id(seq.to_string())
            .data(json.as_ref()),
        Note::Gap { seq } => gap_event(seq)?,
    })
}

fn gap_event(after: u64) -> Result<SseEvent, Infallible> {
    Ok(SseEvent::default().event("gap").data(
        json!({ "after": after, "message": "writes were missed: re-read the objects" }).to_string(),
    ))
}

/// A stream fed by a task through a channel: the task ends when the client goes.
fn async_stream<F, Fut>(body: F) -> impl Stream<Item = Result<SseEvent, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<SseEvent, Infallible>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(body(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::{position_id, read_positions};

    /// An all-machines stream's ids read back as written, whatever the
    /// machines' names; and only what the OpenAPI document's pattern allows
    /// is read.
    #[test]
    fn stream_positions_read_back_as_written() {
        let positions = [
            ("door".to_owned(), 41),
            ("a b/é&=%".to_owned(), 0),
            ("vm".to_owned(), u64::MAX / 2),
        ]
        .into_iter()
        .collect();
        let id = position_id(&positions);
        assert_eq!(
            id,
            "a%20b%2F%C3%A9%26%3D%25=0&door=41&vm=9223372036854775807"
        );
        assert!(id.is_ascii());
        assert_eq!(read_positions(&id), Some(positions));
        assert_eq!(read_positions(""), Some(Default::default()));
        // Not UTF-8 once decoded: no machine's name, passed over.
        assert_eq!(read_positions("%FF=1&vm=2").map(|p| p.len()), Some(1));
        for refused in [
            "vm",
            "vm=",
            "=1",
            "vm=01",
            "vm=-1",
            "vm=1&",
            "v m=1",
            "vm=%2f",
            "vm%2f=1",
            "vm%2=1",
            "vm=12345678901234567890",
            "vm=1,door=2",
        ] {
            assert_eq!(read_positions(refused), None, "{refused}");
        }
    }
}
