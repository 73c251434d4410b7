//! What a script or a shell expects of a command-line tool, through the
//! real `wasmprov` binary: exit codes that say retry or give up (and the
//! same advice in `--json` errors), a terminate of a node already gone
//! that succeeds, shell completions, manual pages, help with the global
//! flags apart and examples, JSON logs, no colour without a terminal or
//! with `NO_COLOR`, and tables that keep their shape on a terminal of no
//! width. Clouds are the Hetzner fake and small servers on 127.0.0.1.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use wasmprov_fake::{HetznerFake, HetznerFakeOptions};

/// `EX_NOINPUT`: the thing the command names does not exist.
const NOT_FOUND: i32 = 66;
/// `EX_TEMPFAIL`: the same command may work later.
const TEMPFAIL: i32 = 75;

fn wasmprov(dir: &Path, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmprov"));
    cmd.arg("--plugin-dir")
        .arg(dir)
        .args(["--owner", "conventions-test"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .args(args)
        .env_remove("HCLOUD_TOKEN")
        .env_remove("WASMPROV_PLUGIN_DIR")
        .env_remove("WASMPROV_STATE_DIR")
        .env_remove("WASMPROV_LOG")
        .env_remove("WASMPROV_LOG_FORMAT")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    if let Some(t) = token {
        cmd.env("HCLOUD_TOKEN", t);
    }
    cmd.output().expect("run wasmprov")
}

/// The bundled plugins in `dir`, Hetzner's pointed at `endpoint`.
fn bundle(dir: &Path, endpoint: &str) {
    let out = wasmprov(
        dir,
        None,
        &[
            "bundle",
            "--out",
            dir.to_str().unwrap(),
            "--hetzner-endpoint",
            endpoint,
        ],
    );
    assert!(out.status.success(), "{out:?}");
}

/// The exit code, and the `--json` error on stdout (when there is one).
fn failed(out: &Output) -> (i32, serde_json::Value) {
    let code = out.status.code().expect("exited, not killed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line on stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    let err = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (code, err)
}

/// A port on 127.0.0.1 where nothing listens.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An API on 127.0.0.1 that answers every request 429 with
/// `Retry-After: 7`, as a cloud under load does; its base URL.
fn rate_limited_api() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let body = r#"{"error":{"code":"rate_limit_exceeded","message":"slow down"}}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/v1")
}

/// An API on 127.0.0.1 that takes connections and never answers; its
/// base URL.
fn silent_api() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    format!("http://{addr}/v1")
}

/// Every exit code through the binary: 0, 2 (usage), 66 (not found), 75
/// (retryable: transport, not sent, rate limited, a journal in use), 1
/// (the rest); `--json` errors carry `retryable`, `retry_after_ms` and
/// `exit_code`, for plugin errors and host errors alike.
#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_say_retry_or_give_up() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions::default(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, &fake.url());
    let token = Some(fake.token());

    // 0
    let out = wasmprov(d, token, &["--json", "describe", "hetzner"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // 2: clap's usage errors, and a command line that cannot work as given.
    let out = wasmprov(d, None, &["price", "hetzner"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = wasmprov(d, None, &["no-such-command"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = wasmprov(
        d,
        token,
        &[
            "--json",
            "provision",
            "hetzner",
            "--cpu",
            "1",
            "--memory",
            "1GiB",
            "--lease-secs",
            "60",
        ],
    );
    let (code, err) = failed(&out);
    assert_eq!(code, 2, "{out:?}");
    assert_eq!(err["error"]["kind"], "usage");
    assert!(fake.servers().is_empty(), "nothing was made");

    // 66: the node a get names; the plugin a command names.
    let (code, err) = failed(&wasmprov(d, token, &["--json", "get", "hetzner", "424242"]));
    assert_eq!(code, NOT_FOUND);
    assert_eq!(err["error"]["kind"], "not_found");
    assert_eq!(err["error"]["retryable"], false);
    assert_eq!(err["error"]["exit_code"], NOT_FOUND);
    let (code, err) = failed(&wasmprov(d, None, &["--json", "inspect", "ghost"]));
    assert_eq!(code, NOT_FOUND);
    assert_eq!(err["error"]["kind"], "unknown_plugin");
    assert_eq!(err["error"]["retryable"], false);
    assert!(err["error"]["retry_after_ms"].is_null());
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no plugin \"ghost\"")
    );
    // A renewal of a request id the journal does not have.
    let state = d.join("state");
    let (code, _) = failed(&wasmprov(
        d,
        None,
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "renew",
            "no-such-request",
            "--lease-secs",
            "60",
        ],
    ));
    assert_eq!(code, NOT_FOUND);

    // 1: credentials are wrong; a retry will not mend that.
    let (code, err) = failed(&wasmprov(
        d,
        Some("wrong-token"),
        &["--json", "describe", "hetzner"],
    ));
    assert_eq!(code, 1);
    assert_eq!(err["error"]["kind"], "auth");
    assert_eq!(err["error"]["retryable"], false);
    // A plugin directory that does not exist: the host's failure, kind host.
    let (code, err) = failed(&wasmprov(
        &d.join("nope"),
        None,
        &["--json", "describe", "hetzner"],
    ));
    assert_eq!(code, 1);
    assert_eq!(err["error"]["kind"], "host");
    assert_eq!(err["error"]["retryable"], false);

    // 75: a cloud that cannot be reached (a terminate that never left the
    // host is not_sent; a list that failed is transport).
    let down = tempfile::tempdir().unwrap();
    bundle(
        down.path(),
        &format!("http://127.0.0.1:{}/v1", closed_port()),
    );
    let (code, err) = failed(&wasmprov(
        down.path(),
        token,
        &["--json", "describe", "hetzner"],
    ));
    assert_eq!(code, TEMPFAIL, "{err}");
    assert_eq!(err["error"]["retryable"], true);
    assert!(
        ["transport", "not_sent"].contains(&err["error"]["kind"].as_str().unwrap()),
        "{err}"
    );
    let (code, err) = failed(&wasmprov(
        down.path(),
        token,
        &["--json", "terminate", "hetzner", "4711"],
    ));
    assert_eq!(code, TEMPFAIL, "{err}");
    assert_eq!(err["error"]["retryable"], true);
    // Without --json: the same code, one line on stderr, nothing on stdout.
    let out = wasmprov(down.path(), token, &["describe", "hetzner"]);
    assert_eq!(failed(&out).0, TEMPFAIL);
    assert!(out.stdout.is_empty());

    // 75: rate limited, with how long to wait.
    let limited = tempfile::tempdir().unwrap();
    bundle(limited.path(), &rate_limited_api());
    let (code, err) = failed(&wasmprov(
        limited.path(),
        token,
        &["--json", "describe", "hetzner"],
    ));
    assert_eq!(code, TEMPFAIL, "{err}");
    assert_eq!(err["error"]["kind"], "rate_limited");
    assert_eq!(err["error"]["retryable"], true);
    assert_eq!(err["error"]["retry_after_ms"], 7000);
    assert_eq!(err["error"]["detail"]["retry_after_ms"], 7000);

    // 75: a plugin that ran out of its call's time (a cloud that never
    // answers, a call deadline of 1 s).
    let slow = tempfile::tempdir().unwrap();
    bundle(slow.path(), &silent_api());
    let manifest = std::fs::read_to_string(slow.path().join("hetzner.toml")).unwrap();
    assert!(manifest.contains("call_timeout_ms = 60000"), "{manifest}");
    std::fs::write(
        slow.path().join("hetzner.toml"),
        manifest.replace("call_timeout_ms = 60000", "call_timeout_ms = 1000"),
    )
    .unwrap();
    let (code, err) = failed(&wasmprov(
        slow.path(),
        token,
        &["--json", "describe", "hetzner"],
    ));
    assert_eq!(code, TEMPFAIL, "{err}");
    assert_eq!(err["error"]["kind"], "plugin");
    assert_eq!(err["error"]["detail"]["fault"], "timeout", "{err}");
    assert_eq!(err["error"]["retryable"], true);

    // 75: the journal is held by another process (here: this one).
    std::fs::create_dir_all(&state).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state.join("journal.lock"))
        .unwrap();
    let held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .unwrap();
    let (code, err) = failed(&wasmprov(
        d,
        token,
        &["--json", "--state-dir", state.to_str().unwrap(), "history"],
    ));
    assert_eq!(code, TEMPFAIL, "{err}");
    assert_eq!(err["error"]["kind"], "journal");
    assert_eq!(err["error"]["retryable"], true);
    drop(held);
    let out = wasmprov(
        d,
        token,
        &["--json", "--state-dir", state.to_str().unwrap(), "history"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// A terminate of a node that is gone succeeds (the contract says a gone
/// node is what the caller wants), with a note, with and without a
/// journal; the JSON says `already_gone`.
#[tokio::test(flavor = "multi_thread")]
async fn terminating_a_node_already_gone_succeeds_with_a_note() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions::default(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, &fake.url());
    let token = Some(fake.token());
    let state = d.join("state");
    let state = state.to_str().unwrap();
    for journal in [false, true] {
        let mut args = vec!["--json"];
        if journal {
            args.extend(["--state-dir", state]);
        }
        let request = if journal { "gone-j" } else { "gone-p" };
        let out = wasmprov(
            d,
            token,
            &with(
                &args,
                &[
                    "provision",
                    "hetzner",
                    "--cpu",
                    "2",
                    "--memory",
                    "4GiB",
                    "--request-id",
                    request,
                ],
            ),
        );
        assert!(out.status.success(), "{out:?}");
        let node: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let id = node["provider_id"].as_str().unwrap().to_string();

        let out = wasmprov(d, token, &with(&args, &["terminate", "hetzner", &id]));
        assert!(out.status.success(), "{out:?}");
        let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(done["terminated"], id.as_str());
        assert_eq!(done["already_gone"], false, "journal {journal}");

        let out = wasmprov(d, token, &with(&args, &["terminate", "hetzner", &id]));
        assert_eq!(out.status.code(), Some(0), "journal {journal}: {out:?}");
        let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(again["terminated"], id.as_str());
        assert_eq!(again["already_gone"], true, "journal {journal}");

        // The note, for people.
        let text_args: Vec<&str> = with(&args, &["terminate", "hetzner", &id])
            .into_iter()
            .filter(|a| *a != "--json")
            .collect();
        let out = wasmprov(d, token, &text_args);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("already gone"), "{said}");
        assert!(out.stderr.is_empty(), "{out:?}");
    }
}

/// `args` then `more`.
fn with<'a>(args: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    [args, more].concat()
}

#[test]
fn completions_for_every_shell() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = wasmprov(dir.path(), None, &["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for word in ["wasmprov", "provision", "terminate", "plugin-dir"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
        // The shell reads it without a syntax error, where it is installed.
        let check: Option<&[&str]> = match shell {
            "bash" => Some(&["bash", "-n"]),
            "zsh" => Some(&["zsh", "-n"]),
            "fish" => Some(&["fish", "--no-execute"]),
            _ => None,
        };
        if let Some([program, flag]) = check
            && let Ok(mut child) = Command::new(program)
                .arg(flag)
                .stdin(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(script.as_bytes())
                .unwrap();
            let checked = child.wait_with_output().unwrap();
            assert!(checked.status.success(), "{shell}: {checked:?}");
        }
    }
    let out = wasmprov(dir.path(), None, &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn manual_pages_with_examples_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = wasmprov(dir.path(), None, &["man"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH wasmprov 1"), "{page}");
    for section in [
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH \"GLOBAL OPTIONS\"",
        ".SH \"EXAMPLES\"",
        ".SH \"EXIT STATUS\"",
    ] {
        assert!(page.contains(section), "{section} missing:\n{page}");
    }
    assert!(page.contains("EX_TEMPFAIL") && !page.contains(".SH EXTRA"));

    let pages = dir.path().join("man1");
    let out = wasmprov(
        dir.path(),
        None,
        &["--json", "man", "--out", pages.to_str().unwrap()],
    );
    assert!(out.status.success(), "{out:?}");
    let written: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(written["pages"].as_array().unwrap().len() > 20, "{written}");
    for name in ["wasmprov.1", "wasmprov-get.1", "wasmprov-fake-hetzner.1"] {
        let text = std::fs::read_to_string(pages.join(name)).unwrap();
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{name}");
    }
    let get = std::fs::read_to_string(pages.join("wasmprov-get.1")).unwrap();
    assert!(get.contains(".SH \"EXAMPLES\""), "{get}");
}

/// Help shows a command's own options under `Options:`, the global flags
/// under their own heading after them, and an `Examples:` section; the top
/// level lists the exit codes.
#[test]
fn help_groups_global_flags_and_has_examples() {
    let dir = tempfile::tempdir().unwrap();
    let commands: &[&[&str]] = &[
        &["price"],
        &["provision"],
        &["get"],
        &["terminate"],
        &["serve"],
        &["install"],
        &["fake", "hetzner"],
        &["completions"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("--help");
        let out = wasmprov(dir.path(), None, &args);
        assert!(out.status.success(), "{cmd:?}: {out:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        let global = help
            .find("Global options:")
            .unwrap_or_else(|| panic!("{cmd:?}: no global heading:\n{help}"));
        let own = help.find("Options:").unwrap();
        assert!(own < global, "{help}");
        let flag = help.find("--plugin-dir").unwrap();
        assert!(flag > global, "--plugin-dir under Global options:\n{help}");
        if cmd[0] != "fake" || cmd.len() == 1 {
            assert!(help.contains("Examples:\n  wasmprov "), "{cmd:?}:\n{help}");
        }
    }
    let out = wasmprov(dir.path(), None, &["--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    for line in [
        "Exit codes:",
        "  66  not found",
        "  75  retryable (EX_TEMPFAIL)",
    ] {
        assert!(help.contains(line), "{line}:\n{help}");
    }
}

/// `--log-format json`: every line on stderr is a JSON object, the final
/// error included (with its exit code and retry advice); text logs carry
/// no colour when stderr is not a terminal.
#[test]
fn logs_as_json_lines_and_without_colour_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, &format!("http://127.0.0.1:{}/v1", closed_port()));
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .arg("--plugin-dir")
        .arg(d)
        .args(["--log-format", "json", "describe", "hetzner"])
        .env("XDG_CACHE_HOME", d.join("cache"))
        .env("WASMPROV_LOG", "info")
        .env("HCLOUD_TOKEN", "t")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(TEMPFAIL), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let records: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(records.len() >= 2, "{stderr}");
    assert!(
        records
            .iter()
            .any(|r| r["fields"]["message"] == "plugin loaded"),
        "{stderr}"
    );
    let last = records.last().unwrap();
    assert_eq!(last["level"], "ERROR");
    assert_eq!(last["fields"]["exit_code"], TEMPFAIL);
    assert_eq!(last["fields"]["retryable"], true);

    // The same as the environment says it, for the daemon's unit file.
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .arg("--plugin-dir")
        .arg(d)
        .args(["describe", "hetzner"])
        .env("XDG_CACHE_HOME", d.join("cache"))
        .env("WASMPROV_LOG", "info")
        .env("WASMPROV_LOG_FORMAT", "json")
        .env("HCLOUD_TOKEN", "t")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.lines().all(|l| l.starts_with('{')), "{stderr}");

    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .arg("--plugin-dir")
        .arg(d)
        .args(["describe", "hetzner"])
        .env("XDG_CACHE_HOME", d.join("cache"))
        .env("WASMPROV_LOG", "info")
        .env("HCLOUD_TOKEN", "t")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("plugin loaded"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour off a terminal: {stderr:?}"
    );
}

/// Runs `wasmprov` with stdout and stderr on a pseudo-terminal of
/// `columns` columns; what it wrote there.
fn on_a_terminal(dir: &Path, columns: u16, env: &[(&str, &str)], args: &[&str]) -> String {
    let size = nix::pty::Winsize {
        ws_row: if columns == 0 { 0 } else { 40 },
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None::<&nix::sys::termios::Termios>).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmprov"));
    cmd.arg("--plugin-dir")
        .arg(dir)
        .args(args)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    // Read until the terminal closes (EIO once the child is gone).
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
        all
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "wasmprov hung");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    String::from_utf8_lossy(&reader.join().unwrap()).into_owned()
}

/// On a terminal: colour unless `NO_COLOR`; a table on a terminal that
/// says it is 0 columns wide keeps its shape (laid out for 80).
#[test]
fn a_terminal_gets_colour_unless_no_color_and_tables_survive_zero_width() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, "http://127.0.0.1:9/v1");
    let log = [("WASMPROV_LOG", "info")];
    let coloured = on_a_terminal(d, 100, &log, &["inspect", "hetzner"]);
    assert!(coloured.contains("plugin loaded"), "{coloured}");
    assert!(
        coloured.contains('\u{1b}'),
        "colour on a terminal: {coloured:?}"
    );
    let plain = on_a_terminal(
        d,
        100,
        &[("WASMPROV_LOG", "info"), ("NO_COLOR", "1")],
        &["inspect", "hetzner"],
    );
    assert!(plain.contains("plugin loaded"), "{plain}");
    assert!(!plain.contains('\u{1b}'), "NO_COLOR: {plain:?}");

    let table = on_a_terminal(d, 0, &[], &["inspect", "hetzner"]);
    // Each row on one line, the table no wider than the fallback.
    assert!(
        table
            .lines()
            .any(|l| l.contains("plugin") && l.contains("hetzner")),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.contains("capacity types")),
        "{table}"
    );
    // The width comes from the controlling terminal when there is one (a
    // developer's), else from the pseudo-terminal's 0 columns: only then
    // is the fallback what lays the table out.
    if std::fs::File::open("/dev/tty").is_err() {
        let widest = table
            .lines()
            .map(|l| l.trim_end_matches('\r').chars().count())
            .max()
            .unwrap_or_default();
        assert!((40..=80).contains(&widest), "{widest}:\n{table}");
    }
}

/// A command whose reader has gone (`wasmprov plugins | head -0`) ends
/// quietly with status 0, like `man` and `completions`: no panic, no 101.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, "http://127.0.0.1:9/v1");
    for args in [
        &["plugins"][..],
        &["--json", "plugins"],
        &["inspect", "hetzner"],
        &["offerings", "hetzner"],
        &["--json", "offerings", "hetzner"],
        &["price", "hetzner", "--cpu", "2", "--memory", "4GiB"],
        &["rank", "--cpu", "2", "--memory", "4GiB"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
            .arg("--plugin-dir")
            .arg(d)
            .env("XDG_CACHE_HOME", d.join("cache"))
            .env_remove("WASMPROV_PLUGIN_DIR")
            .env_remove("WASMPROV_LOG")
            .args(args)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// A scale that falls short because capacity ran out exits 75 (a later
/// scale may reach the target; `--max-capacity-failures` bounds the pass),
/// one short because of quota alone exits 1; `--json` prints the report,
/// which says which (`retryable`), and no second document.
#[tokio::test(flavor = "multi_thread")]
async fn a_scale_short_for_capacity_exits_75_and_for_quota_1() {
    use wasmprov_fake::hetzner::Fault;
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions::default(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, &fake.url());
    let token = Some(fake.token());
    let state = d.join("state");
    let scale = |extra: &[&str]| {
        let mut args = vec![
            "--json",
            "--state-dir",
            state.to_str().unwrap(),
            "scale",
            "w",
            "--desired",
            "1",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--max",
            "3",
        ];
        args.extend_from_slice(extra);
        wasmprov(d, token, &args)
    };

    for _ in 0..10 {
        fake.inject(Fault::ResourceUnavailable);
    }
    let out = scale(&["--max-capacity-failures", "2"]);
    assert_eq!(out.status.code(), Some(TEMPFAIL), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one document");
    assert_eq!(report["scale"]["retryable"], true, "{report}");
    assert_eq!(report["scale"]["after"], 0);
    let errors = report["scale"]["errors"].to_string();
    assert!(
        errors.contains("stopped after 2 capacity failures"),
        "{errors}"
    );
    assert!(fake.servers().is_empty());

    // Quota, in a fresh state: one attempt (the whole account is out),
    // nothing a retry mends by itself.
    let state = d.join("state-quota");
    let fake2 = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions {
            max_servers: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await
    .unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let d2 = dir2.path();
    bundle(d2, &fake2.url());
    let out = wasmprov(
        d2,
        Some(fake2.token()),
        &[
            "--json",
            "--state-dir",
            state.to_str().unwrap(),
            "scale",
            "w",
            "--desired",
            "1",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one document");
    assert_eq!(report["scale"]["retryable"], false, "{report}");
    let errors = report["scale"]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "one attempt: {errors:?}");
    assert!(errors[0].to_string().contains("quota"), "{errors:?}");

    // Nothing to add, but a cloud that cannot be listed: exit 1, as
    // `reconcile` does.
    let out = wasmprov(
        d2,
        Some("wrong-token"),
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "scale",
            "w",
            "--desired",
            "0",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("could not settle"), "{stderr}");
}
