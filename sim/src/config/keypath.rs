//! Scenario key paths (`engine.max_batched_tokens`, `workload.arrival.rate`,
//! `tenants.0.weight`) and how a sweep point or a command-line override sets
//! one in a parsed scenario table. Setting a key only edits the TOML; whether the key exists and the
//! value has the right type is decided by the scenario's own validation
//! (`Scenario::from_table`), so a sweep can vary exactly what a scenario file
//! can say, with the same error messages.

/// Short names offered for long key paths.
const ALIASES: &[(&str, &str)] = &[("workload.rate", "workload.arrival.rate")];

/// The scenario key path a grid key stands for (aliases resolved).
pub fn resolve(key: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == key)
        .map(|(_, full)| *full)
        .unwrap_or(key)
}

/// Sets `path` (dotted; a numeric segment indexes an array) to `value` in
/// `table`, creating missing tables on the way. Errors say which segment
/// could not be followed.
pub fn set(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let segments: Vec<&str> = path.split('.').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(format!("{path:?} is not a key path (empty segment)"));
    }
    let (last, parents) = segments.split_last().expect("split yields one segment");
    let mut node = TableOrArray::Table(table);
    for (depth, seg) in parents.iter().enumerate() {
        let here = segments[..=depth].join(".");
        node = match node {
            TableOrArray::Table(t) => {
                let child = t
                    .entry(seg.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                descend(child, &here)?
            }
            TableOrArray::Array(a) => {
                let child = index(a, seg, &here)?;
                descend(child, &here)?
            }
        };
    }
    match node {
        TableOrArray::Table(t) => {
            t.insert(last.to_string(), value);
        }
        TableOrArray::Array(a) => {
            *index(a, last, path)? = value;
        }
    }
    Ok(())
}

enum TableOrArray<'a> {
    Table(&'a mut toml::Table),
    Array(&'a mut Vec<toml::Value>),
}

fn descend<'a>(v: &'a mut toml::Value, here: &str) -> Result<TableOrArray<'a>, String> {
    match v {
        toml::Value::Table(t) => Ok(TableOrArray::Table(t)),
        toml::Value::Array(a) => Ok(TableOrArray::Array(a)),
        other => Err(format!(
            "`{here}` is {}, not a table, so it has no keys below it",
            with_article(other.type_str())
        )),
    }
}

/// "an integer", "a string": for messages.
pub fn with_article(kind: &str) -> String {
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {kind}")
}

fn index<'a>(
    a: &'a mut [toml::Value],
    seg: &str,
    here: &str,
) -> Result<&'a mut toml::Value, String> {
    let n = a.len();
    let i: usize = seg
        .parse()
        .map_err(|_| format!("`{here}`: an array is indexed by a number (0..{n}), got {seg:?}"))?;
    a.get_mut(i)
        .ok_or_else(|| format!("`{here}`: index {i} is out of range (the array has {n} entries)"))
}

/// Removes the key at `path` (a no-op when absent).
pub fn remove(table: &mut toml::Table, path: &str) {
    let (parents, last) = match path.rsplit_once('.') {
        Some((p, l)) => (Some(p), l),
        None => (None, path),
    };
    let mut t = table;
    if let Some(parents) = parents {
        for seg in parents.split('.') {
            match t.get_mut(seg) {
                Some(toml::Value::Table(child)) => t = child,
                _ => return,
            }
        }
    }
    t.remove(last);
}

/// Reads the value at `path`, if present.
pub fn get<'a>(table: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
    let mut segs = path.split('.');
    let mut v = table.get(segs.next()?)?;
    for seg in segs {
        v = match v {
            toml::Value::Table(t) => t.get(seg)?,
            toml::Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &str) -> toml::Table {
        s.parse().unwrap()
    }

    #[test]
    fn sets_nested_keys_creating_tables() {
        let mut t = table("[engine]\nblock_size = 16\n[workload]\narrival = { process = \"poisson\", rate = 5.0 }\n");
        set(&mut t, "engine.block_size", 32.into()).unwrap();
        set(&mut t, "fleet.replicas", 4.into()).unwrap();
        set(&mut t, resolve("workload.rate"), 9.5.into()).unwrap();
        assert_eq!(get(&t, "engine.block_size"), Some(&32.into()));
        assert_eq!(get(&t, "fleet.replicas"), Some(&4.into()));
        assert_eq!(get(&t, "workload.arrival.rate"), Some(&9.5.into()));
        assert_eq!(get(&t, "workload.arrival.process"), Some(&"poisson".into()));
        remove(&mut t, "workload.arrival.rate");
        remove(&mut t, "no.such.key");
        assert_eq!(get(&t, "workload.arrival.rate"), None);
        assert_eq!(get(&t, "workload.arrival.process"), Some(&"poisson".into()));
    }

    #[test]
    fn indexes_arrays_and_explains_bad_paths() {
        let mut t = table("seed = 1\n[[tenants]]\nweight = 1\n[[tenants]]\nweight = 2\n");
        set(&mut t, "tenants.1.weight", 5.into()).unwrap();
        assert_eq!(get(&t, "tenants.1.weight"), Some(&5.into()));
        let e = set(&mut t, "tenants.2.weight", 5.into()).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let e = set(&mut t, "tenants.x.weight", 5.into()).unwrap_err();
        assert!(e.contains("indexed by a number"), "{e}");
        let e = set(&mut t, "seed.low", 5.into()).unwrap_err();
        assert!(e.contains("`seed` is an integer, not a table"), "{e}");
        assert!(set(&mut t, "engine..x", 1.into()).is_err());
    }
}
