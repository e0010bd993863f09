//! Unambiguous unit names for bandwidths.
//!
//! The first datasheet keys ended in `_gbps` / `_tbps`, which networking
//! reads as gigabits per second, while the cost model divides bytes by them:
//! a 400 Gb/s NIC typed as `network_gbps = 400` was 8× too fast. The
//! documented names say bytes (`_gbyte_s`, `_tbyte_s`); the old ones are
//! still read, each with a deprecation note for `check` and stderr. The Rust
//! fields of `HardwareSpec` keep the old names (the catalog and the cost
//! model use them), so a scenario table is rewritten to them before serde
//! reads it.

/// (documented key, deprecated key = the `HardwareSpec` field, unit).
pub const BANDWIDTH_KEYS: [(&str, &str, &str); 4] = [
    ("memory_bw_tbyte_s", "memory_bw_tbps", "terabytes/s"),
    ("interconnect_gbyte_s", "interconnect_gbps", "gigabytes/s"),
    ("pcie_gbyte_s", "pcie_gbps", "gigabytes/s"),
    ("network_gbyte_s", "network_gbps", "gigabytes/s"),
];

/// Rewrites `[hardware.spec]` bandwidth keys to the field names; returns the
/// deprecation notes, or an error when both spellings of one key are given.
pub(super) fn normalize(table: &mut toml::Table) -> Result<Vec<String>, (String, String)> {
    let mut notes = Vec::new();
    kv_transfer(table, &mut notes)?;
    let Some(toml::Value::Table(spec)) = table
        .get_mut("hardware")
        .and_then(|h| h.as_table_mut())
        .and_then(|h| h.get_mut("spec"))
    else {
        return Ok(notes);
    };
    for (new, old, unit) in BANDWIDTH_KEYS {
        match (spec.contains_key(new), spec.contains_key(old)) {
            (true, true) => {
                return Err((
                    format!("hardware.spec.{old}"),
                    format!("give `{new}` only (`{old}` is its deprecated name)"),
                ))
            }
            (true, false) => {
                let v = spec.remove(new).expect("present");
                spec.insert(old.to_string(), v);
            }
            (false, true) => notes.push(format!(
                "hardware.spec.{old} is deprecated (it reads as bits but means {unit}); \
                 rename it to {new}"
            )),
            (false, false) => {}
        }
    }
    Ok(notes)
}

/// `[fleet.kv_transfer]`'s bandwidth under its old name, `bandwidth_gbps`,
/// is read as `bandwidth_gbyte_s` with a deprecation note, as the
/// datasheet's old names are.
fn kv_transfer(table: &mut toml::Table, notes: &mut Vec<String>) -> Result<(), (String, String)> {
    let Some(kt) = table
        .get_mut("fleet")
        .and_then(|f| f.as_table_mut())
        .and_then(|f| f.get_mut("kv_transfer"))
        .and_then(|k| k.as_table_mut())
    else {
        return Ok(());
    };
    let (new, old) = ("bandwidth_gbyte_s", "bandwidth_gbps");
    match (kt.contains_key(new), kt.remove(old)) {
        (true, Some(_)) => Err((
            format!("fleet.kv_transfer.{old}"),
            format!("give `{new}` only (`{old}` is its deprecated name)"),
        )),
        (false, Some(v)) => {
            kt.insert(new.to_string(), v);
            notes.push(format!(
                "fleet.kv_transfer.{old} is deprecated (it reads as bits but means gigabytes/s); \
                 rename it to {new}"
            ));
            Ok(())
        }
        (_, None) => Ok(()),
    }
}
