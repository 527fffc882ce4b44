//! The config-file layer: reading a TOML file into [`Layers`], checking its shape (scalars at
//! the top, the `[history]`, `[limits]`, `[hooks]`, `[mqtt]` and `[pusher]` tables, a `[[namespaces]]`
//! array of tables) and rejecting unknown keys
//! with a "did you mean" hint.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Value;

use super::hooks::HOOK_KEYS;
use super::layers::{Layers, Raw, Source, KEYS, NAMESPACE_KEYS};
use super::limits::LIMIT_KEYS;
use super::mqtt::MQTT_KEYS;
use super::pusher::PUSHER_KEYS;
use super::validate::wrong_type;
use super::ConfigError;

/// The keys of the `[history]` table.
const HISTORY_KEYS: &[&str] = &["size", "age", "last_on_subscribe"];

/// The tables of scalar keys, with their keys.
const TABLES: &[(&str, &[&str])] = &[
    ("history", HISTORY_KEYS),
    ("limits", LIMIT_KEYS),
    ("hooks", HOOK_KEYS),
    ("mqtt", MQTT_KEYS),
    ("pusher", PUSHER_KEYS),
];

impl Layers {
    /// Applies the config file at `path`.
    pub(super) fn read_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.read_file_text(path, &text)
    }

    /// Applies `text` as the config file at `path` (which only names it in messages).
    pub(super) fn read_file_text(&mut self, path: &Path, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.to_owned(),
                    message: e.to_string().trim_end().to_owned(),
                })?;
        let at = |key: String| Source::File {
            path: path.to_owned(),
            key,
        };
        let unknown = |key: String, known: &[&str]| ConfigError::UnknownKey {
            path: path.to_owned(),
            hint: hint(key.rsplit(['.', ']']).next().unwrap_or(&key), known),
            key,
        };
        for (name, value) in table {
            if let Some(k) = KEYS.iter().find(|k| k.name == name && !name.contains('.')) {
                self.values.insert(k.name, (Raw::Toml(value), at(name)));
            } else if let Some((table, keys)) = TABLES.iter().find(|(t, _)| *t == name) {
                let Value::Table(entries) = value else {
                    return Err(wrong_type(
                        &value,
                        table,
                        at(name),
                        &format!("a table ([{table}])"),
                    ));
                };
                for (sub, value) in entries {
                    let dotted = format!("{table}.{sub}");
                    match KEYS.iter().find(|k| k.name == dotted) {
                        Some(k) => {
                            self.values.insert(k.name, (Raw::Toml(value), at(dotted)));
                        }
                        None => return Err(unknown(dotted, keys)),
                    }
                }
            } else if name == "namespaces" {
                let Value::Array(items) = value else {
                    return Err(wrong_type(
                        &value,
                        "namespaces",
                        at(name),
                        "an array ([[namespaces]])",
                    ));
                };
                for (i, item) in items.into_iter().enumerate() {
                    let Value::Table(item) = item else {
                        let key = format!("namespaces[{i}]");
                        return Err(wrong_type(&item, "namespace", at(key), "a table"));
                    };
                    let mut ns = BTreeMap::new();
                    for (sub, value) in item {
                        let dotted = format!("namespaces[{i}].{sub}");
                        if !NAMESPACE_KEYS.contains(&sub.as_str()) {
                            return Err(unknown(dotted, NAMESPACE_KEYS));
                        }
                        ns.insert(sub, (Raw::Toml(value), at(dotted)));
                    }
                    self.namespaces.push(ns);
                }
            } else {
                let known: Vec<&str> = KEYS
                    .iter()
                    .map(|k| k.name)
                    .filter(|n| !n.contains('.'))
                    .chain(["history", "limits", "hooks", "mqtt", "pusher", "namespaces"])
                    .collect();
                return Err(unknown(name, &known));
            }
        }
        Ok(())
    }
}

/// ` (did you mean "x"?)` when a known key is close to `got`.
fn hint(got: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (edit_distance(got, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::super::tests::err;
    use super::super::ConfigFlags;

    #[test]
    fn unknown_keys_are_named() {
        let e = err(Some("listn = \"127.0.0.1:1\""), &[], ConfigFlags::default());
        assert!(
            e.contains("unknown key \"listn\"") && e.contains("did you mean \"listen\""),
            "{e}"
        );
        let e = err(Some("[history]\nsise = 3"), &[], ConfigFlags::default());
        assert!(
            e.contains("unknown key \"history.sise\"") && e.contains("\"size\""),
            "{e}"
        );
        let e = err(
            Some("[[namespaces]]\nprefix = \"a/\"\nbogus = 1"),
            &[],
            ConfigFlags::default(),
        );
        assert!(e.contains("unknown key \"namespaces[0].bogus\""), "{e}");
        let e = err(Some("listen = "), &[], ConfigFlags::default());
        assert!(
            e.contains("is not valid TOML") && e.contains("line 1"),
            "{e}"
        );
    }
}
