//! The write timeout of accepted connections (docs/limits.md "HTTP", `--http-write-timeout`):
//! a write to a client that makes no progress for the timeout — its client reads nothing, so
//! the socket's buffers are full — fails with `TimedOut`, and the connection ends. Its answer's
//! body is then dropped, and with it the memory it held and its place under
//! `--max-http-requests` (see `http_limits`). A connection that is idle (nothing to write) is
//! never timed out here; a WebSocket's writes go through the same socket and stall the same way.
//!
//! Owns the listener adapter and the socket wrapper; knows nothing of HTTP, rooms or stores.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A listener whose connections time out their stalled writes.
#[derive(Debug)]
pub struct WriteTimeoutListener<L> {
    listener: L,
    timeout: Option<Duration>,
}

impl<L> WriteTimeoutListener<L> {
    /// `listener`'s connections, each with `timeout` on a stalled write (`None`: none).
    pub fn new(listener: L, timeout: Option<Duration>) -> Self {
        WriteTimeoutListener { listener, timeout }
    }
}

impl<L> Listener for WriteTimeoutListener<L>
where
    L: Listener,
    L::Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Io = WriteTimeout<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = self.listener.accept().await;
        (WriteTimeout::new(io, self.timeout), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// A socket whose writes fail with `TimedOut` once one has been pending for the timeout.
#[derive(Debug)]
pub struct WriteTimeout<T> {
    io: T,
    timeout: Option<Duration>,
    /// Set when a write first returned pending; cleared by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteTimeout<T> {
    /// `io` with `timeout` on a stalled write (`None`: none).
    pub fn new(io: T, timeout: Option<Duration>) -> Self {
        WriteTimeout {
            io,
            timeout,
            stalled: None,
        }
    }

    /// What a write that returned `polled` answers: progress clears the stall; a pending write
    /// starts (or keeps) the stall's clock, and fails once the clock has run out.
    fn settle<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        match polled {
            Poll::Ready(ready) => {
                self.stalled = None;
                Poll::Ready(ready)
            }
            Poll::Pending => {
                let Some(timeout) = self.timeout else {
                    return Poll::Pending;
                };
                let clock = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match clock.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "a write made no progress for {} s (--http-write-timeout)",
                            timeout.as_secs_f64()
                        ),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.settle(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.settle(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.settle(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_shutdown(cx);
        self.settle(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_stalled_write_fails_at_the_timeout_and_progress_resets_the_clock() {
        // A pipe of 16 bytes whose reader reads nothing: the second write stalls.
        let (client, _unread) = tokio::io::duplex(16);
        let mut io = WriteTimeout::new(client, Some(Duration::from_secs(2)));
        io.write_all(&[0; 16]).await.unwrap();
        let started = tokio::time::Instant::now();
        let error = io.write_all(&[0; 16]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(2));

        // A reader that takes a byte every second keeps a 2 s clock from running out.
        let (client, mut reader) = tokio::io::duplex(4);
        let mut io = WriteTimeout::new(client, Some(Duration::from_secs(2)));
        let drain = tokio::spawn(async move {
            let mut byte = [0u8; 1];
            for _ in 0..40 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                reader.read_exact(&mut byte).await.unwrap();
            }
        });
        io.write_all(&[0; 40]).await.unwrap();
        drain.await.unwrap();
    }
}
