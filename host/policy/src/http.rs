//! Where outgoing HTTP is decided: grant patterns and the check every request
//! passes. Deny by default: a plugin with no grant has no HTTP at all.
//!
//! A grant is `scheme://host[:port]`:
//! - `scheme` is `http` or `https`;
//! - `host` is a name, `*.` followed by a name (any one or more leading
//!   labels), an IP literal (IPv6 in brackets), or a network in brackets
//!   (`[10.0.0.0/8]`, `[fd00::/8]`);
//! - `port` is a number or `*`; when left out, the scheme's default port.
//!
//! A grant naming a host by name only ever reaches public addresses: if the
//! name resolves to a loopback, private, link-local or other special address,
//! the request is refused. To reach such an address, a grant must name it as
//! an IP literal or a network containing it (with the same scheme and port).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A scheme a grant can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// Parses `http` or `https` (any case).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        if s.eq_ignore_ascii_case("http") {
            Some(Self::Http)
        } else if s.eq_ignore_ascii_case("https") {
            Some(Self::Https)
        } else {
            None
        }
    }

    /// The port used when none is written.
    #[must_use]
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    /// `http` or `https`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// The host part of a grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this name (lowercase, no trailing dot).
    Name(String),
    /// Any name with one or more labels in front of this suffix.
    Subdomains(String),
    /// Exactly this address; also allows that address even if it is special.
    Ip(IpAddr),
    /// Any address in this network (address, prefix length); also allows
    /// names that resolve into it.
    Network(IpAddr, u8),
}

/// The port part of a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortPattern {
    /// Exactly this port.
    Port(u16),
    /// Any port.
    Any,
}

/// One allowed destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpGrant {
    /// The scheme allowed.
    pub scheme: Scheme,
    /// The hosts allowed.
    pub host: HostPattern,
    /// The ports allowed.
    pub port: PortPattern,
    /// The grant as the operator wrote it.
    pub source: String,
}

/// A grant that could not be parsed, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid HTTP grant {grant:?}: {reason}; expected scheme://host[:port], for example \"https://api.example.com\", \"https://*.example.com:8443\" or \"http://127.0.0.1:*\""
)]
pub struct GrantError {
    /// The grant as written.
    pub grant: String,
    /// What is wrong with it.
    pub reason: String,
}

impl HttpGrant {
    /// Parses one grant.
    ///
    /// # Errors
    /// A [`GrantError`] saying what is wrong and what would be accepted.
    pub fn parse(grant: &str) -> Result<Self, GrantError> {
        let fail = |reason: &str| GrantError {
            grant: grant.to_string(),
            reason: reason.to_string(),
        };
        let (scheme, rest) = grant
            .split_once("://")
            .ok_or_else(|| fail("missing scheme"))?;
        let scheme = Scheme::parse(scheme).ok_or_else(|| fail("scheme must be http or https"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        // A bracketed host (IPv6 or a network) may hold `:` and `/`; nothing else may.
        let unbracketed = match (rest.find('['), rest.find(']')) {
            (Some(0), Some(end)) => &rest[end..],
            _ => rest,
        };
        if unbracketed.contains(['/', '?', '#', '@']) || rest.is_empty() {
            return Err(fail(
                "only scheme, host and port may be given (no path, query or user)",
            ));
        }
        let (host, port) = split_host_port(rest).map_err(|r| fail(&r))?;
        let port = match port {
            None => PortPattern::Port(scheme.default_port()),
            Some("*") => PortPattern::Any,
            Some(p) => PortPattern::Port(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| fail("port must be 1-65535 or *"))?,
            ),
        };
        let host = if let Some((addr, prefix)) = host.split_once('/') {
            let addr = parse_ip_literal(addr)
                .filter(|_| rest.starts_with('['))
                .ok_or_else(|| fail("a network must be an IP address with a prefix length in brackets, as in [10.0.0.0/8]"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let prefix: u8 = prefix.parse().ok().filter(|p| *p <= max).ok_or_else(|| {
                fail("the prefix length of a network must be 0-32 (IPv4) or 0-128 (IPv6)")
            })?;
            HostPattern::Network(addr, prefix)
        } else if let Some(ip) = parse_ip_literal(host) {
            HostPattern::Ip(ip)
        } else if let Some(suffix) = host.strip_prefix("*.") {
            HostPattern::Subdomains(
                normalize_name(suffix).ok_or_else(|| fail("invalid host name"))?,
            )
        } else if host.contains('*') {
            return Err(fail(
                "a wildcard may only stand for leading labels, as in *.example.com",
            ));
        } else {
            HostPattern::Name(normalize_name(host).ok_or_else(|| fail("invalid host name"))?)
        };
        if let HostPattern::Name(name) | HostPattern::Subdomains(name) = &host
            && looks_numeric(name)
        {
            return Err(fail("not a valid IP address or host name"));
        }
        Ok(Self {
            scheme,
            host,
            port,
            source: grant.to_string(),
        })
    }

    /// Whether this grant covers the destination (before name resolution).
    #[must_use]
    pub fn matches(&self, dest: &Destination) -> bool {
        if self.scheme != dest.scheme {
            return false;
        }
        if let PortPattern::Port(p) = self.port
            && p != dest.port
        {
            return false;
        }
        match (&self.host, &dest.host) {
            (HostPattern::Ip(a), DestHost::Ip(b)) => a == b,
            (HostPattern::Network(net, prefix), DestHost::Ip(b)) => in_network(*b, *net, *prefix),
            (HostPattern::Name(a), DestHost::Name(b)) => a == b,
            (HostPattern::Subdomains(suffix), DestHost::Name(b)) => b
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            _ => false,
        }
    }

    /// Whether every destination `other` allows, this grant allows too
    /// (used to tell a grant wider than a plugin's request from one that
    /// only restates it).
    #[must_use]
    pub fn covers(&self, other: &Self) -> bool {
        if self.scheme != other.scheme {
            return false;
        }
        match (self.port, other.port) {
            (PortPattern::Any, _) => {}
            (PortPattern::Port(a), PortPattern::Port(b)) if a == b => {}
            _ => return false,
        }
        let under = |name: &str, suffix: &str| {
            name.strip_suffix(suffix)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
        };
        match (&self.host, &other.host) {
            (HostPattern::Name(a), HostPattern::Name(b)) => a == b,
            (HostPattern::Subdomains(s), HostPattern::Name(b)) => under(b, s),
            (HostPattern::Subdomains(s), HostPattern::Subdomains(t)) => s == t || under(t, s),
            (HostPattern::Ip(a), HostPattern::Ip(b)) => canonical_ip(*a) == canonical_ip(*b),
            (HostPattern::Network(net, p), HostPattern::Ip(b)) => in_network(*b, *net, *p),
            (HostPattern::Network(net, p), HostPattern::Network(m, q)) => {
                q >= p && in_network(*m, *net, *p)
            }
            _ => false,
        }
    }
}

/// Where a request wants to go, normalized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// Scheme of the request.
    pub scheme: Scheme,
    /// Host of the request.
    pub host: DestHost,
    /// Port of the request (explicit or the scheme's default).
    pub port: u16,
}

/// The host a request names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DestHost {
    /// A DNS name, lowercase without a trailing dot.
    Name(String),
    /// An IP literal, in any spelling, normalized.
    Ip(IpAddr),
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            DestHost::Name(n) => write!(f, "{}://{}:{}", self.scheme.as_str(), n, self.port),
            DestHost::Ip(IpAddr::V6(ip)) => {
                write!(f, "{}://[{}]:{}", self.scheme.as_str(), ip, self.port)
            }
            DestHost::Ip(ip) => write!(f, "{}://{}:{}", self.scheme.as_str(), ip, self.port),
        }
    }
}

impl Destination {
    /// Builds a destination from a request's scheme and authority
    /// (`host[:port]`). User information in the authority is refused rather
    /// than stripped, so it cannot smuggle a different host past the check.
    ///
    /// # Errors
    /// A reason when the authority is malformed.
    pub fn from_parts(scheme: &str, authority: &str) -> Result<Self, String> {
        let scheme = Scheme::parse(scheme)
            .ok_or_else(|| format!("scheme {scheme:?} is not http or https"))?;
        if authority.contains('@') {
            return Err("user information in the URL is not allowed".into());
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            None => scheme.default_port(),
            Some(p) => p.parse::<u16>().map_err(|_| format!("bad port {p:?}"))?,
        };
        let host = match parse_ip_literal(host) {
            Some(ip) => DestHost::Ip(ip),
            None if looks_numeric(host) => return Err(format!("bad IP address {host:?}")),
            None => {
                DestHost::Name(normalize_name(host).ok_or_else(|| format!("bad host {host:?}"))?)
            }
        };
        Ok(Self { scheme, host, port })
    }
}

/// The set of grants of one plugin. Empty means no HTTP at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpPolicy {
    grants: Vec<HttpGrant>,
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpDenial {
    /// The plugin has no HTTP grant at all.
    #[error("no HTTP is granted to this plugin")]
    NoGrants,
    /// No grant covers the destination.
    #[error("{0} is not covered by any HTTP grant")]
    NotGranted(String),
    /// The URL is malformed or tries to smuggle a host.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// An allowed name resolved to a special address.
    #[error(
        "{dest} resolved to {addr}, a {class} address; only a grant naming that address explicitly allows it"
    )]
    SpecialAddress {
        /// The destination as asked.
        dest: String,
        /// The address it resolved to.
        addr: IpAddr,
        /// What kind of special address it is.
        class: &'static str,
    },
}

impl HttpPolicy {
    /// Parses a list of grants.
    ///
    /// # Errors
    /// The first grant that does not parse.
    pub fn parse<S: AsRef<str>>(grants: &[S]) -> Result<Self, GrantError> {
        let grants = grants
            .iter()
            .map(|g| HttpGrant::parse(g.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Self { grants })
    }

    /// The grants, in the order written.
    #[must_use]
    pub fn grants(&self) -> &[HttpGrant] {
        &self.grants
    }

    /// Whether the plugin has no HTTP at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// Checks a destination before name resolution and returns the grant that covers it.
    ///
    /// # Errors
    /// Why it is refused.
    pub fn check(&self, dest: &Destination) -> Result<&HttpGrant, HttpDenial> {
        if self.grants.is_empty() {
            return Err(HttpDenial::NoGrants);
        }
        self.grants
            .iter()
            .find(|g| g.matches(dest))
            .ok_or_else(|| HttpDenial::NotGranted(dest.to_string()))
    }

    /// Checks an address the destination resolved to. An IP literal granted
    /// explicitly may be anything; a name may only lead to public addresses.
    ///
    /// # Errors
    /// Why the address is refused.
    pub fn check_resolved(&self, dest: &Destination, addr: IpAddr) -> Result<(), HttpDenial> {
        let addr = canonical_ip(addr);
        let Some(class) = special_class(addr) else {
            return Ok(());
        };
        // A special address is reached only through a grant that names it
        // (or its network) with the destination's scheme and port.
        let named = self.grants.iter().any(|g| {
            g.scheme == dest.scheme
                && matches!(g.port, PortPattern::Any)
                    | matches!(g.port, PortPattern::Port(p) if p == dest.port)
                && match g.host {
                    HostPattern::Ip(ip) => ip == addr,
                    HostPattern::Network(net, prefix) => in_network(addr, net, prefix),
                    _ => false,
                }
        });
        if named {
            return Ok(());
        }
        Err(HttpDenial::SpecialAddress {
            dest: dest.to_string(),
            addr,
            class,
        })
    }
}

/// Whether `addr` lies in `net/prefix` (IPv4 and IPv6 never mix).
fn in_network(addr: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (canonical_ip(addr), canonical_ip(net)) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Splits `host[:port]`, handling bracketed IPv6.
fn split_host_port(s: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed [ in host")?;
        return match after {
            "" => Ok((host, None)),
            _ => after
                .strip_prefix(':')
                .map(|p| (host, Some(p)))
                .ok_or_else(|| "garbage after ]".to_string()),
        };
    }
    match s.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Err("IPv6 addresses must be in brackets".into()),
        Some((h, p)) => Ok((h, Some(p))),
        None => Ok((s, None)),
    }
}

fn normalize_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    ok.then_some(name)
}

/// A name whose last label is all digits (or hex) is an IP spelling in the
/// eyes of some resolvers; never treat it as a DNS name.
fn looks_numeric(name: &str) -> bool {
    let last = name.trim_end_matches('.').rsplit('.').next().unwrap_or("");
    !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || (last.len() >= 2 && last[..2].eq_ignore_ascii_case("0x")))
}

/// Parses an IP literal in any spelling resolvers accept: dotted decimal,
/// fewer parts (`127.1`), one number (`2130706433`), octal (`0177.0.0.1`),
/// hex (`0x7f.0.0.1`), and IPv6 (optionally bracketed), then canonicalizes
/// IPv4-mapped and IPv4-compatible IPv6 to IPv4.
#[must_use]
pub fn parse_ip_literal(s: &str) -> Option<IpAddr> {
    let s = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(s);
    if s.contains(':') {
        // Zone ids (%eth0) are not accepted.
        return s
            .parse::<Ipv6Addr>()
            .ok()
            .map(|ip| canonical_ip(IpAddr::V6(ip)));
    }
    parse_ipv4_loose(s.strip_suffix('.').unwrap_or(s)).map(IpAddr::V4)
}

fn parse_ipv4_loose(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let nums: Vec<u64> = parts
        .iter()
        .map(|p| parse_ipv4_part(p))
        .collect::<Option<_>>()?;
    let (last, head) = nums.split_last()?;
    if head.iter().any(|n| *n > 255) {
        return None;
    }
    let last_bits = 8 * (4 - head.len() as u32);
    if *last >= 1u64 << last_bits {
        return None;
    }
    let mut value: u64 = 0;
    for (i, n) in head.iter().enumerate() {
        value |= n << (24 - 8 * i as u32);
    }
    value |= last;
    Some(Ipv4Addr::from(u32::try_from(value).ok()?))
}

fn parse_ipv4_part(p: &str) -> Option<u64> {
    if p.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
        (h, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() {
        return None;
    }
    if digits.len() > 12 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Maps IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`)
/// IPv6 addresses to the IPv4 address they carry.
#[must_use]
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let seg = v6.segments();
            if seg[..6].iter().all(|s| *s == 0) && !(seg[6] == 0 && seg[7] <= 1) {
                let o = v6.octets();
                return IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            ip
        }
        IpAddr::V4(_) => ip,
    }
}

/// What kind of non-public address this is, if any.
#[must_use]
pub fn special_class(ip: IpAddr) -> Option<&'static str> {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_unspecified() || o[0] == 0 {
                Some("unspecified")
            } else if v4.is_link_local() {
                Some("link-local (cloud metadata)")
            } else if v4.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
                Some("private")
            } else if v4.is_multicast() || v4.is_broadcast() || o[0] >= 240 {
                Some("multicast or reserved")
            } else if v4.is_documentation() || (o[0] == 198 && (o[1] & 0xfe) == 18) {
                Some("reserved")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if (seg[0] & 0xffc0) == 0xfe80 {
                Some("link-local (cloud metadata)")
            } else if (seg[0] & 0xfe00) == 0xfc00 {
                Some("private")
            } else if v6.is_multicast() {
                Some("multicast or reserved")
            } else if seg[0] == 0x64 && seg[1] == 0xff9b {
                Some("NAT64")
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(url: &str) -> Destination {
        let (scheme, auth) = url.split_once("://").unwrap();
        Destination::from_parts(scheme, auth).unwrap()
    }

    #[test]
    fn grant_parsing_table() {
        let ok: &[(&str, Scheme, HostPattern, PortPattern)] = &[
            (
                "https://api.hetzner.cloud",
                Scheme::Https,
                HostPattern::Name("api.hetzner.cloud".into()),
                PortPattern::Port(443),
            ),
            (
                "http://Example.COM.",
                Scheme::Http,
                HostPattern::Name("example.com".into()),
                PortPattern::Port(80),
            ),
            (
                "https://*.amazonaws.com",
                Scheme::Https,
                HostPattern::Subdomains("amazonaws.com".into()),
                PortPattern::Port(443),
            ),
            (
                "http://127.0.0.1:*",
                Scheme::Http,
                HostPattern::Ip("127.0.0.1".parse().unwrap()),
                PortPattern::Any,
            ),
            (
                "http://[::1]:8080",
                Scheme::Http,
                HostPattern::Ip("::1".parse().unwrap()),
                PortPattern::Port(8080),
            ),
            (
                "https://example.com:8443/",
                Scheme::Https,
                HostPattern::Name("example.com".into()),
                PortPattern::Port(8443),
            ),
        ];
        for (src, scheme, host, port) in ok {
            let g = HttpGrant::parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            assert_eq!((&g.scheme, &g.host, &g.port), (scheme, host, port), "{src}");
        }
        let bad = [
            "api.hetzner.cloud",
            "ftp://example.com",
            "https://",
            "https://example.com/path",
            "https://user@example.com",
            "https://ex*ample.com",
            "https://*",
            "https://example.com:0",
            "https://example.com:70000",
            "https://example.com:x",
            "http://::1:80",
            "http://[::1",
            "https://-bad-.com",
            "https://1.2.3.999",
            "http://10.0.0.0/8",
            "http://[10.0.0.0/33]:*",
            "http://[10.0.0.0/x]",
        ];
        for src in bad {
            let err = HttpGrant::parse(src).expect_err(src);
            assert!(
                err.to_string().contains("expected scheme://host[:port]"),
                "{err}"
            );
        }
    }

    #[test]
    fn matching_table() {
        let policy = HttpPolicy::parse(&[
            "https://api.hetzner.cloud",
            "https://*.amazonaws.com",
            "http://127.0.0.1:*",
            "http://[::1]:9000",
        ])
        .unwrap();
        let allowed = [
            "https://api.hetzner.cloud",
            "https://API.Hetzner.Cloud:443",
            "https://api.hetzner.cloud.",
            "https://ec2.us-east-1.amazonaws.com",
            "https://a.b.amazonaws.com",
            "http://127.0.0.1:1234",
            "http://127.0.0.1",
            "http://[::1]:9000",
            "http://[::ffff:127.0.0.1]:5",
            "http://2130706433:80",
            "http://0x7f.1:80",
            "http://0177.0.0.1:80",
            "http://127.1:80",
        ];
        for url in allowed {
            assert!(policy.check(&dest(url)).is_ok(), "{url} should be allowed");
        }
        let denied = [
            "http://api.hetzner.cloud",
            "https://api.hetzner.cloud:8443",
            "https://evil.hetzner.cloud",
            "https://amazonaws.com",
            "https://evilamazonaws.com",
            "https://localhost:443",
            "http://127.0.0.2:80",
            "http://[::1]:9001",
            "https://169.254.169.254",
        ];
        for url in denied {
            assert!(
                matches!(policy.check(&dest(url)), Err(HttpDenial::NotGranted(_))),
                "{url} should be denied"
            );
        }
        assert_eq!(
            HttpPolicy::default().check(&dest("https://example.com")),
            Err(HttpDenial::NoGrants)
        );
    }

    #[test]
    fn authority_tricks_are_refused() {
        for auth in ["user@evil.com", "api.hetzner.cloud@127.0.0.1", "a:b@host"] {
            assert!(Destination::from_parts("https", auth).is_err(), "{auth}");
        }
        assert!(Destination::from_parts("file", "x").is_err());
        assert!(Destination::from_parts("http", "1.2.3.4.5").is_err());
        assert!(Destination::from_parts("http", "evil.0x10").is_err());
    }

    #[test]
    fn ip_spellings_normalize() {
        let table = [
            ("127.0.0.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("0177.0.0.01", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("169.254.43518", "169.254.169.254"),
            ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
            ("[::ffff:169.254.169.254]", "169.254.169.254"),
            ("::ffff:a9fe:a9fe", "169.254.169.254"),
            ("::127.0.0.1", "127.0.0.1"),
            ("::1", "::1"),
        ];
        for (spelling, want) in table {
            assert_eq!(
                parse_ip_literal(spelling),
                Some(want.parse().unwrap()),
                "{spelling}"
            );
        }
        for bad in [
            "256.0.0.1",
            "1.2.3.4.5",
            "0x",
            "08.0.0.1",
            "fe80::1%eth0",
            "4294967296",
        ] {
            assert_eq!(parse_ip_literal(bad), None, "{bad}");
        }
    }

    #[test]
    fn resolved_addresses_of_names_must_be_public() {
        let policy = HttpPolicy::parse(&["https://api.example.com", "http://127.0.0.1:*"]).unwrap();
        let by_name = dest("https://api.example.com");
        for addr in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            let ip: IpAddr = addr.parse().unwrap();
            assert!(
                matches!(
                    policy.check_resolved(&by_name, ip),
                    Err(HttpDenial::SpecialAddress { .. })
                ),
                "{addr} must be refused for a name"
            );
        }
        for addr in ["93.184.216.34", "2606:2800:220:1::1"] {
            policy
                .check_resolved(&by_name, addr.parse().unwrap())
                .unwrap();
        }
        let literal = dest("http://127.0.0.1:8080");
        policy
            .check_resolved(&literal, "127.0.0.1".parse().unwrap())
            .unwrap();

        // A network grant lets names resolve into it, on its scheme and port only.
        let policy =
            HttpPolicy::parse(&["https://internal.corp", "https://[10.0.0.0/8]:443"]).unwrap();
        let internal = dest("https://internal.corp");
        policy
            .check_resolved(&internal, "10.1.2.3".parse().unwrap())
            .unwrap();
        assert!(
            policy
                .check_resolved(&internal, "192.168.1.1".parse().unwrap())
                .is_err()
        );
        assert!(
            policy
                .check_resolved(&internal, "169.254.169.254".parse().unwrap())
                .is_err()
        );
        assert!(policy.check(&dest("https://10.200.0.1")).is_ok());
        assert!(policy.check(&dest("https://11.0.0.1")).is_err());
        let other_port = dest("https://internal.corp:8443");
        assert!(
            policy
                .check_resolved(&other_port, "10.1.2.3".parse().unwrap())
                .is_err()
        );
    }
}
