//! Clearer messages for a wrong-typed choice key. serde reports a number or
//! table where a policy name belongs as "invalid type: unit variant, expected
//! string only" or "expected variant identifier", without the names allowed.
//! Deserializing again with a placeholder string at that key makes serde
//! list them ("expected `round-robin` or `least-outstanding`"), and that list
//! goes into the message.

/// A better message for the error at `path` (dotted) of `table`, if the
/// error is a wrong-typed choice.
pub(super) fn hint(table: &toml::Table, path: &str, msg: &str) -> Option<String> {
    if !(msg.starts_with("invalid type") && msg.contains("variant")) {
        return None;
    }
    let mut t = table.clone();
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop()?;
    let mut cur = &mut t;
    for p in parts {
        cur = cur.get_mut(p)?.as_table_mut()?;
    }
    cur.insert(last.to_string(), toml::Value::String("\u{1}".into()));
    let e =
        serde_path_to_error::deserialize::<_, super::ScenarioFile>(toml::Value::Table(t)).err()?;
    let again = e.inner().message().to_string();
    let (_, allowed) = again.split_once(", expected ")?;
    let got = msg
        .strip_prefix("invalid type: ")
        .and_then(|m| m.split_once(", expected"))
        .map(|(g, _)| g)
        .unwrap_or("another type");
    let got = if got == "unit variant" {
        "a value that is not a string"
    } else {
        got
    };
    let allowed = allowed.trim();
    let allowed = allowed.strip_prefix("one of ").unwrap_or(allowed);
    Some(format!("expected a name, one of {allowed}; got {got}"))
}
