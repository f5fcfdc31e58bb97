use super::*;

/// The schema checked in for editors must match the Rust types. Regenerate with
/// `cargo run -p warden -- schema > docs/settings.schema.json`.
#[test]
fn checked_in_schema_is_current() {
    let generated = serde_json::to_value(schemars::schema_for!(SandboxSettings)).unwrap();
    let text = include_str!("../../../docs/settings.schema.json");
    let checked_in: serde_json::Value = serde_json::from_str(text).unwrap();
    assert!(
        generated == checked_in,
        "docs/settings.schema.json is stale: run `cargo run -p warden -- schema > docs/settings.schema.json`"
    );
}
