//! Replays every committed fuzz input through its target's entry point on stable Rust: the
//! corpus (`fuzz/corpus/<target>/`, which also keeps it meaningful without nightly) and every
//! input a fuzzer once crashed on (`fuzz/regressions/<target>/`, kept as regression tests).
//! Also checks that every entry point has its `cargo fuzz` target and a corpus, and the reverse.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted; none if it does not exist.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_committed_input_passes_its_target() {
    let mut failed = Vec::new();
    let mut count = 0;
    for (name, entry) in herald_fuzz::TARGETS {
        for kind in ["corpus", "regressions"] {
            for file in inputs(&fuzz_dir().join(kind).join(name)) {
                let bytes = std::fs::read(&file).unwrap();
                count += 1;
                if std::panic::catch_unwind(|| entry(&bytes)).is_err() {
                    failed.push(file.display().to_string());
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "inputs that fail their target: {failed:#?}"
    );
    assert!(
        count > 0,
        "no fuzz inputs found under {}",
        fuzz_dir().display()
    );
}

#[test]
fn every_target_has_its_fuzz_binary_and_a_corpus() {
    for (name, _) in herald_fuzz::TARGETS {
        let source = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source)
            .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            text.contains(&format!("herald_fuzz::target(\"{name}\")")),
            "{} must call its own entry point",
            source.display()
        );
        assert!(
            !inputs(&fuzz_dir().join("corpus").join(name)).is_empty(),
            "fuzz/corpus/{name} is empty"
        );
    }
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    for file in inputs(&fuzz_dir().join("fuzz_targets")) {
        let stem = file.file_stem().unwrap().to_str().unwrap().to_owned();
        herald_fuzz::target(&stem);
        assert!(
            manifest.contains(&format!("name = \"{stem}\"")),
            "fuzz/Cargo.toml lists {stem}"
        );
    }
}

/// `(name, version)` of every package a `Cargo.lock` names.
fn locked(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lock: toml::Value = toml::from_str(&text).unwrap();
    lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let field = |f: &str| p[f].as_str().unwrap().to_owned();
            (field("name"), field("version"))
        })
        .collect()
}

#[test]
fn the_fuzz_lock_file_pins_what_the_workspace_pins() {
    // The fuzz workspace builds the same crates: each must be the version the main lock file
    // pins, so a fuzz run tests the code that ships. After a dependency change:
    // `cp Cargo.lock fuzz/Cargo.lock && cargo metadata --manifest-path fuzz/Cargo.toml
    // --format-version 1 >/dev/null` (which adds libfuzzer-sys and drops what fuzz does not use).
    let main = locked(&fuzz_dir().join("../Cargo.lock"));
    let drift: Vec<_> = locked(&fuzz_dir().join("Cargo.lock"))
        .into_iter()
        .filter(|(name, version)| {
            let same_name: Vec<_> = main.iter().filter(|(n, _)| n == name).collect();
            !same_name.is_empty() && !same_name.iter().any(|(_, v)| v == version)
        })
        .collect();
    assert!(
        drift.is_empty(),
        "fuzz/Cargo.lock pins other versions than Cargo.lock: {drift:?}"
    );
}
