//! The `herald` binary's command line, run as a real process: `version`, help, `config check`
//! (good file, bad keys and values, precedence of environment and flags, the sample config) and
//! `token`. None of these start the server.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use herald_core::auth::TokenKeys;

const SECRET: &str = "test-secret-0123456789";

/// `herald` with a clean environment (no inherited HERALD_* or RUST_LOG) run in `dir`.
fn herald(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_herald"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("HERALD_") || name == "RUST_LOG" {
            cmd.env_remove(name);
        }
    }
    cmd.current_dir(dir);
    cmd
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run herald");
    (
        status.code().expect("exit code"),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const GOOD: &str = r#"
listen = "127.0.0.1:7171"
api_key = "hk_file_key_do_not_print"
token_secret = "file-secret-do-not-print"
sync = "always"
[history]
size = 10
[[namespaces]]
prefix = "prices/"
last_on_subscribe = true
"#;

/// `git ARGS` in this crate's folder: its output's first line, or `None` where git is missing
/// or the tree is not a checkout (a build from a tarball).
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let line = text.lines().next()?.trim().to_owned();
    (output.status.success() && !line.is_empty()).then_some(line)
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = run(herald(dir.path()).arg("--version"));
    assert_eq!(code, 0);
    let line = out.trim();
    let (_, subcommand_out, _) = run(herald(dir.path()).arg("version"));
    assert_eq!(
        subcommand_out.trim(),
        line,
        "`herald version` and `--version` differ"
    );

    // `herald 0.1.0 (abc1234 2026-11-29)`
    let prefix = format!("herald {} (", env!("CARGO_PKG_VERSION"));
    let commit = line
        .strip_prefix(prefix.as_str())
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not `{prefix}COMMIT DATE)`: {line:?}"));
    if let Some(given) = option_env!("HERALD_BUILD_COMMIT").filter(|given| !given.is_empty()) {
        assert_eq!(
            commit,
            given.trim(),
            "HERALD_BUILD_COMMIT was set for this build"
        );
        return;
    }
    if git(&["rev-parse", "--git-dir"]).is_none() {
        assert_eq!(commit, "unknown", "built outside a git checkout");
        return;
    }
    let (hash, date) = commit
        .split_once(' ')
        .unwrap_or_else(|| panic!("no `HASH DATE` in {line:?}"));
    assert!(
        hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "not a short commit hash: {hash:?} in {line:?}"
    );
    // The commit the binary was built from (HEAD then; others may have committed since).
    let known = git(&["show", "-s", "--format=%cs", &format!("{hash}^{{commit}}")]);
    assert_eq!(
        known.as_deref(),
        Some(date),
        "{hash} is not a commit of this repository dated {date}"
    );
}

#[test]
fn version_and_help() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = run(herald(dir.path()).arg("--help"));
    assert_eq!(code, 0);
    for word in [
        "serve",
        "config",
        "version",
        "token",
        "publish",
        "subscribe",
        "Examples:",
    ] {
        assert!(out.contains(word), "--help lacks {word}: {out}");
    }
    for sub in [
        &["serve"][..],
        &["config", "check"],
        &["version"],
        &["token"],
        &["publish"],
        &["subscribe"],
    ] {
        let (code, out, _) = run(herald(dir.path()).args(sub).arg("--help"));
        assert_eq!(code, 0);
        assert!(
            out.contains("Examples:"),
            "{sub:?} --help has no examples: {out}"
        );
    }
}

#[test]
fn config_check_prints_effective_config_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "herald.toml", GOOD);
    let (code, out, err) = run(herald(dir.path())
        .arg("config")
        .arg("check")
        .arg("--config")
        .arg(&file));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("listen = \"127.0.0.1:7171\""), "{out}");
    assert!(out.contains("sync = \"always\""), "{out}");
    assert!(out.contains("size = 10"), "{out}");
    assert!(out.contains("prefix = \"prices/\""), "{out}");
    assert!(out.contains("max_frame_bytes = 65536  # default"), "{out}");
    assert!(out.trim_end().ends_with("config ok"), "{out}");
    assert!(
        !out.contains("do_not_print") && !out.contains("do-not-print"),
        "{out}"
    );
    assert!(out.contains("<redacted>"), "{out}");
    // The printed config is TOML.
    out.parse::<toml::Table>()
        .expect("effective config is valid TOML");
}

#[test]
fn config_check_names_bad_key_and_value_with_source() {
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let file = write(dir.path(), "bad.toml", text);
        run(herald(dir.path())
            .args(["config", "check", "--config"])
            .arg(file))
    };
    let (code, out, err) = check("listn = \"127.0.0.1:1\"\n");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("unknown key \"listn\"") && err.contains("bad.toml"),
        "{err}"
    );
    assert!(err.contains("did you mean \"listen\""), "{err}");
    assert!(!out.contains("config ok"));

    let (code, _, err) = check("listen = \"foo:x\"\n");
    assert_eq!(code, 2);
    assert!(
        err.contains("invalid listen address \"foo:x\" (from "),
        "{err}"
    );
    assert!(err.contains("bad.toml: listen)"), "{err}");

    let (code, _, err) = check("[history]\nsize = 0\n");
    assert_eq!(code, 2);
    assert!(
        err.contains("history.size 0") && err.contains("bad.toml: history.size"),
        "{err}"
    );

    let (code, _, err) = check("[[namespaces]]\nprefix = \"a/\"\nhistory_age = 5\n");
    assert_eq!(code, 2);
    assert!(err.contains("namespaces[0].history_age"), "{err}");

    let (code, _, err) = check("listen = \n");
    assert_eq!(code, 2);
    assert!(err.contains("not valid TOML"), "{err}");

    let (code, _, err) = check("data = \"/proc/herald-data\"\n");
    assert_eq!(code, 2);
    assert!(
        err.contains("invalid data directory \"/proc/herald-data\" (from ")
            && err.contains("cannot be created in /proc"),
        "{err}"
    );

    let conf = write(dir.path(), "meteord.conf", "Persist maybe\n");
    let (code, _, err) = check(&format!("meteor_conf = {:?}\n", conf.display().to_string()));
    assert_eq!(code, 2);
    assert!(err.contains("Persist must be 0 or 1"), "{err}");

    let (code, _, err) =
        run(herald(dir.path()).args(["config", "check", "--config", "missing.toml"]));
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read config file missing.toml"),
        "{err}"
    );
}

#[test]
fn environment_overrides_file_and_flags_override_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "herald.toml", GOOD);
    let (code, out, err) = run(herald(dir.path())
        .args(["config", "check"])
        .env("HERALD_CONFIG", &file)
        .env("HERALD_LISTEN", "127.0.0.1:7272")
        .env("HERALD_SYNC", "off"));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("listen = \"127.0.0.1:7272\"  # HERALD_LISTEN"),
        "{out}"
    );
    assert!(out.contains("sync = \"off\"  # HERALD_SYNC"), "{out}");

    let (code, out, err) = run(herald(dir.path())
        .args(["config", "check", "--listen", "127.0.0.1:7373"])
        .env("HERALD_CONFIG", &file)
        .env("HERALD_LISTEN", "127.0.0.1:7272"));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("listen = \"127.0.0.1:7373\"  # --listen"),
        "{out}"
    );

    let (code, _, err) = run(herald(dir.path())
        .args(["config", "check", "--config"])
        .arg(&file)
        .env("HERALD_MAX_FRAME_BYTES", "12"));
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "invalid max_frame_bytes \"12\" (from HERALD_MAX_FRAME_BYTES): must be at least 1024"
        ),
        "{err}"
    );
}

#[test]
fn sample_config_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../herald.example.toml");
    let (code, out, err) = run(herald(dir.path())
        .args(["config", "check", "--config"])
        .arg(sample));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("config ok"));
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn token_is_minted_with_the_flag_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(herald(dir.path()).args([
        "token",
        "--sub",
        "alice",
        "--channel",
        "news",
        "--channel",
        "chat/*",
        "--publish",
        "chat/*",
        "--ttl",
        "1h",
        "--token-secret",
        SECRET,
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "only the token: {out}");
    let client = TokenKeys::new(SECRET.as_bytes())
        .verify(out.trim())
        .unwrap();
    assert_eq!(client.sub, "alice");
    assert!(client.check_subscribe("news").is_ok() && client.check_subscribe("chat/1").is_ok());
    assert!(client.check_subscribe("other").is_err());
    assert!(client.check_publish("chat/1").is_ok() && client.check_publish("news").is_err());
    let exp = client.expires.expect("expiry");
    assert!(exp.abs_diff(now() + 3600) <= 5, "exp {exp}");
    assert!(TokenKeys::new(b"some-other-secret!!")
        .verify(out.trim())
        .is_err());
}

#[test]
fn token_secret_comes_from_env_then_config_then_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let mint = |cmd: &mut Command| {
        let (code, out, err) = run(cmd.args(["token", "--sub", "bob", "--channel", "news"]));
        assert_eq!(code, 0, "{err}");
        out.trim().to_owned()
    };
    let verifies =
        |secret: &str, token: &str| TokenKeys::new(secret.as_bytes()).verify(token).is_ok();

    let token = mint(herald(dir.path()).env("HERALD_TOKEN_SECRET", SECRET));
    assert!(verifies(SECRET, &token));

    let file = write(dir.path(), "herald.toml", GOOD);
    let token = mint(herald(dir.path()).env("HERALD_CONFIG", &file));
    assert!(verifies("file-secret-do-not-print", &token));
    // The environment beats the file.
    let token = mint(
        herald(dir.path())
            .env("HERALD_CONFIG", &file)
            .env("HERALD_TOKEN_SECRET", SECRET),
    );
    assert!(verifies(SECRET, &token));

    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("token-secret"), "generated-secret-0123456789\n").unwrap();
    let token = mint(herald(dir.path()).env("HERALD_DATA", &data));
    assert!(verifies("generated-secret-0123456789", &token));
    let (code, out, err) = run(herald(dir.path())
        .args(["token", "--sub", "bob", "--data"])
        .arg(&data));
    assert_eq!(code, 0, "{err}");
    assert!(verifies("generated-secret-0123456789", out.trim()));
    assert!(verifies("generated-secret-0123456789", &token));
}

#[test]
fn token_without_any_secret_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = run(herald(dir.path()).args(["token", "--sub", "alice"]));
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("no token secret found"), "{err}");
    assert!(
        err.contains("--token-secret") && err.contains("HERALD_TOKEN_SECRET"),
        "{err}"
    );
    assert!(err.contains("herald-data/token-secret"), "{err}");

    let (code, _, err) =
        run(herald(dir.path()).args(["token", "--sub", "a", "--token-secret", "short"]));
    assert_eq!(code, 2);
    assert!(
        err.contains("(from --token-secret): must be at least 16 bytes"),
        "{err}"
    );
}

#[test]
fn publish_and_subscribe_report_an_unreachable_server() {
    let dir = tempfile::tempdir().unwrap();
    // Port 1 on loopback: nothing listens there.
    let (code, _, err) = run(herald(dir.path())
        .args(["publish", "news", "\"hello\""])
        .env("HERALD_URL", "http://127.0.0.1:1"));
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot reach http://127.0.0.1:1/v1/channels/news/messages"),
        "{err}"
    );
    let (code, _, err) = run(herald(dir.path()).args([
        "subscribe",
        "news",
        "--url",
        "http://127.0.0.1:1",
        "--timeout",
        "5s",
    ]));
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot connect to ws://127.0.0.1:1/v1/ws"),
        "{err}"
    );
}

#[test]
fn token_refuses_patterns_and_device_ids_no_server_would_accept() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, says) in [
        (
            "--channel",
            "chat/",
            "--channel: invalid channel pattern \"chat/\"",
        ),
        (
            "--publish",
            "news room",
            "--publish: invalid channel pattern \"news room\"",
        ),
        (
            "--device",
            "my phone",
            "--device: invalid device id \"my phone\"",
        ),
    ] {
        let (code, out, err) = run(herald(dir.path()).args([
            "token",
            "--sub",
            "a",
            "--token-secret",
            SECRET,
            flag,
            value,
        ]));
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(out.is_empty(), "a token was printed: {out}");
        assert!(err.contains(says), "{err}");
    }
    let (code, out, _) = run(herald(dir.path()).args([
        "token",
        "--sub",
        "a",
        "--token-secret",
        SECRET,
        "--channel",
        "chat/**",
        "--device",
        "phone-1",
    ]));
    assert_eq!(code, 0);
    assert_eq!(out.trim().split('.').count(), 3, "{out}");
}

#[test]
fn token_carries_a_user_info_object_and_refuses_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let mint = |user_info: &str| {
        run(herald(dir.path()).args([
            "token",
            "--sub",
            "ada",
            "--token-secret",
            SECRET,
            "--user-info",
            user_info,
        ]))
    };
    let (code, out, err) = mint(r#"{ "name": "Ada", "langs": ["en", "fr"] }"#);
    assert_eq!(code, 0, "{err}");
    let client = TokenKeys::new(SECRET.as_bytes())
        .verify(out.trim())
        .unwrap();
    assert_eq!(
        client.user_info.as_deref(),
        Some(r#"{"name":"Ada","langs":["en","fr"]}"#),
        "signed compact"
    );
    let big = format!(r#"{{"name":"{}"}}"#, "x".repeat(1_100));
    for (user_info, says) in [
        ("[1, 2]", "--user-info must be a JSON object"),
        ("\"Ada\"", "not a string"),
        ("null", "not null"),
        ("{name: Ada}", "--user-info is not JSON"),
        (big.as_str(), "--user-info is 1111 bytes of JSON"),
    ] {
        let (code, out, err) = mint(user_info);
        assert_eq!(code, 2, "{user_info}: {err}");
        assert!(out.is_empty(), "a token was printed: {out}");
        assert!(err.contains(says), "{err:?} should say {says:?}");
    }
}

#[test]
fn a_meteord_conf_that_sets_every_apps_retention_is_said_at_start() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let conf = write(dir.path(), "meteord.conf", "MaxMessagesPerChannel 5\n");
    let mut child = herald(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--data", "data"])
        .arg("--meteor-conf")
        .arg(&conf)
        .args([
            "--token-secret",
            SECRET,
            "--api-key",
            "hk_retention_test_key",
        ])
        .env("HERALD_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let started = stdout
        .lines()
        .map_while(Result::ok)
        .any(|l| l.starts_with("herald listening on"));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(started, "the server did not start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("WARN")
            && err.contains("MaxMessagesPerChannel in the meteord.conf sets history.size = 5 for every channel of every app"),
        "{err}"
    );
}

/// A token secret given as a flag is said at WARN (visible in the process list, forgotten by a
/// restart without it), and a restart with another secret says every older token is refused.
#[test]
fn the_token_secret_source_and_a_change_of_it_are_said_at_warn() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let serve = |extra: &[&str]| {
        let mut child = herald(dir.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--data", "data"])
            .args(["--api-key", "hk_token_secret_test_key"])
            .args(extra)
            .env("HERALD_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let started = stdout
            .lines()
            .map_while(Result::ok)
            .any(|l| l.starts_with("herald listening on"));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        assert!(started, "the server did not start");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let first = serve(&["--token-secret", SECRET]);
    assert!(first.contains("comes from --token-secret"), "{first}");
    assert!(
        !first.contains("not the one this server last started with"),
        "{first}"
    );
    let again = serve(&["--token-secret", SECRET]);
    assert!(!again.contains("not the one"), "{again}");
    // Without the flag the server generates a secret of its own: every token is refused now.
    let without = serve(&[]);
    assert!(
        without.contains("not the one this server last started with"),
        "{without}"
    );
    assert!(!without.contains(SECRET), "the secret was logged");
}
