//! Attack: cloud metadata endpoints (AWS, ECS, GCP, Alibaba, AWS over IPv6),
//! with a grant that covers only another host. Each outcome is a label.

use hostile_kit::prelude::*;

const TARGETS: &[&str] = &[
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://169.254.170.2/v2/credentials",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://100.100.100.200/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
];

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let mut labels = Labels::new();
        for url in TARGETS {
            let outcome = match Request::get(*url)
                .header("metadata-flavor", "Google")
                .send()
            {
                Ok(resp) => format!("reached: status {}", resp.status),
                Err(e) => format!("{:?}", Error::from(e)),
            };
            labels.insert(format!("try {url}"), outcome);
        }
        Ok(node(req, labels))
    }
);
