//! The README's session with `fsm serve` is what the service answers: each
//! `$ curl` of the session is made against a service started as the README
//! starts it (its tokens file, the sabakan spec, memory), and each answer the
//! README prints is compared with the service's, a timestamp matching any
//! timestamp and `"..."` anything. A call the README prints no answer for must
//! succeed.

mod server;

use std::path::Path;

use fsm_serve::{Config, Tokens};
use reqwest::{Client, Method};
use serde_json::Value;
use server::Server;

/// The README.
fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of the first fenced `sh` block after `heading`.
fn block<'a>(readme: &'a str, heading: &str) -> Vec<&'a str> {
    let at = readme
        .find(heading)
        .unwrap_or_else(|| panic!("the README has no `{heading}`"));
    let after = &readme[at..];
    let start = after.find("```sh\n").expect("a sh block follows") + "```sh\n".len();
    let end = start + after[start..].find("```").expect("the block ends");
    after[start..end].lines().collect()
}

/// The words of a shell command line, as a shell splits them: quotes (single
/// or double) kept together and taken off, an unquoted `#` after a space ends
/// the line.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut in_word) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "an unclosed quote in `{line}`");
    if in_word {
        words.push(word);
    }
    words
}

/// One call of the session: the `curl` words, and the answer printed after it.
struct Step {
    command: Vec<String>,
    answer: Option<String>,
}

/// The session's calls: each `$ ` line with its `\` continuations, and the
/// line printed after it, if any.
fn steps(lines: &[&str]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = lines.iter().peekable();
    while let Some(line) = lines.next() {
        let Some(command) = line.strip_prefix("$ ") else {
            continue;
        };
        let mut command = command.to_owned();
        while let Some(rest) = command.strip_suffix('\\') {
            command = format!("{rest} {}", lines.next().expect("a continued line").trim());
        }
        let answer = lines
            .next_if(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("$ "))
            .map(|l| (*l).to_owned());
        steps.push(Step {
            command: words(&command),
            answer,
        });
    }
    steps
}

/// Whether `got` is what the README prints as `want`: equal, but for strings
/// the README writes as `"..."` (anything) or as a timestamp (any timestamp).
fn matches(want: &Value, got: &Value) -> bool {
    let timestamp = |s: &str| s.len() >= 20 && s.as_bytes()[10] == b'T' && s.ends_with('Z');
    match (want, got) {
        (Value::String(w), _) if w == "..." => true,
        (Value::String(w), Value::String(g)) if timestamp(w) => timestamp(g),
        (Value::Object(w), Value::Object(g)) => {
            w.len() == g.len()
                && w.iter()
                    .all(|(k, v)| g.get(k).is_some_and(|gv| matches(v, gv)))
        }
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(w, g)| matches(w, g))
        }
        _ => want == got,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_session_is_what_the_service_answers() {
    let readme = readme();
    // The tokens file as the README writes it.
    let set_up = block(&readme, "## As a service: `fsm serve`");
    let from = set_up
        .iter()
        .position(|l| l.starts_with("cat > tokens.toml <<'TOML'"))
        .expect("the README writes a tokens file");
    let to = from + set_up[from..].iter().position(|l| *l == "TOML").unwrap();
    let tokens = Tokens::parse(&set_up[from + 1..to].join("\n")).unwrap();
    assert!(
        set_up.iter().any(|l| l.starts_with(
            "fsm serve specs/sabakan/machine.toml --tokens tokens.toml --listen 127.0.0.1:8080"
        )),
        "the README starts the service this test starts"
    );
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/sabakan/machine.toml");
    let server = Server::open(Config::new(vec![spec]), tokens).await;

    let session = steps(&block(&readme, "A session with the sabakan spec:"));
    assert!(session.len() >= 10, "the session has its calls");
    let c = Client::new();
    for step in &session {
        let shown = step.command.join(" ");
        assert_eq!(step.command[0], "curl", "{shown}");
        let (mut method, mut headers, mut body, mut url, mut stream) =
            (None, Vec::new(), None, None, false);
        let mut args = step.command[1..].iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "-s" => {}
                "-N" => stream = true,
                "-X" => method = Some(args.next().expect("-X takes a method").clone()),
                "-H" => headers.push(args.next().expect("-H takes a header").clone()),
                "-d" => body = Some(args.next().expect("-d takes a body").clone()),
                other if other.starts_with("http://127.0.0.1:8080/") => {
                    url = Some(other.replacen("http://127.0.0.1:8080", &server.base, 1));
                }
                other => panic!("{shown}: `{other}` is not a curl option this test knows"),
            }
        }
        // As curl: POST when given a body, GET otherwise.
        let method = method.unwrap_or_else(|| match body {
            Some(_) => "POST".to_owned(),
            None => "GET".to_owned(),
        });
        let mut request = c.request(
            Method::from_bytes(method.as_bytes()).unwrap(),
            url.unwrap_or_else(|| panic!("{shown}: no URL")),
        );
        for header in &headers {
            let (name, value) = header.split_once(": ").expect("Name: value");
            request = request.header(name, value);
        }
        if let Some(body) = body {
            // curl's `-d` sends a form type; the service reads the body as JSON.
            request = request
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        if stream {
            assert_eq!(status, 200, "{shown}");
            let kind = response.headers()["content-type"].to_str().unwrap();
            assert!(kind.starts_with("text/event-stream"), "{shown}: {kind}");
            continue;
        }
        let text = response.text().await.unwrap();
        match &step.answer {
            Some(want) => {
                let want: Value = serde_json::from_str(want)
                    .unwrap_or_else(|e| panic!("{shown}: the README's answer is not JSON: {e}"));
                let got: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{shown}: {status} {text}: {e}"));
                assert!(
                    matches(&want, &got),
                    "{shown}\nthe README: {want}\nthe service ({status}): {got}"
                );
            }
            None => assert!(status.is_success(), "{shown}: {status} {text}"),
        }
    }
    server.stop().await;
}

#[test]
fn words_split_as_a_shell_does() {
    assert_eq!(
        words(r#"curl -s -H 'A: b c' -d '{"x": 1}' "http://h/p?q=1"   # a comment"#),
        [
            "curl",
            "-s",
            "-H",
            "A: b c",
            "-d",
            r#"{"x": 1}"#,
            "http://h/p?q=1"
        ]
    );
    assert_eq!(words("a#b 'c # d'"), ["a#b", "c # d"]);
}

#[test]
fn a_timestamp_or_dots_match_what_the_readme_cannot_know() {
    let want = serde_json::json!({"at": "2026-11-23T13:20:41.512Z", "v": "...", "n": 1});
    let got = serde_json::json!({"at": "2027-01-01T00:00:00.000001Z", "v": [1], "n": 1});
    assert!(matches(&want, &got));
    assert!(!matches(
        &want,
        &serde_json::json!({"at": "soon", "v": 1, "n": 1})
    ));
    assert!(!matches(
        &want,
        &serde_json::json!({"at": "2027-01-01T00:00:00Z", "v": 1, "n": 2})
    ));
    assert!(!matches(
        &want,
        &serde_json::json!({"at": "2027-01-01T00:00:00Z", "v": 1})
    ));
}
