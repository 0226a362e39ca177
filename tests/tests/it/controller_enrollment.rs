//! Enrollment through the real API and database: a join token works once, for its node name and
//! before it expires; whatever the CSR asks, the certificate is a client+server leaf for that
//! node, signed by the Cohort CA, never a CA, with only the names the admin gave (the node name
//! and the token's addresses); an agent URL on another name is refused.

use actix_web::{test, web, App};
use base64::Engine;
use cohort_controller::db::schema::join_tokens;
use cohort_controller::http::api;
use cohort_e2e::controller::TestController;
use cohort_proto::api::nodes::JoinTokenIssued;
use cohort_proto::enroll::{EnrollRequest, EnrollResponse, JoinToken};
use cohort_proto::ErrorBody;
use diesel::prelude::*;
use rcgen::{CertificateParams, CustomExtension, DnType, KeyPair, KeyUsagePurpose};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

/// A CSR that asks for everything it must not get: CA, another node's name, cert signing.
fn greedy_csr(key: &KeyPair) -> String {
    let mut p =
        CertificateParams::new(vec!["node-other".to_string(), "evil.example".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, "node-other");
    p.distinguished_name.push(
        DnType::OrganizationalUnitName,
        cohort_proto::ROLE_CONTROLLER,
    );
    // rcgen will not put is_ca in a CSR, so ask for basicConstraints CA:TRUE by hand.
    let mut ca =
        CustomExtension::from_oid_content(&[2, 5, 29, 19], vec![0x30, 0x03, 0x01, 0x01, 0xff]);
    ca.set_criticality(true);
    p.custom_extensions.push(ca);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    p.serialize_request(key).unwrap().pem().unwrap()
}

fn enroll_request(token: &JoinToken, node_name: &str, csr_pem: String) -> EnrollRequest {
    EnrollRequest {
        node_name: node_name.to_string(),
        secret: token.secret.clone(),
        csr_pem,
        agent_url: "https://127.0.0.2:9443".into(),
        ssh_host: "127.0.0.2".into(),
        ssh_port_first: 24000,
        ssh_port_last: 24063,
    }
}

#[actix_web::test]
async fn join_tokens_work_once_for_their_node_and_csrs_get_only_a_leaf() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (_, student) = t.user("alice", "student");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let issue_for = |token: &str, node: &str, addresses: &[&str]| {
        test::TestRequest::post()
            .uri("/api/v1/nodes/tokens")
            .insert_header(("Authorization", format!("Bearer {token}")))
            .set_json(serde_json::json!({"node_name": node, "addresses": addresses}))
            .to_request()
    };
    let issue = |token: &str, node: &str| issue_for(token, node, &[]);

    let denied = test::call_service(&app, issue(&student, "node-a")).await;
    assert_eq!(denied.status(), 403, "a student issued a join token");
    let bad = test::call_service(&app, issue_for(&admin, "node-a", &["not a name!"])).await;
    assert_eq!(bad.status(), 400);
    let body: ErrorBody = test::read_body_json(bad).await;
    assert_eq!(body.error.field.as_deref(), Some("addresses"));

    // The admin names where the agent is reached; the certificate gets those names only.
    let issued: JoinTokenIssued = test::call_and_read_body_json(
        &app,
        issue_for(&admin, "node-a", &["GPU-A.lab.example", "127.0.0.2"]),
    )
    .await;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&issued.token)
        .unwrap();
    let token: JoinToken = serde_json::from_slice(&raw).unwrap();
    assert_eq!(token.node_name, "node-a");
    assert_eq!(token.ca_fingerprint, t.ctl.pki.ca_fingerprint());
    assert!(
        (token.expires_at - chrono::Utc::now()).num_minutes() >= 59,
        "default lifetime is 1 h"
    );
    let stored: Vec<u8> = join_tokens::table
        .select(join_tokens::secret_hash)
        .first(&mut t.conn())
        .unwrap();
    assert_ne!(
        stored,
        token.secret.as_bytes(),
        "the secret is stored hashed"
    );

    let enroll = |req: &EnrollRequest| {
        test::TestRequest::post()
            .uri("/api/v1/enroll")
            .set_json(req)
            .to_request()
    };
    let key = KeyPair::generate().unwrap();
    let csr_pem = x509_parser::pem::parse_x509_pem(greedy_csr(&key).as_bytes())
        .unwrap()
        .1;
    let asked =
        x509_parser::certification_request::X509CertificationRequest::from_der(&csr_pem.contents)
            .unwrap()
            .1;
    let asks_ca = asked.requested_extensions().into_iter().flatten().any(
        |e| matches!(e, x509_parser::extensions::ParsedExtension::BasicConstraints(b) if b.ca),
    );
    assert!(asks_ca, "the test CSR must really ask to be a CA");

    // Wrong name: refused, and the token is not spent by it.
    let wrong = test::call_service(
        &app,
        enroll(&enroll_request(&token, "node-b", greedy_csr(&key))),
    )
    .await;
    assert_eq!(wrong.status(), 403);
    let body: ErrorBody = test::read_body_json(wrong).await;
    assert!(body.error.message.contains("node-a"), "{body:?}");

    // A garbage CSR is a 400 naming the field, and spends nothing.
    let bad = test::call_service(
        &app,
        enroll(&enroll_request(&token, "node-a", "not a csr".into())),
    )
    .await;
    assert_eq!(bad.status(), 400);
    let body: ErrorBody = test::read_body_json(bad).await;
    assert_eq!(body.error.field.as_deref(), Some("csr_pem"));

    // An agent URL on a name the admin did not give (say the controller's, or a neighbour's
    // address) is refused, naming the field, and spends nothing.
    for host in ["127.0.0.3", "localhost"] {
        let mut req = enroll_request(&token, "node-a", greedy_csr(&key));
        req.agent_url = format!("https://{host}:9443");
        let refused = test::call_service(&app, enroll(&req)).await;
        assert_eq!(refused.status(), 400, "{host}");
        let body: ErrorBody = test::read_body_json(refused).await;
        assert_eq!(body.error.field.as_deref(), Some("agent_url"), "{body:?}");
    }

    // The greedy CSR gets a plain leaf for node-a.
    let ok = test::call_service(
        &app,
        enroll(&enroll_request(&token, "node-a", greedy_csr(&key))),
    )
    .await;
    assert_eq!(ok.status(), 200);
    let got: EnrollResponse = test::read_body_json(ok).await;
    assert_eq!(got.ca_pem, t.ctl.pki.ca_pem());
    let (_, pem) = x509_parser::pem::parse_x509_pem(got.certificate_pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let ca = cert
        .basic_constraints()
        .unwrap()
        .map(|b| b.value.ca)
        .unwrap_or(false);
    assert!(!ca, "the node certificate is a CA");
    let ku = cert.key_usage().unwrap().expect("key usage").value;
    assert!(
        !ku.key_cert_sign(),
        "the node certificate may sign certificates"
    );
    let eku = cert
        .extended_key_usage()
        .unwrap()
        .expect("extended key usage")
        .value;
    assert!(eku.server_auth && eku.client_auth);
    let names: Vec<String> = cert
        .subject_alternative_name()
        .unwrap()
        .expect("SAN")
        .value
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(d) => d.to_string(),
            GeneralName::IPAddress(ip) => ip
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join("."),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        names,
        ["node-a", "gpu-a.lab.example", "127.0.0.2"],
        "SAN = node name + the admin's addresses only, never the CSR's names"
    );
    let ou: Vec<&str> = cert
        .subject()
        .iter_organizational_unit()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(ou, [cohort_proto::ROLE_NODE]);
    let cn: Vec<&str> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(cn, ["node-a"]);
    assert_eq!(
        cert.public_key().raw,
        key.public_key_der().as_slice(),
        "the CSR's key is certified"
    );
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(got.ca_pem.as_bytes()).unwrap();
    assert_eq!(cert.issuer(), ca_pem.parse_x509().unwrap().subject());

    // Reused: refused.
    let again = test::call_service(
        &app,
        enroll(&enroll_request(&token, "node-a", greedy_csr(&key))),
    )
    .await;
    assert_eq!(again.status(), 401);
    let body: ErrorBody = test::read_body_json(again).await;
    assert!(body.error.message.contains("already used"), "{body:?}");

    // Expired: refused.
    let issued: JoinTokenIssued =
        test::call_and_read_body_json(&app, issue(&admin, "node-c")).await;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&issued.token)
        .unwrap();
    let late: JoinToken = serde_json::from_slice(&raw).unwrap();
    diesel::update(join_tokens::table.filter(join_tokens::node_name.eq("node-c")))
        .set(join_tokens::expires_at.eq(chrono::Utc::now() - chrono::Duration::seconds(1)))
        .execute(&mut t.conn())
        .unwrap();
    let expired = test::call_service(
        &app,
        enroll(&enroll_request(&late, "node-c", greedy_csr(&key))),
    )
    .await;
    assert_eq!(expired.status(), 401);
    let body: ErrorBody = test::read_body_json(expired).await;
    assert!(body.error.message.contains("expired"), "{body:?}");

    // Unknown secret: refused.
    let mut forged = late.clone();
    forged.secret = "0".repeat(64);
    let unknown = test::call_service(
        &app,
        enroll(&enroll_request(&forged, "node-c", greedy_csr(&key))),
    )
    .await;
    assert_eq!(unknown.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_agents_racing_for_one_token_one_wins() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    let issued = cohort_controller::nodes::enroll::create_join_token(
        &t.ctl,
        admin,
        cohort_proto::api::nodes::CreateJoinToken {
            node_name: "node-r".into(),
            ttl_seconds: Some(60),
            addresses: vec!["127.0.0.2".into()],
        },
    )
    .await
    .unwrap();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&issued.token)
        .unwrap();
    let token: JoinToken = serde_json::from_slice(&raw).unwrap();
    let mut racers = Vec::new();
    for _ in 0..8 {
        let ctl = t.ctl.clone();
        let req = enroll_request(&token, "node-r", greedy_csr(&KeyPair::generate().unwrap()));
        racers.push(tokio::spawn(async move {
            cohort_controller::nodes::enroll::enroll(&ctl, req).await
        }));
    }
    let mut wins = 0;
    for r in racers {
        if r.await.unwrap().is_ok() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1, "a join token was spent more than once");
    let certs: i64 = cohort_controller::db::schema::node_certificates::table
        .count()
        .get_result(&mut t.conn())
        .unwrap();
    assert_eq!(certs, 1);
}
