//! Build script of the `herald` binary: names the commit it is built from, so `herald --version`
//! says `herald 0.1.0 (abc1234 2026-11-29)` (the short hash and the commit's date).
//!
//! The commit comes from, in order:
//! 1. `HERALD_BUILD_COMMIT` (`"abc1234 2026-11-29"`), for builds from a copy without `.git`
//!    that know their commit (the container image's build passes it as a build argument);
//! 2. `git` in the source tree (`git show -s --format='%h %cs' HEAD`);
//! 3. otherwise `unknown`: a build from a tarball, or where `git` is missing or refuses the
//!    tree (a checkout owned by another user), still builds.
//!
//! The script runs again only when the commit can have changed: when `.git/HEAD` changes (a
//! checkout) or the file of the branch it points to (a commit), or `packed-refs` when the branch
//! is only there; when the variable changes; or when this file does. A build from a tarball
//! watches only this file, so it never runs again needlessly. Uncommitted changes are not
//! marked: the hash names the commit the tree started from.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=HERALD_BUILD_COMMIT");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match std::env::var("HERALD_BUILD_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_owned(),
        _ => match git(&manifest_dir, &["show", "-s", "--format=%h %cs", "HEAD"]) {
            Some(commit) => {
                watch_head(&manifest_dir);
                commit
            }
            None => "unknown".to_owned(),
        },
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=HERALD_VERSION_LINE={version} ({commit})");
}

/// Runs `git ARGS` in `dir` and answers its first line of output, or `None` when git is
/// missing, fails, or prints nothing.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let line = text.lines().next()?.trim().to_owned();
    (!line.is_empty()).then_some(line)
}

/// Tells cargo to run this script again when HEAD moves: `HEAD` itself and the ref it names
/// (its loose file, else `packed-refs` and the loose file's folder). Only paths that exist are
/// named, since cargo runs a script on every build while a path it watches is missing.
fn watch_head(dir: &Path) {
    let git_path = |name: &str| -> Option<PathBuf> {
        let path = PathBuf::from(git(dir, &["rev-parse", "--git-path", name])?);
        Some(if path.is_absolute() {
            path
        } else {
            dir.join(path)
        })
    };
    let watch = |path: &Path| {
        if path.is_file() {
            println!("cargo:rerun-if-changed={}", path.display());
            true
        } else {
            false
        }
    };
    let Some(head) = git_path("HEAD") else { return };
    watch(&head);
    // A detached HEAD holds the hash itself: watching HEAD is enough.
    let Some(reference) = std::fs::read_to_string(&head)
        .ok()
        .and_then(|text| text.strip_prefix("ref:").map(|r| r.trim().to_owned()))
    else {
        return;
    };
    let Some(loose) = git_path(&reference) else {
        return;
    };
    if !watch(&loose) {
        // The branch is only in `packed-refs` (or not yet anywhere): watch that file, and the
        // folder where its next commit will write the loose file.
        if let Some(packed) = git_path("packed-refs") {
            watch(&packed);
        }
        if let Some(folder) = loose.parent().filter(|folder| folder.is_dir()) {
            println!("cargo:rerun-if-changed={}", folder.display());
        }
    }
}
