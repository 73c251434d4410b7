//! The connections `serve`'s gRPC listeners hand to tonic, bounded: at most
//! `cap` connections open at once (one over it is closed at accept), and a
//! connection that has not finished its TLS handshake and sent the HTTP/2
//! client preface within `setup` is closed. Without these, connections that
//! send three bytes of a TLS record (or nothing) and stall stay open for
//! ever, and a few thousand of them use up the process's file descriptors,
//! which the plugins' HTTP and the journal need as well.
//!
//! tonic's own TLS bounds the handshake but not what follows it nor how many
//! connections are open, so the listener accepts TCP here, does the
//! handshake with tokio-rustls under a timeout, and hands the streams to
//! `serve_with_incoming_shutdown`. Once the preface is in, HTTP/2 keepalive
//! pings (`KEEPALIVE`, set on the servers) close a peer that went away.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Sleep;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How long a connection has to finish its TLS handshake, and then again to
/// send the HTTP/2 client preface.
pub(super) const SETUP: Duration = Duration::from_secs(10);

/// HTTP/2 keepalive: a ping after this long without frames, and the
/// connection closed if the ping is not answered within as long again.
pub(super) const KEEPALIVE: Duration = Duration::from_secs(30);

/// The HTTP/2 client preface's length (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`).
const PREFACE_LEN: usize = 24;

/// One accepted connection, TLS or not, holding its place under the cap.
pub(super) struct Conn {
    io: Io,
    info: TcpConnectInfo,
    /// Until the preface has been read: when the connection is given up.
    preface: Option<(usize, Pin<Box<Sleep>>)>,
    _permit: OwnedSemaphorePermit,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// The connections of `listener`, at most `cap` open at once, each given
/// `setup` for its handshake (with `tls`) and again for its preface.
pub(super) fn incoming(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    cap: usize,
    setup: Duration,
    what: &'static str,
) -> impl Stream<Item = io::Result<Conn>> + Send + 'static {
    let (tx, rx) = mpsc::channel::<Conn>(64);
    tokio::spawn(accept_loop(listener, tls, cap, setup, what, tx));
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|conn| (Ok(conn), rx))
    })
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    cap: usize,
    setup: Duration,
    what: &'static str,
    tx: mpsc::Sender<Conn>,
) {
    let slots = Arc::new(Semaphore::new(cap));
    let mut last_warned: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            () = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors, or the peer gone before accept: wait a
                // little rather than spin.
                tracing::warn!("{what} listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            if last_warned.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                tracing::warn!(
                    "{what} listener: {cap} connections already open; closing new ones until some end"
                );
                last_warned = Some(Instant::now());
            }
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let info = tcp.connect_info();
        let tls = tls.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let io = match tls {
                None => Io::Plain(tcp),
                Some(acceptor) => match tokio::time::timeout(setup, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => Io::Tls(Box::new(stream)),
                    Ok(Err(e)) => {
                        tracing::debug!("{what} listener: TLS handshake failed: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(
                            "{what} listener: no TLS handshake within {setup:?}; closed"
                        );
                        return;
                    }
                },
            };
            let conn = Conn {
                io,
                info,
                preface: Some((0, Box::pin(tokio::time::sleep(setup)))),
                _permit: permit,
            };
            let _ = tx.send(conn).await;
        });
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some((_, deadline)) = &mut this.preface
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no HTTP/2 client preface in time",
            )));
        }
        let before = buf.filled().len();
        match &mut this.io {
            Io::Plain(s) => ready!(Pin::new(s).poll_read(cx, buf))?,
            Io::Tls(s) => ready!(Pin::new(s.as_mut()).poll_read(cx, buf))?,
        }
        if let Some((seen, _)) = &mut this.preface {
            *seen += buf.filled().len() - before;
            if *seen >= PREFACE_LEN {
                this.preface = None;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
