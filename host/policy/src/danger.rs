//! Grants that are DANGEROUS to give a plugin, whatever it declares: what
//! the install screen, `wasmprov inspect` and the load warnings flag.
//!
//! A plugin's declaration is its author's word; a manifest written from it
//! grants exactly that word. Some words hand the plugin more than a cloud
//! API: the host's own credentials, a cloud account, the whole internet
//! under one wildcard, the machine's loopback services, or a shell. Each
//! rule here says why, so the operator can decide with the reason in
//! front of them. Nothing here refuses anything: the operator may have
//! good reasons, and the manifest stays theirs.
//!
//! | rule | flagged | why |
//! |---|---|---|
//! | host variable | a secret read from `WASMPROV_*` | the host's own credentials (daemon token, registry and signing passwords) |
//! | a provider's or tool's credentials | a secret read from a variable of a cloud's or tool's credential chain (`AWS_*`, `GOOGLE_*`, `AZURE_*`, `HCLOUD_*`, `NPM_TOKEN`, `PGPASSWORD`, …), whatever the plugin is called | the plugin acts as that account; expected of a plugin for that cloud, and a name proves nothing |
//! | a cloud's credential chain run by the host | a secret `{ aws = … }` | the plugin acts as the host's AWS identity (its profile, role, instance or pod role), whatever the plugin is called |
//! | a credential store read as a file | a secret `{ file = … }` under a cloud's or tool's credential store (`~/.aws/`, `~/.config/gcloud/`, `~/.azure/`, `~/.kube/`, `~/.ssh/`, `~/.docker/config.json`, `~/.netrc`), the Kubernetes service-account token (`/var/run/secrets/`), `/proc/` or `/etc/shadow` | the plugin gets the host's, the pod's or the cluster's identity, not a credential made for it |
//! | wide wildcard | `*.BASE` where `BASE` is a public suffix (`*.com`, `*.s3.amazonaws.com`), has Public Suffix List rules below it (`*.amazonaws.com`, `*.windows.net`, `*.on.aws`), or is a multi-tenant domain the list lacks (`*.cloudflarestorage.com`, `*.azure.com`) | more than one registrable domain: anyone's servers |
//! | any port | `host:*` | every service on that host, not one API |
//! | loopback / link-local / metadata | an address or network that meets `127.0.0.0/8`, `::1`, `169.254.0.0/16`, `fe80::/10`, `0.0.0.0/8`, `::`, or a cloud metadata address (`fd00:ec2::254`, `100.100.100.200`, `168.63.129.16`, …); `localhost`, `metadata.google.internal` | services of this machine, cloud metadata (instance credentials) |
//! | shell or interpreter | `sh`, any `*sh`, any `python*`, `perl`, `env`, `sudo`, `flock`, `strace`, a dynamic loader (`ld-linux-*.so*`), … as an exec program | runs whatever the plugin passes as arguments |
//! | loader variable | `LD_*`, `GIT_*`, `PYTHON*`, `*_ASKPASS`, `PATH`, `BASH_ENV`, `NODE_OPTIONS`, `GLIBC_TUNABLES`, `DOCKER_HOST`, … the plugin may set for a program | makes a granted program run other code, or talk to another place |
//! | template widened | a `{key}` value that changes the host a grant's fixed text names (`/`, `#`, `?`, `@`, `*`, `{` inside the host); a `{key}` in the scheme or the port | the grant is not what the template promised |

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use serde::Serialize;

use crate::exec::ExecGrant;
use crate::http::{HostPattern, HttpGrant, PortPattern, canonical_ip};
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

/// Credential chains of clouds and tools: who they belong to, and the
/// variable prefixes (ending in `_`) or whole names. A plugin's name never
/// exempts it: anyone can name a plugin `aws-cost`.
const CREDENTIAL_CHAINS: &[(&str, &[&str])] = &[
    ("AWS", &["AWS_"]),
    (
        "Google Cloud",
        &["GOOGLE_", "GCLOUD_", "CLOUDSDK_", "GCP_", "GCE_"],
    ),
    ("Azure", &["AZURE_", "ARM_", "MSI_"]),
    ("Hetzner", &["HCLOUD_"]),
    (
        "DigitalOcean",
        &["DIGITALOCEAN_", "DO_TOKEN", "DO_API_TOKEN"],
    ),
    ("Linode", &["LINODE_"]),
    ("Vultr", &["VULTR_"]),
    (
        "OpenStack",
        &[
            "OS_PASSWORD",
            "OS_TOKEN",
            "OS_APPLICATION_CREDENTIAL_SECRET",
        ],
    ),
    ("Oracle Cloud", &["OCI_"]),
    ("Alibaba Cloud", &["ALIBABA_CLOUD_", "ALICLOUD_"]),
    ("Tencent Cloud", &["TENCENTCLOUD_"]),
    ("IBM Cloud", &["IBMCLOUD_", "IC_API_KEY"]),
    ("Scaleway", &["SCW_"]),
    ("Exoscale", &["EXOSCALE_"]),
    ("OVHcloud", &["OVH_"]),
    ("Equinix Metal", &["METAL_AUTH_TOKEN", "PACKET_AUTH_TOKEN"]),
    ("Cloudflare", &["CLOUDFLARE_", "CF_API_"]),
    (
        "GitHub",
        &[
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "GH_ENTERPRISE_TOKEN",
            "GITHUB_PAT",
            "ACTIONS_ID_TOKEN_REQUEST_",
            "ACTIONS_RUNTIME_TOKEN",
        ],
    ),
    (
        "GitLab",
        &[
            "GITLAB_TOKEN",
            "CI_JOB_TOKEN",
            "CI_JOB_JWT",
            "GITLAB_PRIVATE_TOKEN",
        ],
    ),
    ("Bitbucket", &["BITBUCKET_TOKEN", "BITBUCKET_APP_PASSWORD"]),
    (
        "Buildkite",
        &["BUILDKITE_AGENT_TOKEN", "BUILDKITE_API_TOKEN"],
    ),
    ("CircleCI", &["CIRCLE_TOKEN", "CIRCLECI_TOKEN"]),
    ("Kubernetes", &["KUBECONFIG"]),
    ("HashiCorp Vault", &["VAULT_"]),
    (
        "HashiCorp Consul",
        &["CONSUL_HTTP_TOKEN", "CONSUL_HTTP_AUTH"],
    ),
    ("HashiCorp Nomad", &["NOMAD_TOKEN"]),
    (
        "Terraform Cloud",
        &["TFE_TOKEN", "TF_TOKEN_", "ATLAS_TOKEN"],
    ),
    ("Docker", &["DOCKER_"]),
    ("npm", &["NPM_TOKEN", "NODE_AUTH_TOKEN", "NPM_CONFIG__AUTH"]),
    (
        "PyPI",
        &["TWINE_PASSWORD", "PYPI_TOKEN", "UV_PUBLISH_TOKEN"],
    ),
    ("crates.io", &["CARGO_REGISTRY_TOKEN", "CARGO_REGISTRIES_"]),
    ("PostgreSQL", &["PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE"]),
    ("MySQL", &["MYSQL_PWD"]),
    ("Redis", &["REDISCLI_AUTH"]),
    (
        "1Password",
        &[
            "OP_SERVICE_ACCOUNT_TOKEN",
            "OP_SESSION_",
            "OP_CONNECT_TOKEN",
        ],
    ),
    ("Bitwarden", &["BW_SESSION", "BWS_ACCESS_TOKEN"]),
    ("SOPS", &["SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE"]),
    ("Sentry", &["SENTRY_AUTH_TOKEN"]),
    ("Slack", &["SLACK_TOKEN", "SLACK_BOT_TOKEN"]),
    ("SSH agent", &["SSH_AUTH_SOCK"]),
];

/// Programs that run whatever they are told: shells, interpreters, and
/// programs whose job is to run another program. Names ending in `sh`
/// (shells), starting with `python`, `pypy`, `perl`, `ruby`, `php`, `lua`,
/// `tclsh`, or a dynamic loader (`ld-linux-x86-64.so.2`, `ld.so`) are
/// caught by rule in [`runner`]; these are the rest.
const RUNNERS: &[&str] = &[
    "busybox",
    "toybox",
    "env",
    "sudo",
    "su",
    "doas",
    "pkexec",
    "runuser",
    "setpriv",
    "capsh",
    "setsid",
    "nohup",
    "xargs",
    "parallel",
    "nice",
    "ionice",
    "chrt",
    "taskset",
    "prlimit",
    "timeout",
    "time",
    "watch",
    "stdbuf",
    "flock",
    "script",
    "chroot",
    "nsenter",
    "unshare",
    "firejail",
    "bwrap",
    "proot",
    "fakeroot",
    "faketime",
    "systemd-run",
    "systemd-nspawn",
    "machinectl",
    "run-parts",
    "start-stop-daemon",
    "strace",
    "ltrace",
    "gdb",
    "lldb",
    "valgrind",
    "catchsegv",
    "tmux",
    "screen",
    "node",
    "nodejs",
    "deno",
    "bun",
    "java",
    "jshell",
    "wish",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "jq",
    "expect",
    "osascript",
    "Rscript",
    "R",
    "julia",
    "guile",
    "racket",
    "sbcl",
    "ghci",
    "irb",
    "erl",
    "elixir",
    "find",
    "make",
    "vim",
    "vi",
    "nvim",
    "emacs",
    "ed",
    "sed",
    "docker",
    "podman",
    "nerdctl",
    "kubectl",
];

/// Whether a program (its file name) runs whatever it is told.
fn runner(program: &str) -> bool {
    let file = program.rsplit('/').next().unwrap_or(program);
    // A dynamic loader runs any program given as its first argument.
    if file.starts_with("ld") && file.contains(".so") {
        return true;
    }
    // Version and build suffixes: python3.12, python3-dbg, perl5.36, lua5.4.
    let base = file.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    let base = base.strip_suffix("-dbg").unwrap_or(base);
    let base = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    base.ends_with("sh")
        || [
            "python",
            "pypy",
            "perl",
            "ruby",
            "php",
            "lua",
            "tclsh",
            "pwsh",
            "powershell",
        ]
        .iter()
        .any(|p| base.starts_with(p))
        || RUNNERS.contains(&base)
        || RUNNERS.contains(&file)
}

/// Environment variables that make a program load or run other code, or
/// talk to another place than it would. Prefixes (`LD_`, `GIT_`,
/// `PYTHON`, …) and suffixes (`_ASKPASS`, `_PROXY`) are rules in
/// [`loader_variable`]; these are the rest.
const LOADER_VARIABLES: &[&str] = &[
    "PATH",
    "BASH_ENV",
    "ENV",
    "ZDOTDIR",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "SHELL",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "RUSTC_WRAPPER",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "SSLKEYLOGFILE",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
    "HOME",
    "XDG_CONFIG_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NO_PROXY",
    "KUBECONFIG",
];

/// Whether a program the plugin may set `name` for can be made to load or
/// run other code (or to talk elsewhere) by it.
fn loader_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "LD_",
        "DYLD_",
        "BASH_FUNC_",
        // Git reads dozens: GIT_CONFIG_COUNT/KEY_n/VALUE_n and
        // GIT_CONFIG_PARAMETERS set any option (core.sshCommand), GIT_DIR
        // another repository, GIT_ASKPASS/GIT_PROXY_COMMAND run programs.
        "GIT_",
        // PYTHONWARNINGS imports modules, PYTHONSTARTUP runs a file, …
        "PYTHON",
        "PERL",
        "RUBY",
        "NPM_CONFIG_",
        "DOCKER_",
        "CONTAINER_HOST",
        "MALLOC_",
    ]
    .iter()
    .any(|p| upper.starts_with(p))
        || upper.ends_with("_ASKPASS")
        || upper.ends_with("_PROXY")
        || LOADER_VARIABLES.contains(&upper.as_str())
}

/// Why reading `env` into the plugin `plugin` is dangerous, if it is.
///
/// A variable of a cloud's or tool's credential chain is always flagged,
/// whatever the plugin is called (a name proves nothing): for the plugin
/// of that cloud it is expected, and the reason says so.
#[must_use]
pub fn secret_variable(plugin: &str, env: &str) -> Option<String> {
    let _ = plugin;
    let upper = env.to_ascii_uppercase();
    if upper.starts_with("WASMPROV_") {
        return Some(format!(
            "${env} is a variable of the host itself (its daemon token, registry or signing password live in WASMPROV_*)"
        ));
    }
    for (provider, names) in CREDENTIAL_CHAINS {
        let in_chain = names.iter().any(|p| {
            if p.ends_with('_') {
                upper.starts_with(p)
            } else {
                upper == *p
            }
        });
        if in_chain {
            return Some(format!(
                "${env} belongs to {provider}'s credential chain: the plugin acts as that {provider} account (expected of a plugin for {provider}; flagged whatever the plugin is called, as a name proves nothing)"
            ));
        }
    }
    None
}

/// Files that hold a cloud's, a tool's or the host's own credentials:
/// a path containing the first part, and whose.
const CREDENTIAL_FILES: &[(&str, &str)] = &[
    ("/.aws/", "AWS's shared credentials"),
    ("/.config/gcloud/", "Google Cloud's credentials"),
    ("/.azure/", "Azure's credentials"),
    ("/.kube/", "Kubernetes client credentials"),
    ("/.ssh/", "SSH keys"),
    ("/.docker/config.json", "container registry credentials"),
    ("/.netrc", "the netrc's passwords"),
    (
        "/var/run/secrets/",
        "the pod's service-account or cloud identity token",
    ),
    (
        "/run/secrets/kubernetes.io/",
        "the pod's service-account token",
    ),
    (
        "/run/secrets/eks.amazonaws.com/",
        "the pod's AWS identity token",
    ),
    ("/proc/", "another process's memory or environment"),
    ("/etc/shadow", "the host's password hashes"),
];

/// Why handing the secret `source` to the plugin `plugin` is dangerous, if
/// it is: an environment variable as [`secret_variable`] says; the AWS
/// chain always (the plugin acts as the host's AWS identity); a file that
/// is a credential store of a cloud, a tool or the host. A `command` is
/// not flagged: the operator's program runs as written, and the plugin
/// cannot change what it does.
#[must_use]
pub fn secret_source(plugin: &str, source: &crate::secrets::SecretSource) -> Option<String> {
    use crate::secrets::SecretSource;
    match source {
        SecretSource::Env(env) => secret_variable(plugin, env),
        SecretSource::Aws(_) => Some(
            "taken from the host's AWS credential chain: the plugin acts as the host's AWS identity (its profile, role, instance or pod role; expected of a plugin for AWS; flagged whatever the plugin is called, as a name proves nothing)".to_string(),
        ),
        SecretSource::File { path, .. } => CREDENTIAL_FILES
            .iter()
            .find(|(part, _)| path.contains(part) || path.ends_with(part.trim_end_matches('/')))
            .map(|(_, what)| {
                format!("{path} holds {what}: the plugin gets that identity, not a credential made for it")
            }),
        _ => None,
    }
}

/// Addresses and networks a grant must not meet unflagged: this machine,
/// the link, and the clouds' instance metadata services.
const V4_FLAGGED: &[([u8; 4], u8, &str)] = &[
    ([127, 0, 0, 0], 8, "loopback"),
    ([0, 0, 0, 0], 8, "unspecified"),
    ([169, 254, 0, 0], 16, "link-local (cloud metadata)"),
    // Alibaba Cloud's instance metadata.
    ([100, 100, 100, 200], 32, "cloud metadata (Alibaba Cloud)"),
    // Azure's WireServer (VM agent, extension settings).
    ([168, 63, 129, 16], 32, "cloud metadata (Azure WireServer)"),
    // Oracle Cloud Classic's metadata.
    ([192, 0, 0, 192], 32, "cloud metadata (Oracle Cloud)"),
];

const V6_FLAGGED: &[([u16; 8], u8, &str)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback"),
    ([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified"),
    (
        [0xfe80, 0, 0, 0, 0, 0, 0, 0],
        10,
        "link-local (cloud metadata)",
    ),
    // AWS's instance metadata over IPv6 (Nitro).
    (
        [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254],
        128,
        "cloud metadata (AWS)",
    ),
];

/// Host names of this machine or of a cloud's instance metadata.
const FLAGGED_NAMES: &[(&str, &str)] = &[
    ("localhost", "this machine (loopback)"),
    (
        "metadata.google.internal",
        "Google Cloud's instance metadata",
    ),
    ("metadata.goog", "Google Cloud's instance metadata"),
    ("metadata", "a cloud's instance metadata (Google Cloud)"),
    ("instance-data", "AWS's instance metadata"),
    ("instance-data.ec2.internal", "AWS's instance metadata"),
    (
        "metadata.tencentyun.com",
        "Tencent Cloud's instance metadata",
    ),
];

fn prefix_mask_u32(prefix: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0)
}

fn prefix_mask_u128(prefix: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix.min(128)))
        .unwrap_or(0)
}

/// Whether two IPv6 prefixes share an address: one contains the other.
fn v6_meet(a: u128, pa: u8, b: u128, pb: u8) -> bool {
    let mask = prefix_mask_u128(pa.min(pb));
    a & mask == b & mask
}

/// The flagged class a network (`prefix` 32 or 128 for one address)
/// meets, if any. IPv4 addresses written in IPv6 (`::ffff:a.b.c.d`,
/// `::a.b.c.d`) meet what their IPv4 address meets.
fn range_danger(addr: IpAddr, prefix: u8) -> Option<&'static str> {
    let v6 = match addr {
        IpAddr::V4(v4) => {
            let n = u32::from(v4);
            return V4_FLAGGED.iter().find_map(|(o, p, class)| {
                let mask = prefix_mask_u32(prefix.min(*p));
                (n & mask == u32::from(Ipv4Addr::from(*o)) & mask).then_some(*class)
            });
        }
        IpAddr::V6(v6) => u128::from(v6),
    };
    let own = V6_FLAGGED.iter().find_map(|(s, p, class)| {
        v6_meet(v6, prefix, u128::from(Ipv6Addr::from(*s)), *p).then_some(*class)
    });
    own.or_else(|| {
        // IPv4-mapped (::ffff:0:0/96) and IPv4-compatible (::/96) forms.
        [0xffff_u128 << 32, 0].iter().find_map(|base| {
            V4_FLAGGED.iter().find_map(|(o, p, class)| {
                let v4 = u128::from(u32::from(Ipv4Addr::from(*o)));
                v6_meet(v6, prefix, base | v4, 96 + p).then_some(*class)
            })
        })
    })
}

/// Domains that are registrable by the Public Suffix List but have list
/// rules below them (`amazonaws.com` above `s3.amazonaws.com`), generated
/// from the rules the `psl` crate was built from
/// (`host/policy/tools/psl_parents.py`).
static PSL_PARENTS: LazyLock<BTreeSet<&'static str>> = LazyLock::new(|| {
    include_str!("psl_parents.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// Rules in the Public Suffix List's form for multi-tenant domains the
/// list does not have (yet): names below them belong to many customers.
/// A wildcard over such a suffix, or over a domain above one, is as wide
/// as one over a listed suffix.
const UNLISTED_SUFFIXES: &[(&str, &str)] = &[
    // https://ACCOUNT_ID.r2.cloudflarestorage.com
    (
        "r2.cloudflarestorage.com",
        "Cloudflare R2, every account's buckets",
    ),
    // NAME.REGION.cloudapp.azure.com: every customer's VMs and services.
    ("*.cloudapp.azure.com", "Azure, every customer's DNS names"),
    // BUCKET.s3.wasabisys.com
    ("s3.wasabisys.com", "Wasabi, every customer's buckets"),
    // BUCKET.LOCATION.your-objectstorage.com
    (
        "*.your-objectstorage.com",
        "Hetzner Object Storage, every customer's buckets",
    ),
    // BUCKET.oss-REGION.aliyuncs.com
    (
        "*.aliyuncs.com",
        "Alibaba Cloud OSS, every customer's buckets",
    ),
];

/// Why `*.base` reaches more than one party's servers, if it does.
fn wide_wildcard(base: &str) -> Option<String> {
    if psl::domain_str(base).is_none() {
        return Some(format!(
            "*.{base} is wider than one registrable domain ({base} is a public suffix): it reaches anyone's servers under it"
        ));
    }
    if PSL_PARENTS.contains(base) {
        return Some(format!(
            "*.{base} is wider than one registrable domain (the Public Suffix List has public suffixes below {base}: other customers' names): it reaches anyone's servers under it"
        ));
    }
    UNLISTED_SUFFIXES.iter().find_map(|(rule, whose)| {
        let (fixed, wildcard) = match rule.strip_prefix("*.") {
            Some(f) => (f, true),
            None => (*rule, false),
        };
        let parent_of_base = base.split_once('.').map(|(_, p)| p);
        let suffix = base == fixed && !wildcard || wildcard && parent_of_base == Some(fixed);
        let above = fixed.ends_with(&format!(".{base}")) || wildcard && base == fixed;
        (suffix || above).then(|| {
            format!(
                "*.{base} is wider than one party's servers (names under {fixed} are shared: {whose}): it reaches anyone's servers under it"
            )
        })
    })
}

/// Why an HTTP grant is dangerous, one reason each.
#[must_use]
pub fn http_grant(grant: &HttpGrant) -> Vec<String> {
    let mut out = Vec::new();
    let local = |name: &str| {
        FLAGGED_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, what)| *what)
            .or_else(|| {
                name.ends_with(".localhost")
                    .then_some("this machine (loopback)")
            })
    };
    match &grant.host {
        HostPattern::Subdomains(base) => {
            out.extend(wide_wildcard(base));
            let covered: Vec<&str> = FLAGGED_NAMES
                .iter()
                .filter(|(n, _)| n.ends_with(&format!(".{base}")))
                .map(|(n, _)| *n)
                .collect();
            if base == "localhost" {
                out.push(format!("*.{base} is this machine (loopback)"));
            } else if !covered.is_empty() && out.is_empty() {
                out.push(format!(
                    "*.{base} covers {}: a cloud's instance metadata (its credentials)",
                    covered.join(", ")
                ));
            }
        }
        HostPattern::Name(name) => {
            if let Some(what) = local(name) {
                out.push(format!("{name} is {what}"));
            }
        }
        HostPattern::Ip(ip) => {
            let ip = canonical_ip(*ip);
            let bits = if ip.is_ipv4() { 32 } else { 128 };
            if let Some(class) = range_danger(ip, bits) {
                out.push(format!(
                    "{ip} is a {class} address: services of this machine{}",
                    if class.contains("metadata") {
                        " or the cloud's instance metadata (its credentials)"
                    } else {
                        ""
                    }
                ));
            }
        }
        HostPattern::Network(ip, prefix) => {
            if let Some(class) = range_danger(*ip, *prefix) {
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

/// Why an exec grant is dangerous, one reason each.
#[must_use]
pub fn exec_grant(grant: &ExecGrant) -> Vec<String> {
    let mut out = Vec::new();
    if runner(&grant.program) {
        out.push(format!(
            "{} is a shell, interpreter or program runner: it runs whatever the plugin passes it",
            grant.program
        ));
    }
    for name in &grant.env {
        if loader_variable(name) {
            out.push(format!(
                "the plugin may set {name}, which makes the program load or run other code (or talk to another place)"
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
    for (key, source) in &manifest.secret_sources {
        if let Some(reason) = secret_source(&manifest.name, source) {
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
    fn secret_sources_of_a_chain_or_a_credential_store_are_flagged() {
        use crate::secrets::{AwsField, SecretSource};
        let file = |p: &str| SecretSource::File {
            path: p.into(),
            json: None,
        };
        for (source, flagged) in [
            (
                SecretSource::Aws(AwsField::AccessKeyId),
                Some("AWS identity"),
            ),
            (
                SecretSource::Env("AWS_PROFILE".into()),
                Some("AWS's credential chain"),
            ),
            (SecretSource::Env("EXAMPLE_TOKEN".into()), None),
            (
                file("/home/op/.aws/credentials"),
                Some("AWS's shared credentials"),
            ),
            (file("/home/op/.kube/config"), Some("Kubernetes client")),
            (
                file("/var/run/secrets/kubernetes.io/serviceaccount/token"),
                Some("service-account"),
            ),
            (file("/proc/1/environ"), Some("another process")),
            (file("/etc/shadow"), Some("password hashes")),
            (file("/run/secrets/hcloud-token"), None),
            (file("/etc/wasmprov/token"), None),
        ] {
            let got = secret_source("p", &source);
            match flagged {
                None => assert_eq!(got, None, "{source:?}"),
                Some(says) => {
                    let got = got.unwrap_or_else(|| panic!("{source:?} not flagged"));
                    assert!(got.contains(says), "{source:?}: {got}");
                }
            }
        }
        let m = Manifest::parse(
            "p.toml",
            "name = \"p\"\ncomponent = \"p.wasm\"\n[secrets]\nkey = { aws = \"access_key_id\" }\nother = { command = [\"/usr/local/bin/get\"] }\n",
        )
        .unwrap();
        let flagged: Vec<String> = manifest(&m).iter().map(|d| d.item.clone()).collect();
        assert_eq!(flagged, ["key"]);
    }

    #[test]
    fn secrets_from_the_host_or_any_providers_chain_are_flagged_whatever_the_name() {
        for (plugin, env, dangerous) in [
            ("victim", "WASMPROV_SERVE_TOKEN", true),
            ("aws-ec2", "WASMPROV_REGISTRY_PASSWORD", true),
            ("victim", "AWS_SECRET_ACCESS_KEY", true),
            ("hetzner", "AWS_ACCESS_KEY_ID", true),
            // No exemption by name: `aws-cost` is anyone's name.
            ("aws-cost", "AWS_SECRET_ACCESS_KEY", true),
            ("aws-ec2", "AWS_SECRET_ACCESS_KEY", true),
            ("hetzner", "HCLOUD_TOKEN", true),
            ("victim", "GOOGLE_APPLICATION_CREDENTIALS", true),
            ("victim", "ARM_CLIENT_SECRET", true),
            ("aws-ec2", "GITHUB_TOKEN", true),
            ("victim", "SSH_AUTH_SOCK", true),
            ("victim", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", true),
            ("victim", "ACTIONS_ID_TOKEN_REQUEST_URL", true),
            ("victim", "NPM_TOKEN", true),
            ("victim", "CONSUL_HTTP_TOKEN", true),
            ("victim", "PGPASSWORD", true),
            ("victim", "MYSQL_PWD", true),
            ("victim", "VAULT_ADDR", true),
            ("victim", "TF_TOKEN_app_terraform_io", true),
            ("victim", "CARGO_REGISTRY_TOKEN", true),
            ("victim", "VICTIM_TOKEN", false),
            ("victim", "EXAMPLE_TOKEN", false),
            ("victim", "CLUSTER_JOIN_TOKEN", false),
        ] {
            assert_eq!(
                secret_variable(plugin, env).is_some(),
                dangerous,
                "{plugin} reading ${env}"
            );
        }
        // The bundled EC2 plugin's own use reads as expected, not as an attack.
        let own = secret_variable("aws-ec2", "AWS_SECRET_ACCESS_KEY").unwrap();
        assert!(
            own.contains("belongs to AWS's credential chain")
                && own.contains("expected of a plugin for AWS"),
            "{own}"
        );
    }

    #[test]
    fn wide_wildcards_any_ports_and_local_addresses_are_flagged() {
        for (grant, dangerous) in [
            ("https://*.com", true),
            ("https://*.co.uk", true),
            ("https://*.s3.amazonaws.com", true),
            // Registrable domains with public suffixes below them.
            ("https://*.amazonaws.com", true),
            ("https://*.compute.amazonaws.com", true),
            ("https://*.windows.net", true),
            ("https://*.core.windows.net", true),
            ("https://*.on.aws", true),
            // Multi-tenant domains the list lacks.
            ("https://*.cloudflarestorage.com", true),
            ("https://*.r2.cloudflarestorage.com", true),
            ("https://*.azure.com", true),
            ("https://*.cloudapp.azure.com", true),
            ("https://*.eastus.cloudapp.azure.com", true),
            ("https://*.myvm.eastus.cloudapp.azure.com", false),
            ("https://*.0123abc.r2.cloudflarestorage.com", false),
            ("https://*.my-bucket.s3.amazonaws.com", false),
            ("https://*.example.com", false),
            ("https://*.api.example.com", false),
            ("https://*.hetzner.cloud", false),
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
            ("http://api.localhost:8080", true),
            ("http://metadata.google.internal", true),
            ("http://*.google.internal", true),
            ("https://[10.0.0.0/8]", false),
            ("https://[0.0.0.0/0]", true),
            ("https://[169.254.0.0/16]", true),
            ("https://[fd00:ec2::/32]", true),
            ("https://[::/0]", true),
            ("https://203.0.113.7", false),
            // Networks that meet loopback, link-local or metadata addresses.
            ("https://[127.0.0.2/32]", true),
            ("https://[127.128.0.0/9]", true),
            ("https://[126.0.0.0/7]", true),
            ("https://[169.254.170.0/24]", true),
            ("https://[fe80::1:0/112]", true),
            ("https://[fd00:ec2::254]", true),
            ("https://[fd00:ec2::254/128]", true),
            ("https://100.100.100.200", true),
            ("https://[100.100.100.0/24]", true),
            ("https://[100.64.0.0/10]", true),
            ("https://168.63.129.16", true),
            ("https://[::ffff:127.0.0.1]", true),
            ("https://[128.0.0.0/1]", true),
            ("https://[192.0.2.0/24]", false),
            ("https://[100.101.0.0/16]", false),
            ("https://[fd00:ec3::/32]", false),
            ("https://[2001:db8::/32]", false),
        ] {
            let g = HttpGrant::parse(grant).unwrap();
            assert_eq!(!http_grant(&g).is_empty(), dangerous, "{grant}");
        }
    }

    #[test]
    fn the_psl_parent_list_matches_the_psl_crate() {
        assert!(PSL_PARENTS.len() > 500, "{}", PSL_PARENTS.len());
        for parent in PSL_PARENTS.iter() {
            // Each is registrable (or below), so the suffix check alone
            // would let a wildcard over it pass.
            assert!(psl::domain_str(parent).is_some(), "{parent}");
        }
        for must in [
            "amazonaws.com",
            "windows.net",
            "on.aws",
            "compute.amazonaws.com",
        ] {
            assert!(PSL_PARENTS.contains(must), "{must}");
        }
        // A rule below each parent: the crate sees a suffix longer than the parent.
        for (parent, below) in [
            ("amazonaws.com", "bucket.s3.amazonaws.com"),
            ("windows.net", "account.blob.core.windows.net"),
            ("compute.amazonaws.com", "x.eu-west-1.compute.amazonaws.com"),
        ] {
            let suffix = psl::suffix_str(below).unwrap();
            assert!(suffix.len() > parent.len(), "{below}: {suffix}");
        }
    }

    #[test]
    fn shells_interpreters_and_loader_variables_are_flagged() {
        for (program, env, dangerous) in [
            ("/bin/sh", "", true),
            ("/usr/bin/bash", "", true),
            ("/bin/rbash", "", true),
            ("/usr/bin/python3", "", true),
            ("/usr/bin/python3.12", "", true),
            ("/usr/bin/python3-dbg", "", true),
            ("/usr/bin/pypy3", "", true),
            ("/usr/bin/env", "", true),
            ("/usr/bin/sudo", "", true),
            ("/lib64/ld-linux-x86-64.so.2", "", true),
            ("/lib/ld-musl-x86_64.so.1", "", true),
            ("/usr/bin/flock", "", true),
            ("/usr/bin/strace", "", true),
            ("/usr/bin/gdb", "", true),
            ("/usr/bin/systemd-run", "", true),
            ("/usr/bin/setpriv", "", true),
            ("/usr/local/bin/node-ctl", "", false),
            ("/usr/local/bin/hcloud", "", false),
            ("/usr/local/bin/node-ctl", "REGION", false),
            ("/usr/local/bin/node-ctl", "LD_PRELOAD", true),
            ("/usr/local/bin/node-ctl", "LD_LIBRARY_PATH", true),
            ("/usr/local/bin/node-ctl", "DYLD_INSERT_LIBRARIES", true),
            ("/usr/local/bin/node-ctl", "PATH", true),
            ("/usr/local/bin/node-ctl", "BASH_ENV", true),
            ("/usr/local/bin/node-ctl", "NODE_OPTIONS", true),
            ("/usr/local/bin/node-ctl", "GIT_CONFIG_COUNT", true),
            ("/usr/local/bin/node-ctl", "GIT_CONFIG_KEY_0", true),
            ("/usr/local/bin/node-ctl", "GIT_CONFIG_VALUE_0", true),
            ("/usr/local/bin/node-ctl", "GIT_CONFIG_PARAMETERS", true),
            ("/usr/local/bin/node-ctl", "GIT_ASKPASS", true),
            ("/usr/local/bin/node-ctl", "GIT_PROXY_COMMAND", true),
            ("/usr/local/bin/node-ctl", "GIT_DIR", true),
            ("/usr/local/bin/node-ctl", "SSH_ASKPASS", true),
            ("/usr/local/bin/node-ctl", "GLIBC_TUNABLES", true),
            ("/usr/local/bin/node-ctl", "PYTHONWARNINGS", true),
            ("/usr/local/bin/node-ctl", "BROWSER", true),
            ("/usr/local/bin/node-ctl", "DOCKER_HOST", true),
            ("/usr/local/bin/node-ctl", "https_proxy", true),
            ("/usr/local/bin/node-ctl", "WASMPROV_OWNER", false),
            ("/usr/local/bin/node-ctl", "WASMPROV_REQUEST_ID", false),
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
