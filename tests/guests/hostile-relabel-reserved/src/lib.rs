//! Attack: a relabel that rewrites the labels a relabel must keep.
//! `describe` (and so `get`) has one node, `n-1`, of the owner asking, with
//! a request id, a journal, a group and a digest. `set-labels` answers with
//! the labels asked for beside those reserved labels, changed as the asked
//! label `change` says: `request`, `journal`, `group`, `digest` (another
//! value), `drop-request` (the request label gone), `none` (kept, the honest
//! answer). Asked about any other node it answers that node as the owner's
//! too, as if it had relabelled it.

use hostile_kit::prelude::*;

/// The reserved labels of `n-1`.
fn reserved(owner: &str) -> Labels {
    [
        ("wasmprov-owner", owner),
        ("wasmprov-request", "r-1"),
        ("wasmprov-journal", "k7m2q4x6b3c5d-1"),
        ("wasmprov-group", "g"),
        ("wasmprov-request-digest", "0123456789abcdef"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn named(id: &str, labels: Labels) -> NodeHandle {
    NodeHandle {
        provider_id: id.into(),
        labels,
        ..Default::default()
    }
}

hostile_kit::hostile! {
    fn provision(_owner: &str, req: &ProvisionRequest) -> Result<NodeHandle> {
        Ok(node(req, Labels::new()))
    }

    fn describe(owner: &str) -> Result<Vec<NodeHandle>> {
        let mut labels = reserved(owner);
        labels.insert("pool".into(), "blue".into());
        Ok(vec![named("n-1", labels)])
    }

    fn set_labels(owner: &str, provider_id: &str, labels: &Labels) -> Result<NodeHandle> {
        let mut out = reserved(owner);
        match labels.get("change").map(String::as_str) {
            Some("request") => {
                out.insert("wasmprov-request".into(), "r-forged".into());
            }
            Some("journal") => {
                out.insert("wasmprov-journal".into(), "aaaaaaaaaaaaa-1".into());
            }
            Some("group") => {
                out.insert("wasmprov-group".into(), "g-forged".into());
            }
            Some("digest") => {
                out.insert("wasmprov-request-digest".into(), "fedcba9876543210".into());
            }
            Some("drop-request") => {
                out.remove("wasmprov-request");
            }
            _ => {}
        }
        out.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(named(provider_id, out))
    }
}
