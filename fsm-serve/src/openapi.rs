//! `GET /openapi.json`: the API as OpenAPI 3.0, with each machine's states and
//! actions as the enums of its paths' parameters.

use serde_json::{Value, json};

use crate::Service;

fn error(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
    })
}

fn object(description: &str) -> Value {
    json!({
        "description": description,
        "headers": { "ETag": { "description": "The object's version, quoted", "schema": { "type": "string" } } },
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Object" } } }
    })
}

/// The document.
pub fn document(service: &Service) -> Value {
    let machines: Vec<&str> = service.machines().collect();
    let states: Vec<String> = service
        .machines
        .values()
        .flat_map(|m| {
            m.runtime
                .machine()
                .states()
                .iter()
                .map(|s| s.name.to_string())
        })
        .collect();
    let actions: Vec<String> = service
        .machines
        .values()
        .flat_map(|m| {
            m.runtime
                .machine()
                .actions()
                .iter()
                .map(|a| a.name.to_string())
        })
        .collect();
    let machine = json!({ "name": "machine", "in": "path", "required": true, "schema": { "type": "string", "enum": machines } });
    let id =
        json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } });
    let fence = json!({ "name": "token", "in": "path", "required": true, "description": "The fence token the start answered", "schema": { "type": "integer", "format": "int64", "minimum": 1 } });
    let unauthorized = error("Missing or unknown bearer token");
    let not_found = error("Unknown machine, object or action");
    let finish = |what: &str| {
        json!({ "post": {
            "summary": format!("{what} the action started with this fence token"),
            "parameters": [machine, id, fence],
            "responses": {
                "200": object("The object after the action"),
                "401": unauthorized, "403": error("Not the actor that started it"),
                "404": error("No action holds the object with this fence token"),
                "409": error("The hold was revoked, or the object changed (the healer rolled it back)"),
            }
        }})
    };
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "fsm serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "State machines from declarative specs, served: the table's checks, roles, owners, fencing and healing for any client."
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Error": {
                    "type": "object", "required": ["error", "message"],
                    "properties": { "error": { "type": "string" }, "message": { "type": "string" } },
                    "additionalProperties": true
                },
                "Holder": {
                    "type": "object",
                    "properties": {
                        "action": { "type": "string", "enum": actions }, "origin": { "type": "string", "enum": states },
                        "actor": { "type": "string" }, "since": { "type": "string", "format": "date-time" },
                        "fence": { "type": "integer", "format": "int64" }, "abandoned": { "type": "boolean" },
                        "deadline_seconds": { "type": "number", "nullable": true }, "overdue": { "type": "boolean" },
                        "proposed": { "nullable": true, "description": "The data the action's start proposed, which its completion writes" }
                    }
                },
                "Object": {
                    "type": "object", "required": ["id", "machine", "state", "version"],
                    "properties": {
                        "id": { "type": "string" }, "machine": { "type": "string" },
                        "state": { "type": "string", "enum": states },
                        "version": { "type": "integer", "format": "int64" },
                        "changed_at": { "type": "string", "format": "date-time" },
                        "data": { "nullable": true },
                        "in_flight": { "allOf": [{ "$ref": "#/components/schemas/Holder" }], "nullable": true },
                        "hidden": { "allOf": [{ "$ref": "#/components/schemas/Holder" }], "nullable": true },
                        "fence": { "type": "integer", "format": "int64", "description": "On a start: the action's fence token" }
                    }
                }
            }
        },
        "security": [{ "bearer": [] }],
        "paths": {
            "/v1/{machine}/objects": {
                "post": {
                    "summary": "Create an object in the machine's initial state",
                    "parameters": [machine],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["id"], "additionalProperties": false,
                        "properties": { "id": { "type": "string", "minLength": 1 }, "data": { "nullable": true } }
                    } } } },
                    "responses": {
                        "201": object("The object created"), "400": error("Malformed body, with its line and column"),
                        "401": unauthorized, "404": not_found, "409": error("The object exists"), "413": error("Body too large")
                    }
                },
                "get": {
                    "summary": "List objects, optionally those in one state",
                    "parameters": [machine, { "name": "state", "in": "query", "schema": { "type": "string", "enum": states } }],
                    "responses": {
                        "200": { "description": "The objects", "content": { "application/json": { "schema": {
                            "type": "object", "properties": { "objects": { "type": "array", "items": { "$ref": "#/components/schemas/Object" } } }
                        } } } },
                        "400": error("Unknown state"), "401": unauthorized, "404": not_found
                    }
                }
            },
            "/v1/{machine}/objects/{id}": {
                "get": {
                    "summary": "An object",
                    "parameters": [machine, id],
                    "responses": { "200": object("The object"), "401": unauthorized, "404": not_found }
                }
            },
            "/v1/{machine}/objects/{id}/data": {
                "patch": {
                    "summary": "Change the object's data (a JSON merge patch, RFC 7396) with an action: the change passes that action's rules",
                    "parameters": [
                        machine, id,
                        { "name": "action", "in": "query", "required": true, "schema": { "type": "string", "enum": actions } },
                        { "name": "If-Match", "in": "header", "description": "Change only at this version (an ETag)", "schema": { "type": "string" } }
                    ],
                    "requestBody": { "required": true, "content": { "application/merge-patch+json": { "schema": {} }, "application/json": { "schema": {} } } },
                    "responses": {
                        "200": object("The object, its data changed"),
                        "400": error("Malformed body, or no action named"),
                        "401": unauthorized, "403": error("A role is missing, or the actor does not own the state"),
                        "404": not_found, "409": error("Busy or conflict"), "412": error("If-Match: the object is at another version"),
                        "422": error("No rule for the action from this state, or a guard refused")
                    }
                }
            },
            "/v1/{machine}/objects/{id}/history": {
                "get": {
                    "summary": "An object's history, oldest first",
                    "parameters": [machine, id],
                    "responses": { "200": { "description": "The entries" }, "401": unauthorized, "404": not_found }
                }
            },
            "/v1/{machine}/objects/{id}/actions/{action}": {
                "post": {
                    "summary": "Start an action (or, with run=true, run it whole)",
                    "parameters": [
                        machine, id,
                        { "name": "action", "in": "path", "required": true, "schema": { "type": "string", "enum": actions } },
                        { "name": "run", "in": "query", "schema": { "type": "boolean" } },
                        { "name": "If-Match", "in": "header", "description": "Start only at this version (an ETag)", "schema": { "type": "string" } }
                    ],
                    "responses": {
                        "200": object("With run=true: the object after the action"),
                        "201": object("Started: the object in the action's transition state, and its fence token"),
                        "401": unauthorized, "403": error("A role is missing, or the actor does not own the state"),
                        "404": not_found, "409": error("Busy (another action runs) or conflict (the object changed)"),
                        "412": error("If-Match: the object is at another version"),
                        "422": error("No rule for the action from this state, or a guard refused"),
                        "503": error("The store is unavailable; retry")
                    }
                }
            },
            "/v1/{machine}/objects/{id}/in-flight/{token}/complete": finish("Complete"),
            "/v1/{machine}/objects/{id}/in-flight/{token}/fail": finish("Fail"),
            "/v1/{machine}/watch": {
                "get": {
                    "summary": "Server-Sent Events, one `write` per write, resumable with Last-Event-ID; a `gap` event when writes were missed",
                    "parameters": [machine, { "name": "Last-Event-ID", "in": "header", "description": "The id of the last event seen: the stream resumes after it", "schema": { "type": "integer", "minimum": 0 } }],
                    "responses": {
                        "200": { "description": "The stream", "content": { "text/event-stream": { "schema": { "type": "string" } } } },
                        "400": error("Last-Event-ID is not an event id"),
                        "401": unauthorized, "404": not_found, "503": error("Too many watch streams")
                    }
                }
            },
            "/metrics": { "get": { "summary": "Prometheus metrics", "security": [],
                "responses": { "200": { "description": "Prometheus text", "content": { "text/plain": { "schema": { "type": "string" } } } } } } },
            "/openapi.json": { "get": { "summary": "This document", "security": [],
                "responses": { "200": { "description": "OpenAPI 3", "content": { "application/json": { "schema": { "type": "object" } } } } } } },
            "/": { "get": { "summary": "The web page", "security": [],
                "responses": { "200": { "description": "HTML", "content": { "text/html": { "schema": { "type": "string" } } } } } } }
        }
    })
}
