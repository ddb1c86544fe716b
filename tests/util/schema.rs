//! The checked-in JSON Schemas of the stored documents, as validators.

use std::path::Path;

fn load(name: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schema")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("schema file");
    serde_json::from_str(&text).expect("schema is JSON")
}

/// Validates run results (`schema/result.schema.json`).
pub fn result_validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&load("result.schema.json")).expect("the schema itself is valid")
}

/// Validates comparisons (`schema/comparison.schema.json`, whose runs refer to the result
/// schema by its `$id`).
pub fn comparison_validator() -> jsonschema::Validator {
    let result = load("result.schema.json");
    let id = result["$id"]
        .as_str()
        .expect("result schema has an $id")
        .to_string();
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_resource(
            id,
            jsonschema::Resource::from_contents(result).expect("result schema as a resource"),
        )
        .build(&load("comparison.schema.json"))
        .expect("the schema itself is valid")
}

/// Validates sweeps (`schema/sweep.schema.json`, whose steps refer to the comparison schema,
/// whose runs refer to the result schema).
pub fn sweep_validator() -> jsonschema::Validator {
    let resource = |name: &str| {
        let doc = load(name);
        let id = doc["$id"].as_str().expect("schema has an $id").to_string();
        (
            id,
            jsonschema::Resource::from_contents(doc).expect("schema as a resource"),
        )
    };
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_resources(
            [
                resource("result.schema.json"),
                resource("comparison.schema.json"),
            ]
            .into_iter(),
        )
        .build(&load("sweep.schema.json"))
        .expect("the schema itself is valid")
}

fn assert_valid_with(v: &jsonschema::Validator, doc: &serde_json::Value) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "schema violations: {errors:#?}");
}

/// Asserts that a document is valid against the schema of its kind.
pub fn assert_valid(doc: &serde_json::Value) {
    match doc["kind"].as_str() {
        Some("archbench-result") => assert_valid_with(&result_validator(), doc),
        Some("archbench-comparison") => assert_valid_with(&comparison_validator(), doc),
        Some("archbench-sweep") => assert_valid_with(&sweep_validator(), doc),
        other => panic!("not an archbench document: kind {other:?}"),
    }
}
