//! One exec websocket relayed between the client (`lxc exec`, pylxd) and the node: the client's
//! side is actix-ws, the node's a raw upgraded connection through the agent that carries LXD's
//! own websocket, framed here as its client. Frames pass as they are, pings and closes
//! included, so LXD's keep-alives and its end-of-stream closes reach the client unchanged.

use std::time::Duration;

use actix_http::ws::{Codec, Frame, Message};
use bytes::BytesMut;
use futures_util::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt, WriteHalf};
use tokio_util::codec::{Encoder, FramedRead};

use crate::agent_client::AgentSocket;

/// Largest frame either side may send (LXD's output chunks and lxc's stdin reads are far less).
const MAX_FRAME: usize = 1 << 20;
/// How long the node's close is awaited once the client closed.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Relays until either side closes or fails.
pub async fn relay(
    mut client: actix_ws::Session,
    incoming: actix_ws::MessageStream,
    node: AgentSocket,
) {
    let mut incoming = incoming.max_frame_size(MAX_FRAME);
    let codec = Codec::new().client_mode().max_size(MAX_FRAME);
    let (reader, writer) = tokio::io::split(node);
    let mut from_node = FramedRead::new(reader, codec.clone());
    let mut to_node = NodeWriter { writer, codec };
    // Set once the client closed: the node's close is awaited until then.
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            message = incoming.next(), if deadline.is_none() => {
                let message = match message {
                    Some(Ok(m)) => m,
                    // The client went away without a close: tell the node.
                    Some(Err(_)) | None => Message::Close(None),
                };
                if let Message::Close(_) = message {
                    deadline = Some(tokio::time::Instant::now() + CLOSE_GRACE);
                }
                if let Message::Nop = message {
                    continue;
                }
                if to_node.send(message).await.is_err() {
                    break;
                }
            }
            frame = from_node.next() => {
                let sent = match frame {
                    Some(Ok(Frame::Text(bytes))) => match String::from_utf8(bytes.to_vec()) {
                        Ok(text) => client.text(text).await,
                        Err(_) => break,
                    },
                    Some(Ok(Frame::Binary(bytes))) => client.binary(bytes).await,
                    Some(Ok(Frame::Continuation(item))) => client.continuation(item).await,
                    Some(Ok(Frame::Ping(bytes))) => client.ping(&bytes).await,
                    Some(Ok(Frame::Pong(bytes))) => client.pong(&bytes).await,
                    Some(Ok(Frame::Close(reason))) => {
                        if deadline.is_none() {
                            // Answered for the client, whose own answer then has nowhere to go.
                            let _ = to_node.send(Message::Close(reason.clone())).await;
                        }
                        let _ = client.close(reason).await;
                        return;
                    }
                    Some(Err(_)) | None => break,
                };
                if sent.is_err() {
                    let _ = to_node.send(Message::Close(None)).await;
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)),
                if deadline.is_some() => break,
        }
    }
    let _ = client.close(None).await;
}

/// The node's side of the relay, written as a websocket client writes (masked frames).
struct NodeWriter<W> {
    writer: WriteHalf<W>,
    codec: Codec,
}

impl<W: AsyncWrite> NodeWriter<W> {
    async fn send(&mut self, message: Message) -> std::io::Result<()> {
        let mut frame = BytesMut::new();
        self.codec
            .encode(message, &mut frame)
            .map_err(std::io::Error::other)?;
        self.writer.write_all(&frame).await?;
        self.writer.flush().await
    }
}
