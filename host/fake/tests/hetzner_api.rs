//! End-to-end tests of the fake Hetzner API over real HTTP on loopback.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use wasmprov_fake::{Fault, HetznerFake, HetznerFakeOptions};

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A minimal API client: JSON in, status + headers + JSON out.
struct Api {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    token: Option<String>,
}

#[derive(Debug)]
struct Resp {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Resp {
    fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("<none>")
    }
}

impl Api {
    fn new(fake: &HetznerFake) -> Self {
        Api {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: fake.url(),
            token: Some(fake.token().to_string()),
        }
    }

    fn with_token(mut self, token: Option<&str>) -> Self {
        self.token = token.map(str::to_string);
        self
    }

    async fn raw(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Resp {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        if let Some(token) = &self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .unwrap();
        let resp = self.client.request(req).await.expect("request failed");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("non-JSON body ({e}): {}", String::from_utf8_lossy(&bytes)));
        Resp {
            status,
            headers,
            body,
        }
    }

    async fn get(&self, path: &str) -> Resp {
        self.raw(Method::GET, path, None).await
    }

    async fn delete(&self, path: &str) -> Resp {
        self.raw(Method::DELETE, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> Resp {
        self.raw(Method::POST, path, Some(serde_json::to_vec(&body).unwrap()))
            .await
    }

    async fn create(&self, name: &str, labels: Value) -> Resp {
        self.post(
            "/servers",
            json!({ "name": name, "server_type": "cx22", "image": "ubuntu-24.04", "labels": labels }),
        )
        .await
    }
}

async fn start(opts: HetznerFakeOptions) -> (HetznerFake, Api) {
    let fake = HetznerFake::start(loopback(), opts).await.unwrap();
    let api = Api::new(&fake);
    (fake, api)
}

#[tokio::test]
async fn rejects_non_loopback_addresses() {
    let err = HetznerFake::start("0.0.0.0:0".parse().unwrap(), HetznerFakeOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
    let (fake, _) = start(HetznerFakeOptions::default()).await;
    assert!(fake.url().starts_with("http://127.0.0.1:"));
    assert!(fake.url().ends_with("/v1"));
    fake.shutdown().await;
}

#[tokio::test]
async fn auth_is_required_everywhere() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let anon = Api::new(&fake).with_token(None);
    let wrong = Api::new(&fake).with_token(Some("nope"));
    for client in [&anon, &wrong] {
        for path in ["/servers", "/locations", "/does-not-exist"] {
            let r = client.get(path).await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(
                r.body,
                json!({"error": {"code": "unauthorized", "message": "unable to authenticate", "details": {}}})
            );
            assert_eq!(r.headers["ratelimit-limit"], "3600");
        }
        let r = client.create("web-1", json!({})).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    assert!(fake.servers().is_empty());
    let r = api.get("/servers").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(fake.request_count(), 9);
}

#[tokio::test]
async fn catalogue_endpoints() {
    let (_fake, api) = start(HetznerFakeOptions::default()).await;
    let r = api.get("/locations").await;
    assert_eq!(r.status, StatusCode::OK);
    let names: Vec<&str> = r.body["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fsn1", "nbg1", "hel1", "ash", "hil"]);
    assert_eq!(
        r.body["locations"][0]["description"],
        "Falkenstein DC Park 1"
    );
    assert_eq!(r.body["locations"][3]["network_zone"], "us-east");

    let r = api.get("/server_types?per_page=50").await;
    let types = r.body["server_types"].as_array().unwrap();
    assert_eq!(types.len(), 15);
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 15);

    let r = api.get("/server_types?name=cx22").await;
    let cx22 = &r.body["server_types"][0];
    assert_eq!(r.body["server_types"].as_array().unwrap().len(), 1);
    assert_eq!(cx22["cores"], 2);
    assert_eq!(cx22["memory"], 4.0);
    assert_eq!(cx22["cpu_type"], "shared");
    assert_eq!(cx22["architecture"], "x86");
    assert_eq!(cx22["prices"][0]["price_hourly"]["net"], "0.0060");
    assert_eq!(cx22["prices"][0]["price_monthly"]["gross"], "4.5101");

    let r = api.get("/server_types?per_page=4&page=4").await;
    assert_eq!(r.body["server_types"].as_array().unwrap().len(), 3);
    assert_eq!(r.body["meta"]["pagination"]["next_page"], Value::Null);
    assert_eq!(r.body["meta"]["pagination"]["previous_page"], 3);
}

#[tokio::test]
async fn create_list_get_delete() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    // Servers name SSH keys of the project, as in the real API.
    let key = api
        .post(
            "/ssh_keys",
            json!({"name": "me", "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 me@example"}),
        )
        .await;
    assert_eq!(key.status, StatusCode::CREATED, "{:?}", key.body);
    let r = api
        .post(
            "/servers",
            json!({
                "name": "web-1",
                "server_type": "cpx21",
                "image": "ubuntu-24.04",
                "location": "hel1",
                "labels": {"wasmprov.io/pool": "web", "env": "prod"},
                "user_data": "#cloud-config\n",
                "ssh_keys": ["me"],
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let server = &r.body["server"];
    let id = server["id"].as_u64().unwrap();
    assert_eq!(server["name"], "web-1");
    assert_eq!(server["status"], "initializing");
    assert_eq!(server["server_type"]["name"], "cpx21");
    assert_eq!(server["datacenter"]["location"]["name"], "hel1");
    assert_eq!(server["image"]["name"], "ubuntu-24.04");
    assert_eq!(server["labels"]["env"], "prod");
    assert_eq!(server["public_net"]["ipv4"]["ip"], "203.0.113.1");
    assert!(server["created"].as_str().unwrap().ends_with("+00:00"));
    assert_eq!(r.body["action"]["command"], "create_server");
    assert_eq!(r.body["action"]["status"], "running");
    assert_eq!(r.body["action"]["resources"][0]["id"], id);
    assert_eq!(r.body["root_password"], Value::Null);
    let action_id = r.body["action"]["id"].as_u64().unwrap();

    let snapshot = fake.servers();
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0].user_data.as_deref(), Some("#cloud-config\n"));
    assert_eq!(snapshot[0].location, "hel1");

    let r = api.get(&format!("/actions/{action_id}")).await;
    assert_eq!(r.body["action"]["status"], "success");
    assert_eq!(r.body["action"]["progress"], 100);

    api.create("db-1", json!({"env": "prod", "tier": "db"}))
        .await;
    api.create("dev-1", json!({"env": "dev"})).await;

    let names = |r: &Resp| -> Vec<String> {
        r.body["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    let r = api.get("/servers?label_selector=env%3D%3Dprod").await;
    assert_eq!(names(&r), ["web-1", "db-1"]);
    let r = api.get("/servers?label_selector=env=prod,tier").await;
    assert_eq!(names(&r), ["db-1"]);
    let r = api
        .get("/servers?label_selector=tier%20notin%20(db),!gone")
        .await;
    assert_eq!(names(&r), ["web-1", "dev-1"]);
    let r = api
        .get("/servers?label_selector=wasmprov.io/pool+in+(web,api)")
        .await;
    assert_eq!(names(&r), ["web-1"]);
    let r = api.get("/servers?name=dev-1").await;
    assert_eq!(names(&r), ["dev-1"]);
    let r = api.get("/servers?sort=id:desc").await;
    assert_eq!(names(&r), ["dev-1", "db-1", "web-1"]);
    let r = api.get("/servers?sort=name").await;
    assert_eq!(names(&r), ["db-1", "dev-1", "web-1"]);
    let r = api.get("/servers?label_selector=env%20in%20(").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.error_code(), "invalid_input");

    let r = api.get(&format!("/servers/{id}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["server"]["id"], id);

    let r = api.delete(&format!("/servers/{id}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["action"]["command"], "delete_server");
    let r = api.delete(&format!("/servers/{id}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "not_found");
    let r = api.get(&format!("/servers/{id}")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.servers().len(), 2);

    // The name is free again once deleted.
    let r = api.create("web-1", json!({})).await;
    assert_eq!(r.status, StatusCode::CREATED);
}

#[tokio::test]
async fn pagination_sees_every_server_once() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    for i in 0..120 {
        let labels = json!({"wasmprov.io/owner": "test", "idx": i.to_string()});
        let r = api.create(&format!("node-{i}"), labels).await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    }
    api.create("other", json!({"wasmprov.io/owner": "someone-else"}))
        .await;

    let mut seen = BTreeSet::new();
    let mut page = 1;
    let mut pages = 0;
    loop {
        let r = api
            .get(&format!(
                "/servers?label_selector=wasmprov.io/owner%3D%3Dtest&per_page=50&page={page}"
            ))
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let p = &r.body["meta"]["pagination"];
        assert_eq!(p["total_entries"], 120);
        assert_eq!(p["last_page"], 3);
        assert_eq!(p["per_page"], 50);
        for s in r.body["servers"].as_array().unwrap() {
            assert!(seen.insert(s["id"].as_u64().unwrap()), "duplicate {s}");
        }
        pages += 1;
        match p["next_page"].as_u64() {
            Some(next) => page = next,
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 120);
    let expected: BTreeSet<u64> = fake
        .servers()
        .iter()
        .filter(|s| s.labels.get("wasmprov.io/owner").map(String::as_str) == Some("test"))
        .map(|s| s.id)
        .collect();
    assert_eq!(seen, expected);

    // per_page is clamped to page_size_max; default is 25.
    let r = api.get("/servers?per_page=500").await;
    assert_eq!(r.body["meta"]["pagination"]["per_page"], 50);
    let r = api.get("/servers").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 25);
    assert_eq!(r.body["meta"]["pagination"]["total_entries"], 121);
    let r = api.get("/servers?page=0").await;
    assert_eq!(r.error_code(), "invalid_input");
    let r = api.get("/servers?page=99").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body["servers"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn status_progresses_with_polls() {
    let opts = HetznerFakeOptions {
        boot_delay_polls: 2,
        ..Default::default()
    };
    let (fake, api) = start(opts).await;
    let r = api.create("web-1", json!({})).await;
    assert_eq!(r.body["server"]["status"], "initializing");
    let id = r.body["server"]["id"].as_u64().unwrap();
    let path = format!("/servers/{id}");

    let mut seen = Vec::new();
    // Single GETs and list GETs both count as polls.
    for i in 0..6 {
        let status = if i % 2 == 0 {
            api.get(&path).await.body["server"]["status"].clone()
        } else {
            api.get("/servers").await.body["servers"][0]["status"].clone()
        };
        seen.push(status.as_str().unwrap().to_string());
    }
    assert_eq!(
        seen,
        [
            "initializing",
            "initializing",
            "starting",
            "starting",
            "running",
            "running"
        ]
    );
    assert_eq!(fake.servers()[0].status, "running");

    // Filtering by status does not count servers it leaves out.
    api.create("web-2", json!({})).await;
    let r = api.get("/servers?status=running").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 1);
    let r = api.get("/servers?status=running&status=initializing").await;
    assert_eq!(r.body["servers"].as_array().unwrap().len(), 2);

    // Not started: initializing, then off.
    let r = api
        .post(
            "/servers",
            json!({"name": "cold", "server_type": "cx22", "image": "debian-12", "start_after_create": false}),
        )
        .await;
    let path = format!("/servers/{}", r.body["server"]["id"]);
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(api.get(&path).await.body["server"]["status"].clone());
    }
    assert_eq!(seen, ["initializing", "initializing", "off", "off", "off"]);
}

#[tokio::test]
async fn immediate_running_with_zero_delay() {
    let opts = HetznerFakeOptions {
        boot_delay_polls: 0,
        ..Default::default()
    };
    let (_fake, api) = start(opts).await;
    let r = api.create("web-1", json!({})).await;
    assert_eq!(r.body["server"]["status"], "initializing");
    let r = api
        .get(&format!("/servers/{}", r.body["server"]["id"]))
        .await;
    assert_eq!(r.body["server"]["status"], "running");
}

#[tokio::test]
async fn create_validation() {
    let opts = HetznerFakeOptions {
        max_servers: 2,
        ..Default::default()
    };
    let (fake, api) = start(opts).await;
    let base = json!({"name": "web-1", "server_type": "cx22", "image": "ubuntu-24.04"});
    let with = |patch: Value| {
        let mut body = base.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };

    let cases: Vec<(Value, StatusCode, &str, &str)> = vec![
        (
            json!({"name": null}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "name",
        ),
        (
            json!({"name": "bad_name"}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "name",
        ),
        (
            json!({"name": "-x"}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "name",
        ),
        (
            json!({"name": 5}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "name",
        ),
        (
            json!({"server_type": "gpu-9000"}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "gpu-9000",
        ),
        (
            json!({"server_type": null}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "server_type",
        ),
        (
            json!({"image": "windows-95"}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "windows-95",
        ),
        (
            json!({"location": "mars1"}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "mars1",
        ),
        (
            json!({"location": "ash"}),
            StatusCode::PRECONDITION_FAILED,
            "resource_unavailable",
            "cx22",
        ),
        (
            json!({"server_type": "cax11", "location": "hil"}),
            StatusCode::PRECONDITION_FAILED,
            "resource_unavailable",
            "hil",
        ),
        (
            json!({"labels": {"bad key": "v"}}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "bad key",
        ),
        (
            json!({"labels": {"k": "v".repeat(64)}}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "labels",
        ),
        (
            json!({"labels": {"k": 1}}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "labels",
        ),
        (
            json!({"labels": ["x"]}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "labels",
        ),
        (
            json!({"start_after_create": "yes"}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "start_after_create",
        ),
        (
            json!({"user_data": "x".repeat(40_000)}),
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "user_data",
        ),
    ];
    for (patch, status, code, mention) in cases {
        let r = api.post("/servers", with(patch.clone())).await;
        assert_eq!(r.status, status, "{patch}: {:?}", r.body);
        assert_eq!(r.error_code(), code, "{patch}");
        let text = r.body["error"].to_string();
        assert!(
            text.contains(mention),
            "{patch}: {text} should mention {mention}"
        );
    }
    assert!(fake.servers().is_empty());

    // Malformed JSON and non-object bodies.
    let r = api
        .raw(Method::POST, "/servers", Some(b"{not json".to_vec()))
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::BAD_REQUEST, "json_error")
    );
    let r = api.raw(Method::POST, "/servers", Some(Vec::new())).await;
    assert_eq!(r.error_code(), "json_error");
    let r = api.post("/servers", json!([1, 2])).await;
    assert_eq!(r.error_code(), "invalid_input");

    // Uniqueness, then the quota.
    assert_eq!(
        api.post("/servers", base.clone()).await.status,
        StatusCode::CREATED
    );
    let r = api.post("/servers", base.clone()).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::CONFLICT, "uniqueness_error")
    );
    let r = api
        .post(
            "/servers",
            with(json!({"name": "web-2", "server_type": "ccx13", "location": "ash"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["server"]["datacenter"]["name"], "ash-dc1");
    let r = api.post("/servers", with(json!({"name": "web-3"}))).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::FORBIDDEN, "resource_limit_exceeded")
    );
    assert_eq!(fake.servers().len(), 2);
}

#[tokio::test]
async fn injected_faults() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;

    fake.inject(Fault::RateLimited {
        retry_after_secs: 7,
    });
    let r = api.get("/locations").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.error_code(), "rate_limit_exceeded");
    assert_eq!(r.headers["retry-after"], "7");
    assert_eq!(r.headers["ratelimit-remaining"], "0");
    assert_eq!(api.get("/locations").await.status, StatusCode::OK);

    // Create-only faults wait for the next create, skipping other requests.
    fake.inject(Fault::ResourceUnavailable);
    fake.inject(Fault::ResourceLimitExceeded);
    assert_eq!(api.get("/servers").await.status, StatusCode::OK);
    let r = api.create("web-1", json!({})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::PRECONDITION_FAILED, "resource_unavailable")
    );
    let r = api.create("web-1", json!({})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::FORBIDDEN, "resource_limit_exceeded")
    );
    assert!(fake.servers().is_empty());

    fake.inject(Fault::ServerError);
    let r = api.create("web-1", json!({})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::INTERNAL_SERVER_ERROR, "server_error")
    );
    fake.inject(Fault::Unauthorized);
    let r = api.get("/servers").await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );

    // A retry after the faults succeeds, and nothing was deduplicated.
    assert_eq!(
        api.create("web-1", json!({})).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        api.create("web-2", json!({})).await.status,
        StatusCode::CREATED
    );
    assert_eq!(fake.servers().len(), 2);
}

#[tokio::test]
async fn headers_and_unknown_routes() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let r = api.get("/servers").await;
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.headers["ratelimit-limit"], "3600");
    let first: u64 = r.headers["ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(first < 3600);
    let reset: u64 = r.headers["ratelimit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(reset > 1_700_000_000);
    let r = api.get("/servers").await;
    let second: u64 = r.headers["ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(second <= first);

    for (method, path) in [
        (Method::GET, "/nope"),
        (Method::PUT, "/servers"),
        (Method::GET, "/servers/1/actions/x/y"),
        (Method::GET, "/actions/999"),
        (Method::GET, "/servers/424242"),
    ] {
        let r = api.raw(method.clone(), path, None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(r.error_code(), "not_found");
    }
    let r = api.get("/servers/abc").await;
    assert_eq!(r.error_code(), "invalid_input");
    assert_eq!(fake.request_count(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_are_consistent() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let api = std::sync::Arc::new(api);
    let mut tasks = Vec::new();
    for i in 0..40 {
        let api = api.clone();
        // Every name twice: exactly one of each pair must win.
        tasks.push(tokio::spawn(async move {
            api.create(&format!("n-{}", i % 20), json!({})).await.status
        }));
    }
    let mut created = 0;
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            StatusCode::CREATED => created += 1,
            StatusCode::CONFLICT => conflicts += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((created, conflicts), (20, 20));
    let ips: BTreeSet<String> = fake.servers().into_iter().map(|s| s.ipv4).collect();
    assert_eq!(ips.len(), 20);
}

#[tokio::test]
async fn shutdown_and_drop_stop_the_server() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    assert_eq!(api.get("/servers").await.status, StatusCode::OK);
    let addr = fake.addr();
    fake.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());

    let fake = HetznerFake::start(loopback(), HetznerFakeOptions::default())
        .await
        .unwrap();
    let addr = fake.addr();
    drop(fake);
    tokio::task::yield_now().await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn ssh_keys_are_registered_once_and_put_on_servers() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 ops@example";
    let made = api
        .post(
            "/ssh_keys",
            json!({"name": "ops", "public_key": key, "labels": {"team": "ops"}}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{made:?}");
    let id = made.body["ssh_key"]["id"].as_u64().unwrap();
    let fp = made.body["ssh_key"]["fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(fp.split(':').count(), 16, "an MD5 fingerprint: {fp}");

    let same_name = api
        .post(
            "/ssh_keys",
            json!({"name": "ops", "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx9"}),
        )
        .await;
    assert_eq!(same_name.status, StatusCode::CONFLICT);
    assert_eq!(same_name.error_code(), "uniqueness_error");
    let same_key = api
        .post(
            "/ssh_keys",
            json!({"name": "other", "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 laptop"}),
        )
        .await;
    assert_eq!(
        same_key.status,
        StatusCode::CONFLICT,
        "same key, other comment"
    );
    let garbage = api
        .post(
            "/ssh_keys",
            json!({"name": "bad", "public_key": "ssh-ed25519 !!"}),
        )
        .await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST, "{garbage:?}");

    let by_name = api.get("/ssh_keys?name=ops").await;
    assert_eq!(by_name.body["ssh_keys"][0]["id"], id);
    assert_eq!(
        api.get("/ssh_keys?name=nope").await.body["ssh_keys"],
        json!([])
    );
    let by_fp = api.get(&format!("/ssh_keys?fingerprint={fp}")).await;
    assert_eq!(by_fp.body["ssh_keys"][0]["public_key"], key);

    let server = |keys: Value| json!({"name": "k1", "server_type": "cx22", "image": "ubuntu-24.04", "ssh_keys": keys});
    let unknown = api.post("/servers", server(json!([99]))).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{unknown:?}");
    let ok = api.post("/servers", server(json!([id]))).await;
    assert_eq!(ok.status, StatusCode::CREATED, "{ok:?}");
    assert_eq!(fake.servers()[0].ssh_keys, [key]);
    fake.shutdown().await;
}

#[tokio::test]
async fn labels_are_replaced_by_an_update() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let id = api.create("web-1", json!({"a": "1", "b": "2"})).await.body["server"]["id"]
        .as_u64()
        .unwrap();
    let path = format!("/servers/{id}");
    let body = serde_json::to_vec(&json!({"labels": {"c": "3"}})).unwrap();
    let r = api.raw(Method::PUT, &path, Some(body)).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["server"]["labels"], json!({"c": "3"}));
    assert_eq!(fake.servers()[0].labels.len(), 1);
    // Invalid labels are refused and change nothing.
    let bad = serde_json::to_vec(&json!({"labels": {"-x": "1"}})).unwrap();
    let r = api.raw(Method::PUT, &path, Some(bad)).await;
    assert_eq!(r.error_code(), "invalid_input");
    assert_eq!(
        api.get(&path).await.body["server"]["labels"],
        json!({"c": "3"})
    );
    let r = api
        .raw(Method::PUT, "/servers/999", Some(b"{}".to_vec()))
        .await;
    assert_eq!(r.error_code(), "not_found");
}

#[tokio::test]
async fn servers_join_networks_and_subnets_count_free_addresses() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let net = fake
        .add_network("nodes", "10.0.0.0/16", &["10.0.1.0/29"])
        .unwrap();
    let before = &fake.networks()[0].subnets[0];
    // A /29 has 8 addresses: network, gateway and broadcast are kept.
    assert_eq!((before.total, before.free), (5, 5));
    let r = api
        .post(
            "/servers",
            json!({"name": "n1", "server_type": "cx22", "image": "ubuntu-24.04", "networks": [net]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let server = &r.body["server"];
    assert_eq!(server["private_net"][0]["network"], net);
    assert_eq!(server["private_net"][0]["ip"], "10.0.1.2");
    assert!(
        server["public_net"]["ipv6"]["ip"]
            .as_str()
            .unwrap()
            .ends_with("::/64")
    );
    assert_eq!(fake.networks()[0].subnets[0].free, 4);
    assert_eq!(fake.servers()[0].private_net[0].ip, "10.0.1.2");
    let got = api.get(&format!("/networks/{net}")).await;
    assert_eq!(got.body["network"]["subnets"][0]["ip_range"], "10.0.1.0/29");
    assert_eq!(got.body["network"]["subnets"][0]["gateway"], "10.0.1.1");
    assert_eq!(got.body["network"]["servers"], json!([server["id"]]));
    assert_eq!(
        api.get("/networks").await.body["networks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // An unknown network is refused, and nothing is made.
    let r = api
        .post(
            "/servers",
            json!({"name": "n2", "server_type": "cx22", "image": "ubuntu-24.04", "networks": [424242]}),
        )
        .await;
    assert_eq!(r.error_code(), "invalid_input");
    assert_eq!(fake.servers().len(), 1);
    // Deleting the server frees its address.
    api.delete(&format!("/servers/{}", server["id"])).await;
    assert_eq!(fake.networks()[0].subnets[0].free, 5);
}

#[tokio::test]
async fn floating_ips_are_created_assigned_moved_and_unassigned() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let a = api.create("a", json!({})).await.body["server"]["id"].clone();
    let b = api.create("b", json!({})).await.body["server"]["id"].clone();
    let r = api
        .post(
            "/floating_ips",
            json!({"type": "ipv4", "server": a, "labels": {"k": "v"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let fip = r.body["floating_ip"]["id"].as_u64().unwrap();
    assert_eq!(r.body["floating_ip"]["server"], a);
    assert_eq!(r.body["action"]["command"], "assign_floating_ip");
    let server = api.get(&format!("/servers/{a}")).await;
    assert_eq!(
        server.body["server"]["public_net"]["floating_ips"],
        json!([fip])
    );

    let r = api
        .post(
            &format!("/floating_ips/{fip}/actions/assign"),
            json!({"server": b}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(fake.floating_ips()[0].server, b.as_u64());
    let listed = api.get("/floating_ips?label_selector=k%3D%3Dv").await;
    assert_eq!(listed.body["floating_ips"][0]["server"], b);
    assert!(
        api.get("/floating_ips?label_selector=k%3D%3Dw").await.body["floating_ips"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let r = api
        .post(&format!("/floating_ips/{fip}/actions/unassign"), json!({}))
        .await;
    assert_eq!(r.body["action"]["command"], "unassign_floating_ip");
    assert_eq!(fake.floating_ips()[0].server, None);
    // Deleting a server unassigns what it held.
    api.post(
        &format!("/floating_ips/{fip}/actions/assign"),
        json!({"server": a}),
    )
    .await;
    api.delete(&format!("/servers/{a}")).await;
    assert_eq!(fake.floating_ips()[0].server, None);
    let r = api
        .post("/floating_ips/1/actions/assign", json!({"server": b}))
        .await;
    assert_eq!(r.error_code(), "not_found");
    let r = api.post("/floating_ips", json!({"type": "ipv4"})).await;
    assert_eq!(r.error_code(), "invalid_input");
}

#[tokio::test]
async fn load_balancer_targets_are_added_once_and_removed() {
    let (fake, api) = start(HetznerFakeOptions {
        boot_delay_polls: 0,
        ..HetznerFakeOptions::default()
    })
    .await;
    let lb = fake.add_load_balancer("front", "fsn1").unwrap();
    let s = api.create("s", json!({})).await.body["server"]["id"].clone();
    let target = json!({"type": "server", "server": {"id": s}, "use_private_ip": false});
    let path = format!("/load_balancers/{lb}/actions/add_target");
    let r = api.post(&path, target.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["action"]["command"], "add_target");
    let r = api.post(&path, target.clone()).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "target_already_defined")
    );
    let got = api.get(&format!("/load_balancers/{lb}")).await;
    let t = &got.body["load_balancer"]["targets"][0];
    assert_eq!(t["server"]["id"], s);
    assert_eq!(t["health_status"][0]["status"], "healthy");
    assert_eq!(fake.load_balancers()[0].targets, [s.as_u64().unwrap()]);
    let server = api.get(&format!("/servers/{s}")).await;
    assert_eq!(server.body["server"]["load_balancers"], json!([lb]));

    let remove = format!("/load_balancers/{lb}/actions/remove_target");
    let r = api.post(&remove, target.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let r = api.post(&remove, target).await;
    assert_eq!(r.error_code(), "not_found");
    assert!(fake.load_balancers()[0].targets.is_empty());
}

#[tokio::test]
async fn alias_ips_are_set_per_server_and_never_shared() {
    let (fake, api) = start(HetznerFakeOptions::default()).await;
    let net = fake
        .add_network("nodes", "10.0.0.0/16", &["10.0.1.0/29"])
        .unwrap();
    let create = |name: &str| json!({"name": name, "server_type": "cx22", "image": "ubuntu-24.04", "networks": [net]});
    let a = api.post("/servers", create("a")).await.body["server"]["id"].clone();
    let b = api.post("/servers", create("b")).await.body["server"]["id"].clone();
    let alias = |ips: Value| json!({"network": net, "alias_ips": ips});
    let r = api
        .post(
            &format!("/servers/{a}/actions/change_alias_ips"),
            alias(json!(["10.0.1.5"])),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let got = api.get(&format!("/servers/{a}")).await;
    assert_eq!(
        got.body["server"]["private_net"][0]["alias_ips"],
        json!(["10.0.1.5"])
    );
    assert_eq!(fake.networks()[0].subnets[0].free, 2);
    // Another server cannot take it, nor a server's own address.
    let r = api
        .post(
            &format!("/servers/{b}/actions/change_alias_ips"),
            alias(json!(["10.0.1.5"])),
        )
        .await;
    assert_eq!(r.error_code(), "ip_not_available");
    let r = api
        .post(
            &format!("/servers/{b}/actions/change_alias_ips"),
            alias(json!(["10.0.1.2"])),
        )
        .await;
    assert_eq!(r.error_code(), "ip_not_available");
    // Outside the subnet, or the gateway: invalid.
    for ip in ["10.0.2.5", "10.0.1.1"] {
        let r = api
            .post(
                &format!("/servers/{b}/actions/change_alias_ips"),
                alias(json!([ip])),
            )
            .await;
        assert_eq!(r.error_code(), "invalid_input", "{ip}");
    }
    // Taken off a, it is free for b.
    api.post(
        &format!("/servers/{a}/actions/change_alias_ips"),
        alias(json!([])),
    )
    .await;
    let r = api
        .post(
            &format!("/servers/{b}/actions/change_alias_ips"),
            alias(json!(["10.0.1.5"])),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(fake.servers()[1].private_net[0].alias_ips, ["10.0.1.5"]);
}
