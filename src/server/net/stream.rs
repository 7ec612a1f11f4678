//! A connection's byte stream, in the clear or under TLS, for every
//! listener (native, Kafka) and for the broker's own connections to other
//! nodes. The TLS handshake is bounded by `tls_handshake_timeout`.

use crate::security::tls::{self, ServerTls};
use crate::server::core::Core;
use futures_lite::io::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// A TCP stream, or a TLS session over one.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<futures_rustls::TlsStream<TcpStream>>),
}

impl Stream {
    /// The server side of an accepted connection: a TLS handshake first when
    /// the broker serves TLS (a client that does not speak it, or whose
    /// certificate does not verify, fails here).
    pub async fn accept(tcp: TcpStream, tls: Option<&ServerTls>, timeout: Duration) -> io::Result<Stream> {
        tcp.set_nodelay(true)?;
        let Some(tls) = tls else { return Ok(Stream::Plain(tcp)) };
        let acceptor = futures_rustls::TlsAcceptor::from(tls.current());
        let session = bounded(timeout, acceptor.accept(tcp)).await?;
        Ok(Stream::Tls(Box::new(session.into())))
    }

    /// `accept` with the shard's TLS settings; a failed handshake is logged
    /// (naming the `listener`) and the connection dropped.
    pub async fn accept_on(core: &Core, tcp: TcpStream, listener: &'static str) -> Option<Stream> {
        let config = core.config();
        match Stream::accept(tcp, config.tls.as_ref(), config.tls_handshake_timeout).await {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::info!(shard = core.id(), listener, %error, "a connection failed its TLS handshake");
                None
            }
        }
    }

    /// The client side of a connection this broker opens to `addr` (another node).
    pub async fn connect(tcp: TcpStream, addr: &str, tls: Option<&ServerTls>, timeout: Duration) -> io::Result<Stream> {
        tcp.set_nodelay(true)?;
        let Some(tls) = tls else { return Ok(Stream::Plain(tcp)) };
        let name = tls::server_name(addr).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let connector = futures_rustls::TlsConnector::from(tls.client());
        let session = bounded(timeout, connector.connect(name, tcp)).await?;
        Ok(Stream::Tls(Box::new(session.into())))
    }
}

impl Stream {
    /// The user a verified client certificate names (its subject's CN), if
    /// the client presented one.
    pub fn certificate_user(&self) -> Option<String> {
        let Stream::Tls(session) = self else { return None };
        let der = session.get_ref().1.peer_certificates()?.first()?;
        tls::certificate_user(der.as_ref())
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }
}

async fn bounded<T>(timeout: Duration, handshake: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
    let over = || io::Error::new(io::ErrorKind::TimedOut, format!("no TLS handshake within {timeout:?}"));
    futures_lite::future::or(handshake, async {
        glommio::timer::sleep(timeout).await;
        Err(over())
    })
    .await
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}
