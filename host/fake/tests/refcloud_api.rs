//! End-to-end tests of the fake reference cloud over real HTTP on loopback.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use wasmprov_fake::refcloud::{self, NODE_TYPES};
use wasmprov_fake::{RefCloudFake, RefCloudFakeOptions, RefFault};

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
    /// `Value::Null` for an empty body.
    body: Value,
    raw: Bytes,
}

impl Resp {
    fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("<none>")
    }
    fn error_message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("<none>")
    }
    fn node_id(&self) -> String {
        self.body["node"]["id"].as_str().unwrap().to_string()
    }
}

impl Api {
    fn new(fake: &RefCloudFake) -> Self {
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

    async fn raw(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Resp {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        if let Some(token) = &self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .unwrap();
        let resp = self.client.request(req).await.expect("request failed");
        let status = resp.status();
        let headers = resp.headers().clone();
        let raw = resp.into_body().collect().await.unwrap().to_bytes();
        let body = if raw.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&raw).unwrap_or_else(|e| {
                panic!("non-JSON body ({e}): {}", String::from_utf8_lossy(&raw))
            })
        };
        Resp {
            status,
            headers,
            body,
            raw,
        }
    }

    async fn get(&self, path: &str) -> Resp {
        self.raw(Method::GET, path, &[], None).await
    }

    async fn delete(&self, path: &str) -> Resp {
        self.raw(Method::DELETE, path, &[], None).await
    }

    async fn post(&self, body: Value, headers: &[(&str, &str)]) -> Resp {
        self.raw(
            Method::POST,
            "/nodes",
            headers,
            Some(serde_json::to_vec(&body).unwrap()),
        )
        .await
    }

    async fn create(&self, node_type: &str, labels: Value) -> Resp {
        self.post(json!({ "type": node_type, "labels": labels }), &[])
            .await
    }
}

async fn start(opts: RefCloudFakeOptions) -> (RefCloudFake, Api) {
    let fake = RefCloudFake::start(loopback(), opts).await.unwrap();
    let api = Api::new(&fake);
    (fake, api)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

#[tokio::test]
async fn starts_on_loopback_only() {
    let err = RefCloudFake::start("0.0.0.0:0".parse().unwrap(), RefCloudFakeOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
    let err = RefCloudFake::start(
        loopback(),
        RefCloudFakeOptions {
            token: " ".into(),
            ..RefCloudFakeOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("token"), "{err}");
    let (fake, _) = start(RefCloudFakeOptions::default()).await;
    assert!(fake.url().starts_with("http://127.0.0.1:"));
    assert!(fake.url().ends_with("/v1"));
    assert_eq!(fake.token(), refcloud::DEFAULT_TOKEN);
    assert_eq!(fake.token(), "fake-refcloud-token");
    fake.shutdown().await;
}

#[tokio::test]
async fn auth_is_required_everywhere() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    let id = fake.plant(labels(&[]));
    let anon = Api::new(&fake).with_token(None);
    let wrong = Api::new(&fake).with_token(Some("nope"));
    for client in [&anon, &wrong] {
        for path in ["/nodes", &format!("/nodes/{id}"), "/does-not-exist"] {
            let r = client.get(path).await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(r.error_code(), "unauthorized");
            assert!(!r.error_message().is_empty());
            assert_eq!(r.headers["content-type"], "application/json");
        }
        assert_eq!(
            client.create("small", json!({})).await.status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            client.delete(&format!("/nodes/{id}")).await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    // Nothing was created, deleted or read.
    let nodes = fake.nodes();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].reads, 0);
    assert_eq!(api.get("/nodes").await.status, StatusCode::OK);
    assert_eq!(fake.request_count(), 11);
}

#[tokio::test]
async fn create_get_list_delete() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    let r = api
        .post(
            json!({"type": "medium", "zone": "zone-b", "capacity_type": "spot", "labels": {"role": "worker", "wasmprov.io/pool": "p1"}}),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.headers["content-type"], "application/json");
    let node = &r.body["node"];
    assert_eq!(node["id"], "n-000001");
    assert_eq!(node["type"], "medium");
    assert_eq!(node["zone"], "zone-b");
    assert_eq!(node["capacity_type"], "spot");
    assert_eq!(node["state"], "provisioning");
    assert_eq!(node["address"], "10.1.0.1");
    assert_eq!(
        node["labels"],
        json!({"role": "worker", "wasmprov.io/pool": "p1"})
    );
    assert!(
        node["created"].as_str().unwrap().ends_with("+00:00"),
        "{node}"
    );

    // Defaults: zone-a, on-demand, no labels.
    let r = api.post(json!({"type": "small"}), &[]).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        (
            &r.body["node"]["id"],
            &r.body["node"]["zone"],
            &r.body["node"]["capacity_type"],
            &r.body["node"]["labels"]
        ),
        (
            &json!("n-000002"),
            &json!("zone-a"),
            &json!("on-demand"),
            &json!({})
        )
    );
    assert_eq!(r.body["node"]["address"], "10.1.0.2");

    let r = api.get("/nodes/n-000001").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["node"]["type"], "medium");

    let r = api.get("/nodes").await;
    assert_eq!(r.status, StatusCode::OK);
    let ids: Vec<&str> = r.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["n-000001", "n-000002"]);
    assert_eq!(r.body["next_page"], Value::Null);

    // Ground truth matches what the API says.
    let truth = fake.nodes();
    assert_eq!(truth.len(), 2);
    assert_eq!(truth[0].id, "n-000001");
    assert_eq!(truth[0].node_type, "medium");
    assert_eq!(truth[0].capacity_type, "spot");
    assert_eq!(truth[0].labels["role"], "worker");
    assert_eq!(truth[0].reads, 2);
    assert_eq!(truth[1].reads, 1);
    assert_eq!(truth[0].idempotency_key, None);

    let r = api.delete("/nodes/n-000001").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(r.raw.is_empty());
    for r in [
        api.get("/nodes/n-000001").await,
        api.delete("/nodes/n-000001").await,
    ] {
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        assert_eq!(r.error_code(), "not_found");
        assert!(r.error_message().contains("n-000001"));
    }
    assert_eq!(fake.nodes().len(), 1);
    // Ids and addresses are never reused.
    let r = api.create("small", json!({})).await;
    assert_eq!(r.node_id(), "n-000003");
    assert_eq!(r.body["node"]["address"], "10.1.0.3");
}

#[tokio::test]
async fn state_progresses_after_the_first_read() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    let id = api.create("small", json!({})).await.node_id();
    assert_eq!(fake.nodes()[0].state, "provisioning");
    // The first read still shows provisioning; it is the read that moves it on.
    let r = api.get(&format!("/nodes/{id}")).await;
    assert_eq!(r.body["node"]["state"], "provisioning");
    assert_eq!(fake.nodes()[0].state, "running");
    assert_eq!(
        api.get(&format!("/nodes/{id}")).await.body["node"]["state"],
        "running"
    );

    // A list read counts too, but only for the nodes on the page returned.
    let a = api.create("small", json!({"g": "a"})).await.node_id();
    let b = api.create("small", json!({"g": "b"})).await.node_id();
    let r = api.get("/nodes?label_selector=g=a").await;
    assert_eq!(r.body["nodes"][0]["state"], "provisioning");
    let r = api.get("/nodes").await;
    let states: Vec<(&str, &str)> = r.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            (id.as_str(), "running"),
            (a.as_str(), "running"),
            (b.as_str(), "provisioning")
        ]
    );
    // Taking the ground truth does not count as a read.
    let before = fake.nodes();
    assert_eq!(fake.nodes(), before);
}

#[tokio::test]
async fn label_selectors() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    let a = api
        .create("small", json!({"owner": "o1", "request": "r1"}))
        .await
        .node_id();
    let b = api
        .create("small", json!({"owner": "o1", "request": "r2"}))
        .await
        .node_id();
    let c = api
        .create("small", json!({"owner": "o2", "request": "r1"}))
        .await
        .node_id();
    let untagged = fake.plant(labels(&[]));
    let ids = |r: &Resp| -> Vec<String> {
        r.body["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap().to_string())
            .collect()
    };
    for (selector, want) in [
        ("owner=o1", vec![&a, &b]),
        ("owner=o1,request=r1", vec![&a]),
        ("request=r1", vec![&a, &c]),
        ("owner=o3", vec![]),
        ("owner=o1,owner=o2", vec![]),
        ("", vec![&a, &b, &c, &untagged]),
    ] {
        let r = api.get(&format!("/nodes?label_selector={selector}")).await;
        assert_eq!(r.status, StatusCode::OK, "{selector}");
        assert_eq!(ids(&r).iter().collect::<Vec<_>>(), want, "{selector}");
    }
    // Percent-encoded selectors work like plain ones.
    let r = api
        .get("/nodes?label_selector=owner%3Do1%2Crequest%3Dr2")
        .await;
    assert_eq!(ids(&r), [b]);
    for bad in [
        "owner",
        "owner==o1",
        "owner=o1,",
        "owner!=o1",
        "a%20b=c",
        "owner=o1,request",
    ] {
        let r = api.get(&format!("/nodes?label_selector={bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(r.error_code(), "invalid_request", "{bad}");
        assert!(r.error_message().contains("label_selector"), "{bad}");
    }
}

#[tokio::test]
async fn pagination_sees_every_node_once() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    for i in 0..57 {
        let l = if i % 2 == 0 {
            json!({"even": "yes"})
        } else {
            json!({})
        };
        assert_eq!(api.create("small", l).await.status, StatusCode::CREATED);
    }
    // Default page size is 25.
    let r = api.get("/nodes").await;
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 25);
    assert_eq!(r.body["next_page"], 2);

    for (per_page, selector, total) in [(10, "", 57), (100, "", 57), (7, "even=yes", 29)] {
        let mut seen = BTreeSet::new();
        let mut page = 1;
        let mut pages = 0;
        loop {
            let r = api
                .get(&format!(
                    "/nodes?label_selector={selector}&page={page}&per_page={per_page}"
                ))
                .await;
            assert_eq!(r.status, StatusCode::OK);
            pages += 1;
            for n in r.body["nodes"].as_array().unwrap() {
                assert!(seen.insert(n["id"].as_str().unwrap().to_string()));
            }
            match r.body["next_page"].as_u64() {
                Some(next) => {
                    assert_eq!(next, page + 1);
                    page = next;
                }
                None => {
                    assert!(r.body["next_page"].is_null());
                    break;
                }
            }
        }
        assert_eq!(seen.len(), total, "per_page={per_page} {selector}");
        assert_eq!(pages, total.div_ceil(per_page), "per_page={per_page}");
    }
    // Past the end: empty, no next page.
    let r = api.get("/nodes?page=99").await;
    assert_eq!(r.body, json!({"nodes": [], "next_page": null}));
    // Exactly one full page: no next page.
    let r = api.get("/nodes?label_selector=even=yes&per_page=29").await;
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 29);
    assert!(r.body["next_page"].is_null());

    for bad in [
        "page=0",
        "page=x",
        "per_page=0",
        "per_page=101",
        "per_page=-1",
    ] {
        let r = api.get(&format!("/nodes?{bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(r.error_code(), "invalid_request");
        let param = bad.split('=').next().unwrap();
        assert!(r.error_message().contains(param), "{bad}");
    }
    assert_eq!(fake.nodes().len(), 57);
}

#[tokio::test]
async fn idempotency_key() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    let body = json!({"type": "small", "labels": {"req": "r1"}});
    let first = api.post(body.clone(), &[("idempotency-key", "r1")]).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let id = first.node_id();

    // A replay returns the same node with 200 and creates nothing, also
    // when the body spells the defaults out.
    let again = api.post(body.clone(), &[("Idempotency-Key", "r1")]).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.node_id(), id);
    let spelled = api
        .post(
            json!({"labels": {"req": "r1"}, "zone": "zone-a", "capacity_type": "on-demand", "type": "small"}),
            &[("idempotency-key", "r1")],
        )
        .await;
    assert_eq!(
        (spelled.status, spelled.node_id()),
        (StatusCode::OK, id.clone())
    );
    assert_eq!(fake.nodes().len(), 1);
    assert_eq!(fake.nodes()[0].idempotency_key.as_deref(), Some("r1"));

    // The same key with another body is a conflict.
    let conflict = api
        .post(
            json!({"type": "medium", "labels": {"req": "r1"}}),
            &[("idempotency-key", "r1")],
        )
        .await;
    assert_eq!(conflict.status, StatusCode::CONFLICT);
    assert_eq!(conflict.error_code(), "idempotency_conflict");

    // Another key, or none, creates a new node.
    let other = api.post(body.clone(), &[("idempotency-key", "r2")]).await;
    assert_eq!(other.status, StatusCode::CREATED);
    assert_ne!(other.node_id(), id);
    assert_eq!(
        api.post(body.clone(), &[]).await.status,
        StatusCode::CREATED
    );
    assert_eq!(fake.nodes().len(), 3);

    // Once the node is deleted, its key is free again.
    assert_eq!(
        api.delete(&format!("/nodes/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    let fresh = api
        .post(json!({"type": "large"}), &[("idempotency-key", "r1")])
        .await;
    assert_eq!(fresh.status, StatusCode::CREATED);
    assert_ne!(fresh.node_id(), id);

    // A malformed key is refused.
    let bad = api.post(body, &[("idempotency-key", " ")]).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.error_message().contains("Idempotency-Key"));
}

#[tokio::test]
async fn create_validation_and_capacity() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    for (body, field) in [
        (json!({"type": "xl"}), "type"),
        (json!({"zone": "zone-a"}), "type"),
        (json!({"type": "small", "zone": "zone-z"}), "zone"),
        (
            json!({"type": "small", "capacity_type": "reserved"}),
            "capacity_type",
        ),
        (
            json!({"type": "small", "labels": {"bad key": "v"}}),
            "labels",
        ),
        (
            json!({"type": "small", "labels": {"k": "bad value"}}),
            "labels",
        ),
        (
            json!({"type": "small", "labels": {"k": "x".repeat(64)}}),
            "labels",
        ),
        (json!({"type": "small", "image": "ubuntu"}), "image"),
    ] {
        let r = api.post(body.clone(), &[]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(r.error_code(), "invalid_request", "{body}");
        assert!(
            r.error_message().contains(field),
            "{body}: {}",
            r.error_message()
        );
    }
    let r = api
        .raw(Method::POST, "/nodes", &[], Some(b"{not json".to_vec()))
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::BAD_REQUEST, "invalid_request")
    );
    assert!(r.error_message().contains("JSON"));

    // gpu: zone-b only, never spot.
    for body in [
        json!({"type": "gpu"}),
        json!({"type": "gpu", "zone": "zone-a"}),
        json!({"type": "gpu", "zone": "zone-b", "capacity_type": "spot"}),
    ] {
        let r = api.post(body.clone(), &[]).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(r.error_code(), "insufficient_capacity");
        assert!(
            r.error_message().contains("gpu") && r.error_message().contains("zone-"),
            "{}",
            r.error_message()
        );
    }
    assert!(fake.nodes().is_empty());
    let r = api
        .post(json!({"type": "gpu", "zone": "zone-b"}), &[])
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Every other type in every zone, on demand and spot.
    for t in NODE_TYPES.iter().filter(|t| t.name != "gpu") {
        for zone in refcloud::ZONES {
            for cap in [refcloud::ON_DEMAND, refcloud::SPOT] {
                let r = api
                    .post(
                        json!({"type": t.name, "zone": zone, "capacity_type": cap}),
                        &[],
                    )
                    .await;
                assert_eq!(r.status, StatusCode::CREATED, "{} {zone} {cap}", t.name);
            }
        }
    }
}

#[tokio::test]
async fn quota() {
    let (fake, api) = start(RefCloudFakeOptions {
        max_nodes: 2,
        ..RefCloudFakeOptions::default()
    })
    .await;
    let a = api.create("small", json!({})).await.node_id();
    fake.plant(labels(&[("foreign", "yes")]));
    let r = api.create("small", json!({})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::FORBIDDEN, "quota_exceeded")
    );
    api.delete(&format!("/nodes/{a}")).await;
    assert_eq!(
        api.create("small", json!({})).await.status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn injected_faults() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;

    fake.inject(RefFault::RateLimited { retry_after_s: 7 });
    let r = api.get("/nodes").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.error_code(), "rate_limited");
    assert_eq!(r.headers["retry-after"], "7");
    // The fake answers exactly what the public renderer produces.
    assert_eq!(r.raw, refcloud::rate_limited_error(7).body.as_bytes());
    assert_eq!(api.get("/nodes").await.status, StatusCode::OK);

    // Create-only faults wait for the next create, skipping other requests.
    fake.inject(RefFault::Capacity);
    fake.inject(RefFault::Quota);
    assert_eq!(api.get("/nodes").await.status, StatusCode::OK);
    let r = api
        .post(
            json!({"type": "medium", "zone": "zone-b"}),
            &[("idempotency-key", "k")],
        )
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_capacity")
    );
    assert_eq!(
        r.raw,
        refcloud::capacity_error("zone-b", "medium").body.as_bytes()
    );
    let r = api.create("small", json!({})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::FORBIDDEN, "quota_exceeded")
    );
    assert_eq!(r.raw, refcloud::quota_error(1000).body.as_bytes());
    assert!(fake.nodes().is_empty());

    fake.inject(RefFault::ServerError);
    let r = api.create("small", json!({})).await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::INTERNAL_SERVER_ERROR, "internal")
    );
    fake.inject(RefFault::Unauthorized);
    let r = api.get("/nodes/n-000001").await;
    assert_eq!(
        (r.status, r.error_code()),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    assert!(fake.nodes().is_empty());

    // The faulted create recorded no idempotency key: the retry creates.
    let r = api
        .post(
            json!({"type": "medium", "zone": "zone-b"}),
            &[("idempotency-key", "k")],
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let id = r.node_id();
    // A fault on a read does not count as a read.
    fake.inject(RefFault::ServerError);
    assert_eq!(
        api.get(&format!("/nodes/{id}")).await.status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(fake.nodes()[0].reads, 0);
    // A fault on a delete deletes nothing.
    fake.inject(RefFault::RateLimited { retry_after_s: 1 });
    assert_eq!(
        api.delete(&format!("/nodes/{id}")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(fake.nodes().len(), 1);
    // Faults are consumed in order, one request each.
    fake.inject(RefFault::ServerError);
    fake.inject(RefFault::RateLimited { retry_after_s: 2 });
    assert_eq!(
        api.get("/nodes").await.status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(
        api.get("/nodes").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(api.get("/nodes").await.status, StatusCode::OK);
}

#[tokio::test]
async fn unknown_routes_and_ids() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    api.create("small", json!({})).await;
    for (method, path) in [
        (Method::GET, "/nope"),
        (Method::PUT, "/nodes"),
        (Method::PATCH, "/nodes/n-000001"),
        (Method::GET, "/nodes/n-000001/extra"),
        (Method::GET, "/nodes/n-1"),
        (Method::GET, "/nodes/abc"),
        (Method::DELETE, "/nodes/n-000002"),
    ] {
        let r = api.raw(method.clone(), path, &[], None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(r.error_code(), "not_found");
    }
    // A trailing slash is the same path.
    assert_eq!(api.get("/nodes/").await.status, StatusCode::OK);
    assert_eq!(fake.request_count(), 9);
}

#[tokio::test]
async fn planted_nodes_are_ordinary_nodes() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    let id = fake.plant(labels(&[("wasmprov-owner", "someone-else")]));
    assert_eq!(id, "n-000001");
    assert_eq!(fake.request_count(), 0);
    let r = api.get(&format!("/nodes/{id}")).await;
    assert_eq!(r.body["node"]["labels"]["wasmprov-owner"], "someone-else");
    assert_eq!(r.body["node"]["type"], "small");
    let next = api.create("small", json!({})).await.node_id();
    assert_eq!(next, "n-000002");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_idempotent_creates_make_one_node_per_key() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    let api = std::sync::Arc::new(api);
    let mut tasks = Vec::new();
    for i in 0..40 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("k{}", i % 10);
            let r = api
                .post(
                    json!({"type": "small", "labels": {"k": key}}),
                    &[("idempotency-key", &key)],
                )
                .await;
            (r.status, r.node_id())
        }));
    }
    let mut created = 0;
    let mut ids = BTreeSet::new();
    for t in tasks {
        let (status, id) = t.await.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            StatusCode::OK => {}
            other => panic!("unexpected {other}"),
        }
        ids.insert(id);
    }
    assert_eq!((created, ids.len(), fake.nodes().len()), (10, 10, 10));
}

#[tokio::test]
async fn shutdown_and_drop_stop_the_server() {
    let (fake, api) = start(RefCloudFakeOptions::default()).await;
    assert_eq!(api.get("/nodes").await.status, StatusCode::OK);
    let addr = fake.addr();
    fake.shutdown().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());

    let fake = RefCloudFake::start(loopback(), RefCloudFakeOptions::default())
        .await
        .unwrap();
    let addr = fake.addr();
    drop(fake);
    tokio::task::yield_now().await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
