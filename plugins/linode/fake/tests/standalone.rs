//! The fake as `wasmprov test --fake-command` runs it (the binary): its
//! pages are small enough that the suite plants more than one and a plugin
//! asking Linode's largest page still has to follow `pages`.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// One HTTP/1.1 exchange over loopback: the JSON body of the answer.
fn call(base: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Value {
    let addr = base.trim_start_matches("http://");
    let mut conn = TcpStream::connect(addr).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    ));
    conn.write_all(head.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let (status, rest) = answer.split_once("\r\n\r\n").unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{answer}");
    serde_json::from_str(rest).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[test]
fn the_standalone_fake_serves_pages_the_suite_plants_past() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmprov-fake-linode"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim();
    let info = call(url, "GET", "/_wasmprov/info", &[], "");
    let page = info["page_size"]
        .as_u64()
        .expect("the fake says its page size");
    assert!(page <= 25, "pages of {page}: Linode's smallest is 25");
    let owner = json!({"labels": {"wasmprov-owner": "o-1"}}).to_string();
    for _ in 0..=page {
        call(url, "POST", "/_wasmprov/plant", &[], &owner);
    }
    let auth = format!("Bearer {}", wasmprov_fake_linode::TOKEN);
    let first = call(
        url,
        "GET",
        "/v4/linode/instances?page_size=500",
        &[("authorization", &auth)],
        "",
    );
    assert_eq!(first["data"].as_array().map(Vec::len), Some(page as usize));
    assert_eq!(
        (first["pages"].as_u64(), first["results"].as_u64()),
        (Some(2), Some(page + 1))
    );
    drop(child.stdin.take());
    child.wait().unwrap();
}
