//! Images through the controller: an admin uploads a tarball; an enrolled node fetches it over
//! mutual TLS with its node certificate; without a certificate or a token, with a student's
//! token, or with the certificate of a removed (revoked) node, the tarball is refused.

use cohort_e2e::controller::ControllerProcess;
use cohort_e2e::fleet::{init, Api, EnrolledAgent};
use cohort_e2e::{PortRange, TestDb, TestLxd};
use cohort_proto::api::images::Image;
use cohort_proto::api::users::ApiTokenIssued;
use reqwest::Method as M;
use serde_json::json;

/// A minimal LXD unified tarball (metadata and an almost empty rootfs), unique to this test.
fn tiny_tarball(dir: &std::path::Path) -> Vec<u8> {
    let root = dir.join("image");
    std::fs::create_dir_all(root.join("rootfs/etc")).unwrap();
    std::fs::write(
        root.join("rootfs/etc/hostname"),
        format!("tiny-{}\n", std::process::id()),
    )
    .unwrap();
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    std::fs::write(
        root.join("metadata.yaml"),
        format!("architecture: x86_64\ncreation_date: {created}\nproperties:\n  description: tiny test image\n"),
    )
    .unwrap();
    let tarball = dir.join("tiny.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-czf")
        .arg(&tarball)
        .args(["metadata.yaml", "rootfs"])
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(tarball).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_fetch_tarballs_over_mutual_tls_until_revoked() {
    let db = TestDb::new();
    let lxd = TestLxd::new();
    let ports = PortRange::claim();
    let state = tempfile::tempdir().unwrap();
    let admin = init(db.url(), state.path());
    let _controller = ControllerProcess::start(db.url(), state.path(), ports.port(0), &[]);
    let api = Api::new(state.path(), ports.port(0));

    let work = tempfile::tempdir().unwrap();
    let resp = api
        .client
        .post(format!(
            "{}/images?alias=tiny-{}&description=tiny",
            api.base,
            std::process::id()
        ))
        .bearer_auth(&admin)
        .body(tiny_tarball(work.path()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let image: Image = resp.json().await.unwrap();
    assert!(image.nodes.is_empty());

    // Neither anonymous callers nor students get the tarball.
    let anonymous = api
        .client
        .get(format!("{}/images/{}/tarball", api.base, image.fingerprint))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    let addr = format!("127.0.0.1:{}", ports.port(1)).parse().unwrap();
    let agent = EnrolledAgent::enroll(
        &api,
        &admin,
        "node-img",
        &lxd,
        addr,
        (ports.port(2), ports.port(9)),
    )
    .await;

    // The node's own certificate and key, as the agent holds them after `join`.
    let read = |f: &str| std::fs::read(agent.state.path().join(f)).unwrap();
    let mut identity = read("agent.crt");
    identity.extend(read("agent.key"));
    let ca = std::fs::read(state.path().join("ca.crt")).unwrap();
    let node_client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .identity(reqwest::Identity::from_pem(&identity).unwrap())
        .build()
        .unwrap();
    let url = format!("{}/images/{}/tarball", api.base, image.fingerprint);
    let resp = node_client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.bytes().await.unwrap();
    use sha2::Digest;
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&bytes)),
        image.fingerprint,
        "the bytes are the image"
    );

    let student: serde_json::Value = api
        .call(
            &admin,
            M::POST,
            "/users",
            Some(json!({"username": "sam", "role": "student"})),
        )
        .await;
    assert_eq!(student["role"], "student");
    let sam: ApiTokenIssued = api.call(&admin, M::POST, "/users/sam/tokens", None).await;
    let resp = api
        .client
        .get(&url)
        .bearer_auth(&sam.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403, "a student fetched a tarball");

    // Removing the node revokes its certificate: it can no longer fetch.
    let resp = api
        .client
        .delete(format!("{}/nodes/node-img", api.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let fresh = node_client.get(&url).send().await.unwrap();
    assert_eq!(
        fresh.status(),
        403,
        "a revoked node certificate fetched a tarball"
    );

    let resp = api
        .client
        .delete(format!("{}/images/{}", api.base, image.fingerprint))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let gone = api
        .client
        .get(&url)
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}

/// Issue 25: any bytes were catalogued as an image (13 bytes of text were). Now an upload that
/// is not an LXD unified tarball is a 400 naming the body, and nothing is stored: no catalog row,
/// no file in the image store. A real unified tarball still imports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_is_not_an_image_is_refused_and_nothing_is_stored() {
    let db = TestDb::new();
    let ports = PortRange::claim();
    let state = tempfile::tempdir().unwrap();
    let admin = init(db.url(), state.path());
    let _controller = ControllerProcess::start(db.url(), state.path(), ports.port(0), &[]);
    let api = Api::new(state.path(), ports.port(0));
    let store = state.path().join("images");
    let stored = || -> Vec<String> {
        std::fs::read_dir(&store)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let work = tempfile::tempdir().unwrap();
    let metadata_only = {
        let dir = work.path().join("meta");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("metadata.yaml"), "architecture: x86_64\n").unwrap();
        let out = std::process::Command::new("tar")
            .arg("-C")
            .arg(&dir)
            .args(["-cf", "-", "metadata.yaml"])
            .output()
            .unwrap();
        out.stdout
    };
    for (alias, body, why) in [
        ("junk", b"not an image\n".to_vec(), "not a tar archive"),
        ("meta", metadata_only, "no rootfs/"),
    ] {
        let resp = api
            .client
            .post(format!("{}/images?alias={alias}", api.base))
            .bearer_auth(&admin)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{alias}");
        let error: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(error["error"]["field"], "body", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{alias}: {message}");
    }
    let images: Vec<Image> = api.call(&admin, M::GET, "/images", None).await;
    assert!(images.is_empty(), "catalogued: {images:?}");
    assert!(stored().is_empty(), "stored: {:?}", stored());

    let resp = api
        .client
        .post(format!("{}/images?alias=tiny", api.base))
        .bearer_auth(&admin)
        .body(tiny_tarball(work.path()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        201,
        "{}",
        resp.text().await.unwrap_or_default()
    );
    assert_eq!(stored().iter().filter(|f| f.ends_with(".tar")).count(), 1);
}
