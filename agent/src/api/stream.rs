//! Bodies the agent streams to the controller instead of holding them: a file as LXD sends it,
//! and an exec's result as the JSON of `ExecResult` with its output base64-encoded chunk by chunk
//! on the way. Each fails past the caller's limit whatever length LXD declared, so no answer
//! grows beyond it.

use std::io;

use base64::Engine;
use bytes::Bytes;
use futures_util::{stream, Stream, StreamExt, TryStreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use hyper::body::Frame;

use crate::instances::{ExecStreams, Export, FileStream};
use crate::lxd::RawStream;

/// Every answer's body: whole (JSON, errors) or streamed.
pub type Body = UnsyncBoxBody<Bytes, io::Error>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn body_of(chunks: impl Stream<Item = io::Result<Bytes>> + Send + 'static) -> Body {
    StreamBody::new(chunks.map_ok(Frame::data)).boxed_unsync()
}

/// LXD's body as chunks of bytes, failing once more than `limit` bytes have come.
fn chunks(raw: Option<RawStream>, limit: u64) -> impl Stream<Item = io::Result<Bytes>> + Send {
    let frames = raw.map(|r| BodyStream::new(r.body));
    stream::iter(frames)
        .flatten()
        .try_filter_map(|frame| async move { Ok(frame.into_data().ok()) })
        .map_err(io::Error::other)
        .scan(0u64, move |seen, chunk| {
            let chunk = chunk.and_then(|c| {
                *seen += c.len() as u64;
                if *seen > limit {
                    Err(io::Error::other(format!(
                        "more than the limit of {limit} bytes"
                    )))
                } else {
                    Ok(c)
                }
            });
            std::future::ready(Some(chunk))
        })
}

/// `chunks` base64-encoded: whole groups of three bytes as they come, the rest at the end.
fn base64(
    chunks: impl Stream<Item = io::Result<Bytes>> + Send + 'static,
) -> impl Stream<Item = io::Result<Bytes>> + Send {
    let state = (Box::pin(chunks), Vec::new(), false);
    stream::unfold(state, |(mut chunks, mut rest, ended)| async move {
        let b64 = base64::engine::general_purpose::STANDARD;
        if ended {
            return None;
        }
        loop {
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    rest.extend_from_slice(&chunk);
                    let whole = rest.len() / 3 * 3;
                    if whole > 0 {
                        let encoded = b64.encode(&rest[..whole]);
                        rest.drain(..whole);
                        return Some((Ok(Bytes::from(encoded)), (chunks, rest, false)));
                    }
                }
                Some(Err(e)) => return Some((Err(e), (chunks, rest, true))),
                None => {
                    let encoded = b64.encode(&rest);
                    return Some((Ok(Bytes::from(encoded)), (chunks, Vec::new(), true)));
                }
            }
        }
    })
}

pub fn file(file: FileStream, limit: u64) -> Body {
    body_of(chunks(Some(file.body), limit))
}

/// A backup's tarball, whatever its size; the backup is deleted once the body is dropped.
pub fn backup(export: Export) -> Body {
    let Export { tarball, cleanup } = export;
    body_of(chunks(Some(tarball), u64::MAX).inspect(move |_| {
        let _keep = &cleanup;
    }))
}

/// `{"exit_code":N,"stdout_base64":"...","stderr_base64":"..."}`, written as the logs are read.
pub fn exec(out: ExecStreams, limit: u64) -> Body {
    let text = |s: String| stream::once(async move { Ok(Bytes::from(s)) });
    let json = text(format!(
        "{{\"exit_code\":{},\"stdout_base64\":\"",
        out.exit_code
    ))
    .chain(base64(chunks(out.stdout, limit)))
    .chain(text("\",\"stderr_base64\":\"".into()))
    .chain(base64(chunks(out.stderr, limit)))
    .chain(text("\"}".into()));
    body_of(json)
}

/// A home's archive as it is made (see `instances::home_archive`).
pub fn archive(chunks: crate::instances::ArchiveStream) -> Body {
    body_of(chunks)
}
