//! The JSON Schemas of the delegation file and the project policy (`schemas/*.json`,
//! `harness schema`), generated from the types that read them: each key is declared once, as a
//! field of [`RawFile`](crate::spec::RawFile), [`RawPolicy`](crate::project::RawPolicy) or a
//! section's type (the gate keys in [`with_gate_keys!`](crate::gates::with_gate_keys)), with its
//! documentation and its range beside it. Editors use the schemas for completion and
//! validation (`# yaml-language-server: $schema=…`); a test fails when the committed files
//! differ from what the types generate (`HARNESS_BLESS=1` rewrites them).

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::project::RawPolicy;
use crate::spec::RawFile;
use crate::tree::profile::NOT_IN_PROFILE;

/// The delegation file's schema, as `schemas/delegation.schema.json` holds it.
pub const DELEGATION_FILE: &str = "delegation.schema.json";
/// The project policy's schema, as `schemas/policy.schema.json` holds it.
pub const POLICY_FILE: &str = "policy.schema.json";

/// Where the schemas say they live (`$id`).
const BASE_ID: &str = "https://harness.dev/schemas/";

/// The JSON Schema (draft 2020-12) of a delegation file: what `harness run` reads.
pub fn delegation() -> Value {
    let mut generator = generator();
    let mut root = generator.root_schema_for::<RawFile>().to_value();
    let profile = profile(&root);
    finish(&mut root, DELEGATION_FILE, profile);
    root
}

/// The JSON Schema (draft 2020-12) of a project policy, `.harness/policy.yaml`.
pub fn policy() -> Value {
    let mut generator = generator();
    // The delegation file's schema first, for the profiles of `delegates:` (its definitions
    // are the policy's too).
    let file = generator.root_schema_for::<RawFile>().to_value();
    let mut root = generator.root_schema_for::<RawPolicy>().to_value();
    let profile = profile(&file);
    finish(&mut root, POLICY_FILE, profile);
    root
}

/// The schema named `name` (`delegation` or `policy`, or its file name), if there is one.
pub fn named(name: &str) -> Option<Value> {
    match name.trim_end_matches(".schema.json") {
        "delegation" => Some(delegation()),
        "policy" => Some(policy()),
        _ => None,
    }
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12().into_generator()
}

/// A named child profile: the delegation file's keys without those a profile may not have.
fn profile(file: &Value) -> Value {
    let mut properties = file["properties"].as_object().cloned().unwrap_or_default();
    for (key, _) in NOT_IN_PROFILE {
        properties.shift_remove(key);
    }
    json!({
        "description": "A named child profile: a delegation without `task` (each call gives it), `workdir` (children share the parent's), `parent_id` or `delegates`.",
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
        "required": ["delegate"],
    })
}

/// The root's `$id`, the profiles of `delegates:`, and the generator's noise left out.
fn finish(root: &mut Value, file: &str, profile: Value) {
    if let Some(delegates) = root
        .get_mut("properties")
        .and_then(|p| p.get_mut("delegates"))
    {
        delegates["additionalProperties"] = json!({"$ref": "#/$defs/profile"});
    }
    root.as_object_mut()
        .expect("a struct's schema is an object")
        .entry("$defs")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("$defs is an object")
        .insert("profile".to_owned(), profile);
    *root = finished(std::mem::take(root), file);
}

/// A schema `root` as generated, made the one kept in `schemas/FILE`: its `$id`, its own keys
/// first, and the generator's noise left out — a `default: null` on every optional key and the
/// integer widths (`format: uint32`); a doc comment's line breaks are not the text's.
pub fn finished(mut root: Value, file: &str) -> Value {
    let Value::Object(map) = &mut root else {
        unreachable!("a struct's schema is an object")
    };
    // The schema's own keys first, as a reader expects them.
    let mut ordered = Map::new();
    let schema = map.shift_remove("$schema");
    ordered.insert("$schema".to_owned(), schema.unwrap_or(Value::Null));
    ordered.insert("$id".to_owned(), json!(format!("{BASE_ID}{file}")));
    for key in ["title", "description"] {
        if let Some(value) = map.shift_remove(key) {
            ordered.insert(key.to_owned(), value);
        }
    }
    ordered.extend(std::mem::take(map));
    let mut root = Value::Object(ordered);
    tidy(&mut root);
    root
}

/// Removes `default: null` and `format` from every subschema, and unwraps descriptions: a doc
/// comment's line breaks are not the text's (a blank line is).
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = unwrap_lines(text);
            }
            if map.get("default") == Some(&Value::Null) {
                map.shift_remove("default");
            }
            if map.get("format").is_some_and(Value::is_string) {
                map.shift_remove("format");
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// `text` with each single line break a space; paragraphs (a blank line) kept.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gate_key_is_in_the_file_the_policy_defaults_and_a_profile() {
        let file = delegation();
        let policy = policy();
        let gates = &generator()
            .root_schema_for::<crate::gates::RawGates>()
            .to_value();
        let keys: Vec<&String> = gates["properties"]
            .as_object()
            .expect("keys")
            .keys()
            .collect();
        assert_eq!(keys.len(), 12, "{keys:?}");
        let defaults = &policy["$defs"]["verification_defaults"];
        for key in keys {
            assert!(file["properties"].get(key).is_some(), "file: {key}");
            assert!(
                file["$defs"]["profile"]["properties"].get(key).is_some(),
                "profile: {key}"
            );
            assert!(defaults["properties"].get(key).is_some(), "defaults: {key}");
            assert!(
                policy["$defs"]["profile"]["properties"].get(key).is_some(),
                "policy profile: {key}"
            );
        }
        assert!(file["$defs"]["profile"]["properties"].get("task").is_none());
        assert_eq!(
            file["$id"],
            "https://harness.dev/schemas/delegation.schema.json"
        );
    }
}
