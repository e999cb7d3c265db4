//! `GET /openapi.json`: the API as OpenAPI 3.0. Each machine has paths of its
//! own (`/v1/vm/objects`, ...), tagged with its name, whose parameters and
//! answers name only its own states and actions; every status the service
//! answers with is listed, and links lead from a creation to the object's
//! operations and from a start to its completion, so that a client generated
//! from the document has one typed set of calls per machine. `tests/api.rs`
//! runs schemathesis against it.

use serde_json::{Map, Value, json};

use crate::Service;

/// What a `"error"` kind says, for the `Error` schema's description.
const ERROR_KINDS: &str = "The kind of refusal: malformed, too_large, unauthorized, \
    unknown_machine, unknown_state, unknown_action, not_found, not_in_flight, exists, busy, \
    conflict, revoked, precondition_failed, missing_role, not_owner, not_holder, no_rule, \
    guard, unavailable, too_many_watchers, method_not_allowed or internal (more may come: \
    treat an unknown kind by its status)";

/// An object's 404.
const NOT_FOUND: &str = "No such object (`not_found`); an object that was removed, its id not used \
    again since, carries `removed`: the removal's entry (who removed it, when, in which state, at \
    which version)";

/// An error answer.
fn error(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
    })
}

/// The answers every `/v1` call may give beside its own.
fn common(responses: Value) -> Value {
    let mut responses = responses;
    let map = responses.as_object_mut().expect("responses are an object");
    for (status, description) in [
        (
            "400",
            "Malformed: a path segment, query parameter, header or body the service cannot read, with what it expected (and a body's line and column); a query parameter or body field the call does not take",
        ),
        ("401", "Missing or unknown bearer token"),
        (
            "503",
            "The store is unavailable, or too many watch streams, or too many requests waiting for busy objects; retry (after the seconds `Retry-After` gives)",
        ),
    ] {
        map.entry(status).or_insert_with(|| error(description));
    }
    responses
}

/// A name as one path segment: percent-encoded but for the unreserved
/// characters, as a client must send it.
fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A name as a component's and an operation's prefix: the characters OpenAPI
/// allows in a component's name (`[A-Za-z0-9._-]`), others as `_`, made
/// unique among `taken`.
fn prefix(name: &str, taken: &Map<String, Value>) -> String {
    let clean: String = name
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    let mut key = clean.clone();
    let mut n = 2;
    while taken.contains_key(&format!("{key}.Object")) {
        key = format!("{clean}_{n}");
        n += 1;
    }
    key
}

/// The schemas of one machine's objects, holders and history entries, named
/// `<key>.Object`, `<key>.Holder` and `<key>.Entry`.
fn machine_schemas(schemas: &mut Map<String, Value>, key: &str, states: &[&str], actions: &[&str]) {
    schemas.insert(
        format!("{key}.Holder"),
        json!({
            "type": "object",
            "required": ["action", "origin", "actor", "since", "fence", "abandoned", "overdue"],
            "properties": {
                "action": { "type": "string", "enum": actions },
                "origin": { "type": "string", "enum": states },
                "actor": { "type": "string" },
                "since": { "type": "string", "format": "date-time" },
                "fence": { "type": "integer", "format": "int64", "minimum": 1 },
                "abandoned": { "type": "boolean" },
                "deadline_seconds": { "type": "number", "nullable": true },
                "overdue": { "type": "boolean" },
                "proposed": { "nullable": true, "description": "The data the action's start proposed, which its completion writes" }
            }
        }),
    );
    let mut nullable: Vec<Value> = actions.iter().map(|a| json!(a)).collect();
    nullable.push(Value::Null);
    let holder = json!({ "allOf": [{ "$ref": format!("#/components/schemas/{key}.Holder") }], "nullable": true });
    schemas.insert(
        format!("{key}.Object"),
        json!({
            "type": "object",
            "required": ["id", "machine", "state", "version", "changed_at", "data", "in_flight", "hidden"],
            "properties": {
                "id": { "type": "string" },
                "machine": { "type": "string" },
                "state": { "type": "string", "enum": states },
                "version": { "type": "integer", "format": "int64", "minimum": 1 },
                "changed_at": { "type": "string", "format": "date-time" },
                "data": { "nullable": true },
                "in_flight": holder,
                "hidden": holder,
                "fence": { "type": "integer", "format": "int64", "minimum": 1, "description": "On a start: the action's fence token" },
                "in_flight_url": { "type": "string", "description": "On a start: the action's path, which `/complete` or `/fail` ends" },
                "waiting": { "type": "integer", "minimum": 0, "description": "In a summary: how many requests wait for the object on this service (`?wait`)" }
            }
        }),
    );
    schemas.insert(
        format!("{key}.Entry"),
        json!({
            "type": "object",
            "required": ["version", "kind", "action", "from", "to", "actor", "at"],
            "properties": {
                "version": { "type": "integer", "format": "int64", "minimum": 1 },
                "kind": { "type": "string", "enum": ["Created", "Started", "Completed", "Failed", "Abandoned", "Healed", "Removed"] },
                // (OpenAPI 3.0.3: a nullable enum lists `null` among its values.)
                "action": { "type": "string", "enum": nullable, "nullable": true },
                "from": { "type": "string", "enum": states },
                "to": { "type": "string", "enum": states },
                "actor": { "type": "string" },
                "at": { "type": "string", "format": "date-time" },
                "id": { "type": "string", "description": "In a watch event, and in a removal's answer: the object" },
                "seq": { "type": "integer", "format": "int64", "description": "In a watch event: its event id" }
            }
        }),
    );
}

/// Which states of `machine` allow removal, and to whom, in words.
fn removable_in(machine: &fsm_core::Machine) -> String {
    let states: Vec<String> = (machine.states().iter())
        .filter_map(|s| {
            let roles = s.remove.as_deref()?;
            Some(match roles {
                [] => format!("`{}` (anyone)", s.name),
                roles => format!("`{}` (roles: {})", s.name, roles.join(", ")),
            })
        })
        .collect();
    if states.is_empty() {
        "No state of this machine allows removal: every object is refused (422)".to_owned()
    } else {
        format!(
            "Allowed in: {}. The id is then free: an object created again under it is new, and its versions go on after the removal's, so no ETag of the old object matches it",
            states.join(", ")
        )
    }
}

/// The paths of machine `name`, its components under `key`; `max_wait`, the
/// longest a request may wait for a busy object, in seconds.
fn machine_paths(
    paths: &mut Map<String, Value>,
    name: &str,
    key: &str,
    machine: &fsm_core::Machine,
    states: &[&str],
    actions: &[&str],
    max_wait: u64,
) {
    let base = format!("/v1/{}", segment(name));
    let op = |what: &str| format!("{key}_{what}");
    let wait = json!({
        "name": "wait", "in": "query",
        "description": "Seconds to wait while an action holds the object: the requests waiting for an object take turns in the order they came, each trying again at the object's writes; 409 busy if it is still held then. 0 (the default): no wait",
        "schema": { "type": "integer", "minimum": 0, "maximum": max_wait }
    });
    let tags = json!([name]);
    let object_ref = json!({ "$ref": format!("#/components/schemas/{key}.Object") });
    let object = |description: &str| {
        json!({
            "description": description,
            "headers": { "ETag": { "description": "The object's version, quoted", "schema": { "type": "string", "pattern": "^\"[0-9]+\"$" } } },
            "content": { "application/json": { "schema": object_ref } }
        })
    };
    // An answer with the object, and where its links lead.
    let linked = |description: &str, links: Value| {
        let mut answer = object(description);
        answer["links"] = links;
        answer
    };
    let id = json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "minLength": 1 } });
    let fence = json!({ "name": "token", "in": "path", "required": true, "description": "The fence token the start answered", "schema": { "type": "integer", "format": "int64", "minimum": 1, "maximum": u64::MAX } });
    let if_match = |description: &str| {
        json!({ "name": "If-Match", "in": "header", "description": description,
                "schema": { "type": "string", "pattern": "^(\\*|(W/)?\"[0-9]+\")$" } })
    };
    let not_found = error(NOT_FOUND);
    let by_id = json!({ "id": "$response.body#/id" });
    // From a creation: the object's calls, and a start of each action the
    // initial state allows.
    let mut created_links = json!({
        "get": { "operationId": op("get"), "parameters": by_id },
        "history": { "operationId": op("history"), "parameters": by_id },
        "start": { "operationId": op("start"), "parameters": by_id },
        "patch_data": { "operationId": op("patch_data"), "parameters": by_id }
    });
    // A removal, when the initial state allows one.
    if machine.state(machine.initial()).remove.is_some() {
        created_links["remove"] = json!({ "operationId": op("remove"), "parameters": by_id });
    }
    for rule in machine.rules_from(machine.initial()) {
        let action = &*machine.action(rule.action).name;
        created_links[format!("start_{action}")] = json!({
            "operationId": op("start"),
            "description": format!("`{action}` may start from the initial state"),
            "parameters": { "id": "$response.body#/id", "action": action }
        });
    }
    let finish = |what: &str, verb: &str| {
        json!({ "post": {
            "operationId": op(what),
            "tags": tags,
            "summary": format!("{verb} the action started with this fence token"),
            "parameters": [id, fence],
            "responses": common(json!({
                "200": object("The object after the action"),
                "403": error("Not the actor that started it"),
                "404": error("No action holds the object with this fence token (`not_in_flight`), or no such object (`not_found`; `removed`, the removal's entry, for an object that was removed)"),
                "409": error("The hold was revoked, or the object changed (the healer rolled it back)"),
            }))
        }})
    };
    paths.insert(
        format!("{base}/objects"),
        json!({
            "post": {
                "operationId": op("create"),
                "tags": tags,
                "summary": "Create an object in the machine's initial state",
                "requestBody": { "required": true, "content": { "application/json": { "schema": {
                    "type": "object", "required": ["id"], "additionalProperties": false,
                    "properties": { "id": { "type": "string", "minLength": 1 }, "data": { "nullable": true } }
                } } } },
                "responses": common(json!({
                    "201": linked("The object created", created_links),
                    "409": error("The object exists"),
                    "413": error("The body is past the limit, or the object's record with it past what the store takes (`too_large`, naming the object)")
                }))
            },
            "get": {
                "operationId": op("list"),
                "tags": tags,
                "summary": "List objects, optionally those in one state, optionally a page at a time",
                "description": "Without `limit` or `after`: every object (in the state), sorted by id. With either: the objects past `after` in the store's order (by id; on etcd an id's `/` sorts as `%2F`), at most `limit` of them, and `next` when objects past the last one remain (in any state: with `state`, the page after may be empty): list again with `after` set to it. Then watch with `Last-Event-ID` set to the (first) answer's `last_event_id`: no write is missed between the list and the watch.",
                "parameters": [
                    { "name": "state", "in": "query", "schema": { "type": "string", "enum": states } },
                    { "name": "limit", "in": "query", "description": "At most this many objects", "schema": { "type": "integer", "minimum": 1, "maximum": u64::MAX } },
                    { "name": "after", "in": "query", "description": "Only the objects past this id: the `next` of the page before", "schema": { "type": "string" } }
                ],
                "responses": common(json!({
                    "200": { "description": "The objects", "content": { "application/json": { "schema": {
                        "type": "object", "required": ["objects", "last_event_id"],
                        "properties": {
                            "objects": { "type": "array", "items": object_ref },
                            "last_event_id": { "type": "integer", "minimum": 0, "description": "The newest write's event id when the list was read: a watch resumed after it (`Last-Event-ID`) meets every write the list may not show (a write it shows may come again, at a version the list already has). With pages, the first page's" },
                            "next": { "type": "string", "description": "The last object's id, when objects past it remain (in any state): the next page's `after`" },
                            "unreadable": {
                                "type": "array",
                                "description": "Records met that the service cannot read (written by a newer spec, or not by fsm), whatever the state asked; absent when there are none",
                                "items": { "type": "object", "required": ["id", "message"], "additionalProperties": false, "properties": {
                                    "id": { "type": "string" }, "message": { "type": "string" }
                                } }
                            }
                        }
                    } } } }
                }))
            }
        }),
    );
    let counts: Map<String, Value> = states
        .iter()
        .map(|s| ((*s).to_owned(), json!({ "type": "integer", "minimum": 0 })))
        .collect();
    paths.insert(
        format!("{base}/summary"),
        json!({ "get": {
            "operationId": op("summary"),
            "tags": tags,
            "summary": "The machine at a glance, without every object: how many objects are in each state, those an action holds, how many are past their deadline, how many records cannot be read, and how many requests wait for busy objects",
            "responses": common(json!({
                "200": { "description": "The summary", "content": { "application/json": { "schema": {
                    "type": "object",
                    "required": ["machine", "total", "states", "in_flight", "stuck", "unreadable", "waiting", "last_event_id"],
                    "properties": {
                        "machine": { "type": "string" },
                        "total": { "type": "integer", "minimum": 0, "description": "The objects read: the sum of `states`" },
                        "states": {
                            "type": "object", "required": states, "properties": counts, "additionalProperties": false,
                            "description": "Every state of the machine with how many objects are in it"
                        },
                        "in_flight": { "type": "array", "items": object_ref, "description": "The objects an action (visible or hidden) holds, by id, each with how many requests wait for it on this service (`waiting`)" },
                        "stuck": { "type": "integer", "minimum": 0, "description": "Objects held past their deadline: the healer's next pass rolls them back" },
                        "unreadable": { "type": "integer", "minimum": 0, "description": "Records the store holds but cannot read (say, written by a newer spec): counted nowhere else" },
                        "waiting": { "type": "integer", "minimum": 0, "description": "Requests waiting on this service for the machine's busy objects (`?wait`); each held object says how many wait for it" },
                        "last_event_id": { "type": "integer", "minimum": 0, "description": "The newest write's event id when the summary was read, as a list's: a watch resumed after it (`Last-Event-ID`) meets every write the summary may not count" }
                    }
                } } } }
            }))
        }}),
    );
    paths.insert(
        format!("{base}/objects/{{id}}"),
        json!({ "get": {
            "operationId": op("get"),
            "tags": tags,
            "summary": "An object",
            "parameters": [id, {
                "name": "If-None-Match", "in": "header",
                "description": "Entity tags (ETags this service gave, weak ones too) separated by commas (none: an empty list), or `*`: when one names the object's version, the answer is 304 without a body",
                "schema": { "type": "string", "pattern": "^(\\*|[ \\t]*((W/)?\"[^\"]*\"([ \\t]*,[ \\t]*(W/)?\"[^\"]*\")*)?[ \\t]*)$" }
            }],
            "responses": common(json!({
                "200": object("The object"),
                "304": {
                    "description": "Not modified: If-None-Match named the object's version",
                    "headers": { "ETag": { "description": "The object's version, quoted", "schema": { "type": "string", "pattern": "^\"[0-9]+\"$" } } }
                },
                "404": not_found
            }))
        },
        "delete": {
            "operationId": op("remove"),
            "tags": tags,
            "summary": "Remove the object: its record and history leave the store",
            "description": removable_in(machine),
            "parameters": [id, wait.clone(), if_match("Remove only at this version (an ETag), or `*`; a weak tag (`W/`) never matches")],
            "responses": common(json!({
                "200": {
                    "description": "Removed: the removal's entry, which watchers get as the object's last `write`",
                    "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{key}.Entry") } } }
                },
                "403": error("The actor holds none of the roles that may remove an object in its state, or the state has an owner and the actor is not it"),
                "404": not_found,
                "409": error("Busy: an action holds the object (with `wait`, still at its end); or conflict: it changed since it was read"),
                "412": error("If-Match: the object is at another version"),
                "422": error("Its state allows no removal")
            }))
        }}),
    );
    paths.insert(
        format!("{base}/objects/{{id}}/data"),
        json!({ "patch": {
            "operationId": op("patch_data"),
            "tags": tags,
            "summary": "Change the object's data (a JSON merge patch, RFC 7396) with an action: the change passes that action's rules",
            "parameters": [
                id,
                { "name": "action", "in": "query", "required": true, "schema": { "type": "string", "enum": actions } },
                wait.clone(),
                if_match("Change only at this version (an ETag), or `*`; a weak tag (`W/`) never matches")
            ],
            "requestBody": { "required": true, "content": { "application/merge-patch+json": { "schema": {} }, "application/json": { "schema": {} } } },
            "responses": common(json!({
                "200": object("The object, its data changed"),
                "403": error("A role is missing, or the actor does not own the state"),
                "404": not_found, "409": error("Busy (with `wait`, still at its end) or conflict"), "412": error("If-Match: the object is at another version"),
                "413": error("The body is past the limit, or the object's record with it past what the store takes (`too_large`, naming the object)"),
                "422": error("No rule for the action from this state, or a guard refused")
            }))
        }}),
    );
    paths.insert(
        format!("{base}/objects/{{id}}/history"),
        json!({ "get": {
            "operationId": op("history"),
            "tags": tags,
            "summary": "An object's history, oldest first, optionally a page at a time",
            "description": "Without `limit` or `after`: every entry kept. With either: the entries past version `after`, at most `limit` of them, and `next` when entries past the last one remain: read again with `after` set to it.",
            "parameters": [
                id,
                { "name": "limit", "in": "query", "description": "At most this many entries", "schema": { "type": "integer", "minimum": 1, "maximum": u64::MAX } },
                { "name": "after", "in": "query", "description": "Only the entries past this version: the `next` of the page before", "schema": { "type": "integer", "minimum": 0, "maximum": u64::MAX } }
            ],
            "responses": common(json!({
                "200": { "description": "The entries", "content": { "application/json": { "schema": {
                    "type": "object", "required": ["id", "entries"],
                    "properties": {
                        "id": { "type": "string" },
                        "entries": { "type": "array", "items": { "$ref": format!("#/components/schemas/{key}.Entry") } },
                        "next": { "type": "integer", "minimum": 1, "description": "The last entry's version, when entries past it remain: the next page's `after`" }
                    }
                } } } },
                "404": not_found
            }))
        }}),
    );
    paths.insert(
        format!("{base}/objects/{{id}}/actions/{{action}}"),
        json!({ "post": {
            "operationId": op("start"),
            "tags": tags,
            "summary": "Start an action (or, with run=true, run it whole)",
            "parameters": [
                id,
                { "name": "action", "in": "path", "required": true, "schema": { "type": "string", "enum": actions } },
                { "name": "run", "in": "query", "schema": { "type": "boolean" } },
                wait.clone(),
                if_match("Start only at this version (an ETag), or `*`; a weak tag (`W/`) never matches")
            ],
            "responses": common(json!({
                "200": object("With run=true: the object after the action"),
                "201": linked(
                    "Started: the object in the action's transition state, and its fence token",
                    json!({
                        "complete": { "operationId": op("complete"), "parameters": { "id": "$request.path.id", "token": "$response.body#/fence" } },
                        "fail": { "operationId": op("fail"), "parameters": { "id": "$request.path.id", "token": "$response.body#/fence" } }
                    })
                ),
                "403": error("A role is missing, or the actor does not own the state"),
                "404": not_found, "409": error("Busy (another action runs; with `wait`, still at its end) or conflict (the object changed)"),
                "412": error("If-Match: the object is at another version"),
                "422": error("No rule for the action from this state, or a guard refused")
            }))
        }}),
    );
    paths.insert(
        format!("{base}/objects/{{id}}/in-flight/{{token}}/complete"),
        finish("complete", "Complete"),
    );
    paths.insert(
        format!("{base}/objects/{{id}}/in-flight/{{token}}/fail"),
        finish("fail", "Fail"),
    );
    paths.insert(
        format!("{base}/watch"),
        json!({ "get": {
            "operationId": op("watch"),
            "tags": tags,
            "summary": "Server-Sent Events, one `write` per write, resumable with Last-Event-ID; a `gap` event when writes were missed",
            "parameters": [{ "name": "Last-Event-ID", "in": "header", "description": "The id of the last event seen: the stream resumes after it (with a `gap` first when writes after it were dropped, or when it is not an id the store could have given). On etcd an id is its write's revision, the same on every service of the store: resume on any of them", "schema": { "type": "integer", "minimum": 0, "maximum": u64::MAX } }],
            "responses": common(json!({
                "200": { "description": "The stream: each event as the schema describes it", "content": { "text/event-stream": { "schema": {
                    "type": "object", "required": ["event", "data"],
                    "properties": {
                        "event": { "type": "string", "enum": ["write", "gap"] },
                        "id": { "type": "string", "pattern": "^[0-9]+$", "description": "A `write`'s id, for Last-Event-ID" },
                        "data": { "type": "string", "description": "JSON: for a `write`, the history entry with the object's `id` and the event's `seq` (`Entry`); for a `gap`, `after` (the event id the stream goes on after) and a `message`" }
                    }
                } } } }
            }))
        }}),
    );
}

/// The document.
pub fn document(service: &Service) -> Value {
    let mut schemas = Map::new();
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object", "required": ["error", "message"],
            "properties": {
                "error": { "type": "string", "description": ERROR_KINDS },
                "message": { "type": "string" },
                "line": { "type": "integer", "description": "A malformed body: the line of the mistake" },
                "column": { "type": "integer", "description": "A malformed body: the column of the mistake (0: at the line's start, as where the body ends early after a line break)" },
                "parameter": { "type": "string", "description": "Malformed: the parameter at fault, named as this document names it: a query parameter (one the call does not take, one that does not parse, or one given twice), a path segment or a header" }
            },
            "additionalProperties": true
        }),
    );
    let mut paths = Map::new();
    let mut tags = Vec::new();
    for (name, m) in &service.machines {
        let machine = m.runtime.machine();
        let states: Vec<&str> = machine.states().iter().map(|s| &*s.name).collect();
        let actions: Vec<&str> = machine.actions().iter().map(|a| &*a.name).collect();
        let key = prefix(name, &schemas);
        machine_schemas(&mut schemas, &key, &states, &actions);
        let max_wait = service.max_wait.as_secs();
        machine_paths(&mut paths, name, &key, machine, &states, &actions, max_wait);
        let mut tag = json!({ "name": name });
        if let Some(description) = machine.description() {
            tag["description"] = json!(description);
        }
        tags.push(tag);
    }
    // A machine's name in a resumed position: unreserved characters and
    // `%XX` escapes; an event id: a u64 without leading zeros.
    let position = "([A-Za-z0-9._~-]|%[0-9A-F]{2})+=(0|[1-9][0-9]{0,18})";
    paths.insert("/v1/watch".into(), json!({ "get": {
        "operationId": "watch_all",
        "summary": "Every machine's writes in one stream (one connection for a client that follows several machines), or those of the machines named, resumable with Last-Event-ID; a `gap` event, naming its machine, when writes were missed",
        "parameters": [{ "name": "machine", "in": "query", "style": "form", "explode": true, "description": "A machine to follow, given once per machine (`?machine=door&machine=vm`); none: every machine. One this service does not have is a 404", "schema": { "type": "array", "items": { "type": "string", "enum": service.machines.keys().collect::<Vec<_>>() } } }, { "name": "Last-Event-ID", "in": "header", "description": "The id of the last event seen: each machine's event id, `machine=id` joined by `&` (`door=41&vm=7`, names percent-encoded). The stream resumes after each (a machine not named: from the stream's opening; a machine this service does not have: passed over)", "schema": { "type": "string", "pattern": format!("^({position}(&{position})*)?$") } }],
        "responses": common(json!({
            "200": { "description": "The stream: each event as the schema describes it", "content": { "text/event-stream": { "schema": {
                "type": "object", "required": ["event", "data"],
                "properties": {
                    "event": { "type": "string", "enum": ["write", "gap"] },
                    "id": { "type": "string", "description": "A `write`'s id, for Last-Event-ID: each machine's last event id so far (`door=41&vm=7`)" },
                    "data": { "type": "string", "description": "JSON: for a `write`, the machine's stream's event (its `Entry`) with `machine`; for a `gap`, `machine`, `after` (the machine's event id the stream goes on after) and a `message`" }
                }
            } } } },
            "404": error("A `machine` this service does not have (`unknown_machine`)")
        }))
    }}));
    paths.insert("/metrics".into(), json!({ "get": { "operationId": "metrics", "summary": "Prometheus metrics", "security": [],
        "responses": { "200": { "description": "Prometheus text", "content": { "text/plain": { "schema": { "type": "string" } } } } } } }));
    paths.insert("/healthz".into(), json!({ "get": { "operationId": "healthz", "summary": "Whether the process serves: a liveness probe, which does not ask the stores", "security": [],
        "responses": { "200": { "description": "Serving", "content": { "application/json": { "schema": {
            "type": "object", "required": ["status"], "additionalProperties": false, "properties": { "status": { "type": "string", "enum": ["ok"] } }
        } } } } } } }));
    paths.insert("/readyz".into(), json!({ "get": { "operationId": "readyz", "summary": "Whether every machine's store answers a read: a readiness probe", "security": [],
        "responses": {
            "200": { "description": "Every store answers", "content": { "application/json": { "schema": {
                "type": "object", "required": ["status"], "additionalProperties": false, "properties": { "status": { "type": "string", "enum": ["ready"] } }
            } } } },
            "503": { "description": "Some store does not answer: `down` names each machine whose store does not, with why", "content": { "application/json": { "schema": {
                "type": "object", "required": ["error", "message", "down"],
                "properties": {
                    "error": { "type": "string", "enum": ["unavailable"] },
                    "message": { "type": "string" },
                    "down": { "type": "object", "additionalProperties": { "type": "string" } }
                }
            } } } }
        } } }));
    paths.insert("/openapi.json".into(), json!({ "get": { "operationId": "openapi", "summary": "This document", "security": [],
        "responses": { "200": { "description": "OpenAPI 3", "content": { "application/json": { "schema": { "type": "object" } } } } } } }));
    paths.insert("/".into(), json!({ "get": { "operationId": "page", "summary": "The web page", "security": [],
        "responses": { "200": { "description": "HTML", "content": { "text/html": { "schema": { "type": "string" } } } } } } }));
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "fsm serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "State machines from declarative specs, served: the table's checks, roles, owners, fencing and healing for any client. Each machine has paths of its own, under /v1/<machine>."
        },
        "tags": tags,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas
        },
        "security": [{ "bearer": [] }],
        "paths": paths
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::{prefix, segment};

    #[test]
    fn a_machine_name_is_one_path_segment_as_a_client_sends_it() {
        assert_eq!(segment("vm"), "vm");
        assert_eq!(segment("scaled_endpoint-2.v~1"), "scaled_endpoint-2.v~1");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn component_names_keep_the_characters_openapi_allows_and_stay_apart() {
        let mut taken = Map::new();
        assert_eq!(prefix("vm.v2", &taken), "vm.v2");
        assert_eq!(prefix("a b", &taken), "a_b");
        // `a/b` cleans to the name `a b` took: it gets a number.
        taken.insert("a_b.Object".into(), Value::Null);
        assert_eq!(prefix("a/b", &taken), "a_b_2");
        taken.insert("a_b_2.Object".into(), json!({}));
        assert_eq!(prefix("a?b", &taken), "a_b_3");
    }
}
