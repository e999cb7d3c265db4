//! `GET /`: per machine, the diagram with the number of objects in each state,
//! live from the watch stream; the objects held by an action, those past their
//! deadline marked, with the requests waiting for each (`?wait`); records the
//! store cannot read, when there are some; an object's history on a click.
//! The page holds no data: it asks the API (the machine's summary after each
//! write, one at a time however fast writes come, and every few seconds while
//! an action holds an object, whose deadline and waiters change with no
//! write; never the list of every object) with the token the reader gives
//! (kept for the browser tab only).

use std::fmt::Write;

use fsm_model::xml_escape;

use crate::Service;

const TEMPLATE: &str = include_str!("page.html");

/// The page for every machine of `service`.
pub fn render(service: &Service) -> String {
    let mut sections = String::new();
    for (name, m) in &service.machines {
        let machine = m.runtime.machine();
        let n = xml_escape(name);
        let _ = writeln!(sections, "<section id=\"machine-{n}\">\n<h2>{n}</h2>");
        if let Some(d) = machine.description() {
            let _ = writeln!(sections, "<p>{}</p>", xml_escape(d));
        }
        let _ = writeln!(sections, "<div class=\"diagram\">\n{}</div>", m.svg);
        let _ = writeln!(
            sections,
            "<table><thead><tr><th>state</th><th>objects</th></tr></thead><tbody>"
        );
        for state in machine.states() {
            let s = xml_escape(&state.name);
            let _ = writeln!(
                sections,
                "<tr><td>{s}</td><td class=\"count\" data-machine=\"{n}\" data-state=\"{s}\">–</td></tr>"
            );
        }
        let _ = writeln!(
            sections,
            "<tr><th>all</th><td class=\"count\" id=\"total-{n}\">–</td></tr>\n<tr id=\"unreadable-row-{n}\" hidden><th>unreadable</th><td class=\"count stuck\" id=\"unreadable-{n}\">0</td></tr></tbody></table>"
        );
        let _ = writeln!(
            sections,
            "<h3>Held by an action</h3>\n<table><thead><tr><th>object</th><th>state</th><th>action</th><th>by</th><th>since</th><th></th><th>waiting</th></tr></thead>\n<tbody id=\"inflight-{n}\"></tbody></table>\n<pre id=\"history-{n}\"></pre>\n</section>"
        );
    }
    let names: Vec<&str> = service.machines().collect();
    TEMPLATE.replace("{{MACHINES}}", &sections).replace(
        "{{NAMES}}",
        &serde_json::to_string(&names).expect("names serialize"),
    )
}
