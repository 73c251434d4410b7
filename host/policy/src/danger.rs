//! Grants that are DANGEROUS to give a plugin, whatever it declares: what
//! the install screen, `wasmprov inspect` and the load warnings flag.
//!
//! A plugin's declaration is its author's word; a manifest written from it
//! grants exactly that word. Some words hand the plugin more than a cloud
//! API: the host's own credentials, another cloud's, the whole internet
//! under one wildcard, the machine's loopback services, or a shell. Each
//! rule here says why, so the operator can decide with the reason in
//! front of them. Nothing here refuses anything: the operator may have
//! good reasons, and the manifest stays theirs.
//!
//! | rule | flagged | why |
//! |---|---|---|
//! | host variable | a secret read from `WASMPROV_*` | the host's own credentials (daemon token, registry and signing passwords) |
//! | another provider's credentials | a secret read from a variable of a cloud's or tool's credential chain (`AWS_*`, `GOOGLE_*`, `AZURE_*`, `HCLOUD_*`, …) that the plugin's name does not claim | the plugin would act as that account |
//! | wide wildcard | `*.SUFFIX` where `SUFFIX` is a public suffix (`*.com`, `*.co.uk`, `*.s3.amazonaws.com`) | more than one registrable domain: anyone's servers |
//! | any port | `host:*` | every service on that host, not one API |
//! | loopback / link-local | `127.0.0.0/8`, `::1`, `localhost`, `169.254.0.0/16`, `fe80::/10`, `0.0.0.0`, or a network containing them | services of this machine, cloud metadata (instance credentials) |
//! | shell or interpreter | `sh`, `bash`, `python3`, `env`, `sudo`, … as an exec program | runs whatever the plugin passes as arguments |
//! | loader variable | `LD_PRELOAD`, `PATH`, `BASH_ENV`, `NODE_OPTIONS`, … the plugin may set for a program | makes a granted program run other code |
//! | template widened | a `{key}` value that changes the host a grant's fixed text names (`/`, `#`, `?`, `@`, `*`, `{` inside the host) | the grant is not what the template promised |

use std::net::IpAddr;

use serde::Serialize;

use crate::exec::ExecGrant;
use crate::http::{HostPattern, HttpGrant, PortPattern, special_class};
use crate::manifest::Manifest;

/// One dangerous grant and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Danger {
    /// `http`, `exec`, `secret` or `config`.
    pub kind: &'static str,
    /// The grant as written (`https://*.com`, `/bin/sh -c *`, `token`).
    pub item: String,
    /// Why it is dangerous, in one line.
    pub reason: String,
}

impl std::fmt::Display for Danger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DANGEROUS {} {}: {}", self.kind, self.item, self.reason)
    }
}

/// Credential chains of clouds and tools: variable prefixes (or whole
/// names), and the words in a plugin's name that claim them.
const CREDENTIAL_CHAINS: &[(&str, &[&str], &[&str])] = &[
    ("AWS", &["AWS_"], &["aws", "ec2", "amazon"]),
    (
        "Google Cloud",
        &[
            "GOOGLE_",
            "GCLOUD_",
            "CLOUDSDK_",
            "GCP_",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ],
        &["gcp", "google", "gce", "gcloud"],
    ),
    ("Azure", &["AZURE_", "ARM_"], &["azure"]),
    ("Hetzner", &["HCLOUD_"], &["hetzner", "hcloud"]),
    (
        "DigitalOcean",
        &["DIGITALOCEAN_", "DO_TOKEN"],
        &["digitalocean", "do"],
    ),
    ("Linode", &["LINODE_"], &["linode", "akamai"]),
    ("Vultr", &["VULTR_"], &["vultr"]),
    ("OpenStack", &["OS_PASSWORD", "OS_TOKEN"], &["openstack"]),
    ("Oracle Cloud", &["OCI_"], &["oci", "oracle"]),
    ("Scaleway", &["SCW_"], &["scaleway", "scw"]),
    ("Exoscale", &["EXOSCALE_"], &["exoscale"]),
    ("Cloudflare", &["CLOUDFLARE_", "CF_API_"], &["cloudflare"]),
    ("GitHub", &["GITHUB_TOKEN", "GH_TOKEN"], &[]),
    ("GitLab", &["GITLAB_TOKEN", "CI_JOB_TOKEN"], &[]),
    ("Kubernetes", &["KUBECONFIG"], &["kubernetes", "k8s"]),
    ("HashiCorp Vault", &["VAULT_TOKEN"], &["vault"]),
    ("Docker", &["DOCKER_"], &[]),
    ("SSH agent", &["SSH_AUTH_SOCK"], &[]),
];

/// Programs that run whatever they are told: shells, interpreters, and
/// programs whose job is to run another program.
const RUNNERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "ash",
    "busybox",
    "env",
    "sudo",
    "su",
    "doas",
    "pkexec",
    "runuser",
    "setsid",
    "nohup",
    "xargs",
    "nice",
    "timeout",
    "stdbuf",
    "chroot",
    "nsenter",
    "unshare",
    "ssh",
    "python",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "jq",
    "expect",
    "osascript",
    "pwsh",
    "powershell",
    "Rscript",
    "guile",
    "racket",
    "ghci",
    "irb",
    "find",
    "make",
    "vim",
    "vi",
    "emacs",
    "ed",
    "sed",
    "docker",
    "podman",
    "kubectl",
];

/// Environment variables that make a program load or run other code.
const LOADER_VARIABLES: &[&str] = &[
    "PATH",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "GCONV_PATH",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_CONFIG_GLOBAL",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "HOME",
    "XDG_CONFIG_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Why reading `env` into a plugin called `plugin` is dangerous, if it is.
#[must_use]
pub fn secret_variable(plugin: &str, env: &str) -> Option<String> {
    let upper = env.to_ascii_uppercase();
    if upper.starts_with("WASMPROV_") {
        return Some(format!(
            "${env} is a variable of the host itself (its daemon token, registry or signing password live in WASMPROV_*)"
        ));
    }
    let words: Vec<&str> = plugin
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for (provider, prefixes, claims) in CREDENTIAL_CHAINS {
        let in_chain = prefixes.iter().any(|p| {
            if p.ends_with('_') {
                upper.starts_with(p)
            } else {
                upper == *p
            }
        });
        if in_chain && !claims.iter().any(|c| words.contains(c)) {
            return Some(format!(
                "${env} belongs to {provider}'s credential chain, and the plugin {plugin} is not named for {provider}: it would act as that account"
            ));
        }
    }
    None
}

fn ip_danger(ip: IpAddr) -> Option<&'static str> {
    match special_class(ip) {
        Some(class @ ("loopback" | "link-local (cloud metadata)" | "unspecified")) => Some(class),
        _ => None,
    }
}

/// Whether a network contains a loopback, link-local or unspecified address.
fn network_danger(addr: IpAddr, prefix: u8) -> Option<&'static str> {
    let probes: &[IpAddr] = &[
        IpAddr::from([127, 0, 0, 1]),
        IpAddr::from([169, 254, 169, 254]),
        IpAddr::from([0, 0, 0, 0]),
        IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]),
        IpAddr::from([0xfe80u16, 0, 0, 0, 0, 0, 0, 1]),
        IpAddr::from([0xfd00u16, 0xec2, 0, 0, 0, 0, 0, 0x254]),
    ];
    probes
        .iter()
        .find(|p| in_network(**p, addr, prefix))
        .and_then(|p| ip_danger(*p).or(Some("cloud metadata")))
}

fn in_network(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Why an HTTP grant is dangerous, one reason each.
#[must_use]
pub fn http_grant(grant: &HttpGrant) -> Vec<String> {
    let mut out = Vec::new();
    match &grant.host {
        HostPattern::Subdomains(base) => {
            if psl::domain_str(base).is_none() {
                out.push(format!(
                    "*.{base} is wider than one registrable domain ({base} is a public suffix): it reaches anyone's servers under it"
                ));
            }
        }
        HostPattern::Name(name) => {
            if name == "localhost" || name.ends_with(".localhost") {
                out.push(format!("{name} is this machine (loopback)"));
            }
        }
        HostPattern::Ip(ip) => {
            if let Some(class) = ip_danger(*ip) {
                out.push(format!(
                    "{ip} is a {class} address: services of this machine{}",
                    if class.starts_with("link-local") {
                        " or the cloud's instance metadata (its credentials)"
                    } else {
                        ""
                    }
                ));
            }
        }
        HostPattern::Network(ip, prefix) => {
            if let Some(class) = network_danger(*ip, *prefix) {
                out.push(format!(
                    "the network {ip}/{prefix} contains {class} addresses: services of this machine or the cloud's instance metadata"
                ));
            }
        }
    }
    if grant.port == PortPattern::Any {
        out.push("any port: every service on that host, not one API".to_string());
    }
    out
}

/// The program's name without directories and version suffixes
/// (`/usr/bin/python3.12` → `python`).
fn program_base(program: &str) -> &str {
    let base = program.rsplit('/').next().unwrap_or(program);
    base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
}

/// Why an exec grant is dangerous, one reason each.
#[must_use]
pub fn exec_grant(grant: &ExecGrant) -> Vec<String> {
    let mut out = Vec::new();
    let base = program_base(&grant.program);
    if RUNNERS.contains(&base) {
        out.push(format!(
            "{} is a shell, interpreter or program runner: it runs whatever the plugin passes it",
            grant.program
        ));
    }
    for name in &grant.env {
        let upper = name.to_ascii_uppercase();
        if upper.starts_with("LD_")
            || upper.starts_with("DYLD_")
            || upper.starts_with("BASH_FUNC_")
            || LOADER_VARIABLES.contains(&name.as_str())
            || LOADER_VARIABLES.contains(&upper.as_str())
        {
            out.push(format!(
                "the plugin may set {name}, which makes the program load or run other code"
            ));
        }
    }
    out
}

/// Every dangerous grant of a manifest: its secrets' variables, HTTP and
/// exec grants.
#[must_use]
pub fn manifest(manifest: &Manifest) -> Vec<Danger> {
    let mut out = Vec::new();
    for (key, spec) in &manifest.secrets {
        if let Some(reason) = secret_variable(&manifest.name, &spec.env) {
            out.push(Danger {
                kind: "secret",
                item: key.clone(),
                reason,
            });
        }
    }
    for g in manifest.http.grants() {
        for reason in http_grant(g) {
            out.push(Danger {
                kind: "http",
                item: g.source.clone(),
                reason,
            });
        }
    }
    for g in manifest.exec.grants() {
        for reason in exec_grant(g) {
            out.push(Danger {
                kind: "exec",
                item: g.to_string(),
                reason,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(body: &str) -> Manifest {
        Manifest::parse(
            "p.toml",
            &format!("name = \"victim\"\ncomponent = \"p.wasm\"\n{body}"),
        )
        .unwrap()
    }

    fn flagged(body: &str) -> Vec<String> {
        manifest(&m(body)).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn secrets_from_the_host_or_another_providers_chain_are_flagged() {
        for (plugin, env, dangerous) in [
            ("victim", "WASMPROV_SERVE_TOKEN", true),
            ("aws-ec2", "WASMPROV_REGISTRY_PASSWORD", true),
            ("victim", "AWS_SECRET_ACCESS_KEY", true),
            ("hetzner", "AWS_ACCESS_KEY_ID", true),
            ("aws-ec2", "AWS_SECRET_ACCESS_KEY", false),
            ("my-ec2", "AWS_SESSION_TOKEN", false),
            ("hetzner", "HCLOUD_TOKEN", false),
            ("digitalocean", "HCLOUD_TOKEN", true),
            ("digitalocean", "DIGITALOCEAN_TOKEN", false),
            ("victim", "GOOGLE_APPLICATION_CREDENTIALS", true),
            ("victim", "ARM_CLIENT_SECRET", true),
            ("aws-ec2", "GITHUB_TOKEN", true),
            ("victim", "SSH_AUTH_SOCK", true),
            ("victim", "VICTIM_TOKEN", false),
            ("victim", "EXAMPLE_TOKEN", false),
            // `do` must be a word of the name, not a part of one.
            ("docs", "DIGITALOCEAN_TOKEN", true),
        ] {
            assert_eq!(
                secret_variable(plugin, env).is_some(),
                dangerous,
                "{plugin} reading ${env}"
            );
        }
    }

    #[test]
    fn wide_wildcards_any_ports_and_local_addresses_are_flagged() {
        for (grant, dangerous) in [
            ("https://*.com", true),
            ("https://*.co.uk", true),
            ("https://*.s3.amazonaws.com", true),
            ("https://*.example.com", false),
            ("https://*.api.example.com", false),
            ("https://api.example.com", false),
            ("https://api.example.com:*", true),
            ("http://127.0.0.1:*", true),
            ("http://127.0.0.1:8787", true),
            ("http://[::1]:*", true),
            ("http://[::1]:9000", true),
            ("http://169.254.169.254", true),
            ("http://[fe80::1]", true),
            ("http://0.0.0.0:80", true),
            ("http://localhost:8080", true),
            ("https://[10.0.0.0/8]", false),
            ("https://[0.0.0.0/0]", true),
            ("https://[169.254.0.0/16]", true),
            ("https://[fd00:ec2::/32]", true),
            ("https://[::/0]", true),
            ("https://203.0.113.7", false),
        ] {
            let g = HttpGrant::parse(grant).unwrap();
            assert_eq!(!http_grant(&g).is_empty(), dangerous, "{grant}");
        }
    }

    #[test]
    fn shells_interpreters_and_loader_variables_are_flagged() {
        for (program, env, dangerous) in [
            ("/bin/sh", "", true),
            ("/usr/bin/bash", "", true),
            ("/usr/bin/python3", "", true),
            ("/usr/bin/python3.12", "", true),
            ("/usr/bin/env", "", true),
            ("/usr/bin/sudo", "", true),
            ("/usr/local/bin/node-ctl", "", false),
            ("/usr/local/bin/node-ctl", "REGION", false),
            ("/usr/local/bin/node-ctl", "LD_PRELOAD", true),
            ("/usr/local/bin/node-ctl", "LD_LIBRARY_PATH", true),
            ("/usr/local/bin/node-ctl", "DYLD_INSERT_LIBRARIES", true),
            ("/usr/local/bin/node-ctl", "PATH", true),
            ("/usr/local/bin/node-ctl", "BASH_ENV", true),
            ("/usr/local/bin/node-ctl", "NODE_OPTIONS", true),
            ("/usr/local/bin/node-ctl", "WASMPROV_OWNER", false),
        ] {
            let spec = crate::exec::ExecGrantSpec {
                program: program.into(),
                args: vec!["**".into()],
                env: if env.is_empty() {
                    vec![]
                } else {
                    vec![env.into()]
                },
                timeout_ms: None,
                max_output_bytes: None,
            };
            let g = ExecGrant::from_spec(&spec).unwrap();
            assert_eq!(!exec_grant(&g).is_empty(), dangerous, "{program} {env}");
        }
    }

    #[test]
    fn a_manifest_lists_each_danger_with_its_reason() {
        let found = flagged(
            "[secrets]\ntoken = { env = \"AWS_SECRET_ACCESS_KEY\" }\nok = { env = \"VICTIM_TOKEN\" }\n[http]\nallow = [\"https://*.com\", \"https://api.example.com\"]\n[[exec]]\nprogram = \"/bin/sh\"\nargs = [\"-c\", \"*\"]\nenv = [\"LD_PRELOAD\"]\n",
        );
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(
            found[0].starts_with(
                "DANGEROUS secret token: $AWS_SECRET_ACCESS_KEY belongs to AWS's credential chain"
            ),
            "{found:#?}"
        );
        assert!(
            found[1].starts_with(
                "DANGEROUS http https://*.com: *.com is wider than one registrable domain"
            ),
            "{found:#?}"
        );
        assert!(
            found[2].starts_with("DANGEROUS exec /bin/sh -c *: /bin/sh is a shell"),
            "{found:#?}"
        );
        assert!(found[3].contains("LD_PRELOAD"), "{found:#?}");
        assert!(flagged("[http]\nallow = [\"https://api.example.com\"]\n").is_empty());
    }
}
