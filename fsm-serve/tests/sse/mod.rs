//! Server-Sent Events as a client reads them, for the tests of the watch.

use std::time::Duration;

use serde_json::Value;

/// Reads SSE events of the `kinds` named from `response` until `n` came: each
/// one's name, id (if it has one, a number as a machine's stream gives) and
/// JSON.
pub async fn sse(
    response: reqwest::Response,
    n: usize,
    kinds: &[&str],
) -> Vec<(String, Option<u64>, Value)> {
    (sse_ids(response, n, kinds).await.into_iter())
        .map(|(kind, id, data)| (kind, id.map(|id| id.parse().unwrap()), data))
        .collect()
}

/// [`sse`] with each id as given (the machines' stream gives JSON).
pub async fn sse_ids(
    response: reqwest::Response,
    n: usize,
    kinds: &[&str],
) -> Vec<(String, Option<String>, Value)> {
    use futures_util::StreamExt;
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut out = Vec::new();
    while out.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event within 10 s")
            .expect("the stream goes on")
            .unwrap();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
            };
            if let Some(kind) = field("event:").filter(|k| kinds.contains(&k.as_str())) {
                let id = field("id:");
                out.push((
                    kind,
                    id,
                    serde_json::from_str(&field("data:").unwrap()).unwrap(),
                ));
            }
        }
    }
    out
}
