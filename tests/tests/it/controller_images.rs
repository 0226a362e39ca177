//! Images through the controller: an admin uploads a tarball; an enrolled node fetches it over
//! mutual TLS with its node certificate; without a certificate or a token, with a student's
//! token, or with the certificate of a removed (revoked) node, the tarball is refused.

use cohort_e2e::bodies::{new_user, to_json, Role};
use cohort_e2e::cluster::Cluster;
use cohort_proto::api::images::Image;
use cohort_proto::api::users::ApiTokenIssued;
use reqwest::Method as M;

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
    let mut cluster = Cluster::start(0).await;
    let admin = cluster.admin_token.clone();

    let work = tempfile::tempdir().unwrap();
    let alias = format!("tiny-{}", std::process::id());
    let resp = cluster
        .request(
            M::POST,
            &format!("/images?alias={alias}&description=tiny"),
            &admin,
        )
        .body(tiny_tarball(work.path()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let image: Image = resp.json().await.unwrap();
    assert!(image.nodes.is_empty());

    // Neither anonymous callers nor students get the tarball.
    let tarball = format!("/images/{}/tarball", image.fingerprint);
    let anonymous = cluster.anonymous(M::GET, &tarball).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);

    let agent_state = cluster.add_node("node-img").await.state_dir.clone();

    // The node's own certificate and key, as the agent holds them after `join`.
    let read = |f: &str| std::fs::read(agent_state.join(f)).unwrap();
    let mut identity = read("agent.crt");
    identity.extend(read("agent.key"));
    let ca = std::fs::read(cluster.controller_dir().join("ca.crt")).unwrap();
    let node_client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .identity(reqwest::Identity::from_pem(&identity).unwrap())
        .build()
        .unwrap();
    let url = cluster.url(&tarball);
    let resp = node_client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.bytes().await.unwrap();
    use sha2::Digest;
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&bytes)),
        image.fingerprint,
        "the bytes are the image"
    );

    let student: serde_json::Value = cluster
        .call(
            &admin,
            M::POST,
            "/users",
            Some(to_json(&new_user("sam", Role::Student))),
        )
        .await;
    assert_eq!(student["role"], "student");
    let sam: ApiTokenIssued = cluster
        .call(&admin, M::POST, "/users/sam/tokens", None)
        .await;
    let resp = cluster
        .request(M::GET, &tarball, &sam.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403, "a student fetched a tarball");

    // Removing the node revokes its certificate: it can no longer fetch.
    let resp = cluster
        .request(M::DELETE, "/nodes/node-img", &admin)
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

    let resp = cluster
        .request(M::DELETE, &format!("/images/{}", image.fingerprint), &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let gone = cluster
        .request(M::GET, &tarball, &admin)
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
    let cluster = Cluster::start(0).await;
    let admin = &cluster.admin_token;
    let store = cluster.controller_dir().join("images");
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
        let resp = cluster
            .request(M::POST, &format!("/images?alias={alias}"), admin)
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
    let images: Vec<Image> = cluster.call(admin, M::GET, "/images", None).await;
    assert!(images.is_empty(), "catalogued: {images:?}");
    assert!(stored().is_empty(), "stored: {:?}", stored());

    let resp = cluster
        .request(M::POST, "/images?alias=tiny", admin)
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
