//! Attack: bypass wasi-http with raw sockets to `[config] addr` (a loopback
//! `ip:port`): `std::net`, the raw `wasi:sockets` TCP and UDP bindings, and
//! name lookup. Every attempt must fail. Each outcome is a label.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};

use hostile_kit::prelude::*;
use wasip2::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};
use wasip2::sockets::{instance_network, ip_name_lookup, tcp_create_socket, udp_create_socket};

fn raw_tcp(addr: SocketAddr) -> String {
    let SocketAddr::V4(v4) = addr else {
        return "not ipv4".into();
    };
    let o = v4.ip().octets();
    let network = instance_network::instance_network();
    let socket = match tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4) {
        Ok(s) => s,
        Err(e) => return format!("create refused: {e:?}"),
    };
    let remote = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port: v4.port(),
        address: (o[0], o[1], o[2], o[3]),
    });
    if let Err(e) = socket.start_connect(&network, remote) {
        return format!("connect refused: {e:?}");
    }
    socket.subscribe().block();
    match socket.finish_connect() {
        Ok(_) => "connected".into(),
        Err(e) => format!("connect failed: {e:?}"),
    }
}

fn raw_udp(addr: SocketAddr) -> String {
    let SocketAddr::V4(_) = addr else {
        return "not ipv4".into();
    };
    let network = instance_network::instance_network();
    let socket = match udp_create_socket::create_udp_socket(IpAddressFamily::Ipv4) {
        Ok(s) => s,
        Err(e) => return format!("create refused: {e:?}"),
    };
    let local = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port: 0,
        address: (0, 0, 0, 0),
    });
    match socket.start_bind(&network, local) {
        Ok(()) => "bind started".into(),
        Err(e) => format!("bind refused: {e:?}"),
    }
}

fn lookup(name: &str) -> String {
    let network = instance_network::instance_network();
    match ip_name_lookup::resolve_addresses(&network, name) {
        Ok(stream) => {
            stream.subscribe().block();
            match stream.resolve_next_address() {
                Ok(Some(a)) => format!("resolved: {a:?}"),
                Ok(None) => "no address".into(),
                Err(e) => format!("resolve failed: {e:?}"),
            }
        }
        Err(e) => format!("lookup refused: {e:?}"),
    }
}

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let addr: SocketAddr = cfg("addr")?
            .parse()
            .map_err(|e| Error::InvalidConfig(format!("addr: {e}")))?;
        let mut labels = Labels::new();
        labels.insert(
            "std tcp".into(),
            match TcpStream::connect(addr) {
                Ok(mut s) => {
                    let _ = s.write_all(b"GET /raw HTTP/1.1\r\nhost: x\r\n\r\n");
                    "connected".into()
                }
                Err(e) => format!("error: {e}"),
            },
        );
        labels.insert(
            "std udp".into(),
            match UdpSocket::bind("0.0.0.0:0").and_then(|s| s.send_to(b"hello", addr)) {
                Ok(n) => format!("sent {n} bytes"),
                Err(e) => format!("error: {e}"),
            },
        );
        labels.insert("raw tcp".into(), raw_tcp(addr));
        labels.insert("raw udp".into(), raw_udp(addr));
        labels.insert("lookup localhost".into(), lookup("localhost"));
        labels.insert("lookup example.com".into(), lookup("example.com"));
        Ok(node(req, labels))
    }
);
