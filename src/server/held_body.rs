//! Response bodies that hold something (a history replay permit) until they are sent: the
//! guard goes once the connection has taken the last chunk, or when the body is dropped (the
//! client left, or `--http-write-timeout` dropped it). Large answers are handed over in chunks
//! of [`CHUNK`] bytes, so a slow reader holds its guard, not more of the server's memory.
//!
//! Owns only the body plumbing; never what is in it, nor what the guard is.

use std::convert::Infallible;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;

/// Bytes per chunk of a large answer.
pub const CHUNK: usize = 64 * 1024;

/// What a producer of a streamed answer hands over: a chunk, and with the last one the guard
/// that must stay until the connection has taken it.
pub type Piece<G> = (Bytes, Option<G>);

/// `bytes` in chunks of [`CHUNK`], `guard` held until the last one is taken.
pub fn sliced<G: Send + 'static>(bytes: Bytes, guard: G) -> Body {
    let chunks =
        futures_util::stream::unfold((bytes, Some(guard)), |(mut rest, guard)| async move {
            if rest.is_empty() {
                drop(guard);
                return None;
            }
            let chunk = rest.split_to(rest.len().min(CHUNK));
            Some((Ok::<_, Infallible>(chunk), (rest, guard)))
        });
    Body::from_stream(chunks)
}

/// `body` as it is, `guard` held until it ends or is dropped.
pub fn guarded<G: Send + 'static>(body: Body, guard: G) -> Body {
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &guard;
        chunk
    });
    Body::from_stream(stream)
}

/// The chunks a producer sends on `rx`, in order; a guard sent with a chunk is held until the
/// channel ends (the producer is done, or gone) and the connection has taken what came before.
pub fn channel<G: Send + 'static>(rx: mpsc::Receiver<Piece<G>>) -> Body {
    let chunks = futures_util::stream::unfold((rx, None::<G>), |(mut rx, mut held)| async move {
        match rx.recv().await {
            Some((chunk, guard)) => {
                if guard.is_some() {
                    held = guard;
                }
                Some((Ok::<_, Infallible>(chunk), (rx, held)))
            }
            None => {
                drop(held);
                None
            }
        }
    });
    Body::from_stream(chunks)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Sets its flag when dropped.
    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn flag() -> (Flag, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        (Flag(Arc::clone(&dropped)), dropped)
    }

    #[tokio::test]
    async fn a_sliced_body_holds_its_guard_until_its_last_chunk_is_taken() {
        let (guard, dropped) = flag();
        let bytes = Bytes::from(vec![7u8; CHUNK * 2 + 5]);
        let mut stream = sliced(bytes, guard).into_data_stream();
        let mut got = Vec::new();
        for _ in 0..3 {
            let chunk = stream.next().await.expect("a chunk").expect("no error");
            assert!(chunk.len() <= CHUNK);
            got.push(chunk.len());
            assert!(!dropped.load(Ordering::SeqCst), "dropped after {got:?}");
        }
        assert!(stream.next().await.is_none());
        assert!(dropped.load(Ordering::SeqCst));
        assert_eq!(got, vec![CHUNK, CHUNK, 5]);
    }

    #[tokio::test]
    async fn a_dropped_body_gives_its_guard_back() {
        let (guard, dropped) = flag();
        let mut stream = sliced(Bytes::from(vec![1u8; CHUNK * 3]), guard).into_data_stream();
        let _ = stream.next().await;
        drop(stream);
        assert!(dropped.load(Ordering::SeqCst));
        let (guard, dropped) = flag();
        let body = guarded(Body::from("abc"), guard);
        assert!(!dropped.load(Ordering::SeqCst));
        drop(body);
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_channel_body_holds_the_guard_sent_with_the_last_chunk_until_the_end() {
        let (tx, rx) = mpsc::channel::<Piece<Flag>>(2);
        let (guard, dropped) = flag();
        let mut stream = channel(rx).into_data_stream();
        tx.send((Bytes::from_static(b"ab"), None))
            .await
            .expect("send");
        tx.send((Bytes::from_static(b"c"), Some(guard)))
            .await
            .expect("send");
        drop(tx);
        assert_eq!(&stream.next().await.expect("a").expect("ok")[..], b"ab");
        assert_eq!(&stream.next().await.expect("c").expect("ok")[..], b"c");
        assert!(!dropped.load(Ordering::SeqCst));
        assert!(stream.next().await.is_none());
        assert!(dropped.load(Ordering::SeqCst));
    }
}
