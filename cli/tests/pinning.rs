//! Certificate pinning against a real TLS server on 127.0.0.1: the certificate seen at
//! `remote add` is the one accepted later, and a server with another certificate is refused.

mod common;

use cohort_cli::client::{fetch_certificate, Client};
use cohort_cli::config::Remote;
use cohort_cli::tls::fingerprint;
use cohort_proto::api::users::Me;

fn remote(url: &str, fingerprint: String) -> Remote {
    Remote {
        addr: url.to_string(),
        token: "t0ken".into(),
        fingerprint,
    }
}

#[tokio::test]
async fn fetched_certificate_is_the_servers() {
    let server = common::start();
    let der = fetch_certificate(&server.url).await.expect("fetch");
    assert_eq!(der, server.cert);
    assert_eq!(fingerprint(&der).len(), 64);
}

#[tokio::test]
async fn pinned_fingerprint_is_accepted() {
    let server = common::start();
    let client = Client::new(&remote(&server.url, fingerprint(&server.cert))).unwrap();
    let me: Me = client
        .get("/me")
        .await
        .expect("pinned certificate accepted");
    assert_eq!(me.user.username, "alice");
}

#[tokio::test]
async fn other_certificate_is_refused() {
    let pinned = common::start();
    let impostor = common::start();
    // The remote pins the first server's certificate but the address is the impostor's.
    let client = Client::new(&remote(&impostor.url, fingerprint(&pinned.cert))).unwrap();
    let err = client.get::<Me>("/me").await.expect_err("impostor refused");
    let text = format!("{err:#}");
    assert!(text.contains("fingerprint mismatch"), "{text}");
    assert!(text.contains(&fingerprint(&impostor.cert)), "{text}");
}

#[tokio::test]
async fn error_body_becomes_the_message_with_its_field() {
    let server = common::start();
    let client = Client::new(&remote(&server.url, fingerprint(&server.cert))).unwrap();
    let err = client.get::<Me>("/instances/nope").await.expect_err("404");
    assert_eq!(err.to_string(), "Instance not found (field: name)");
}
