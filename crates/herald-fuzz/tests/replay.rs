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
