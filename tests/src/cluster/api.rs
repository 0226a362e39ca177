//! Requests to a [`Cluster`]'s controller, as the admin or as any token's owner: raw requests,
//! calls that must succeed (as JSON or typed replies), waits for nodes and operations, and the
//! few steps many tests take (the base image, users and their tokens, a course's provision).

use std::time::{Duration, Instant};

use cohort_proto::api::courses::CreateCourse;
use cohort_proto::api::operations::{Operation, OperationStatus};
use cohort_proto::api::users::{CreateApiToken, CreateUser};
use reqwest::Method;
use serde_json::Value;

use super::Cluster;

impl Cluster {
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.controller.url())
    }

    /// A request with a bearer token.
    pub fn request(&self, method: Method, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.anonymous(method, path).bearer_auth(token)
    }

    /// A request under `/api/v1` with no credentials at all.
    pub fn anonymous(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path))
    }

    /// `GET` a path outside `/api/v1` (`/healthz`) without a token; its body.
    pub async fn get_plain(&self, path: &str) -> String {
        let res = self
            .http
            .get(format!("{}{path}", self.controller.url()))
            .send()
            .await
            .expect("controller answers");
        assert!(res.status().is_success(), "GET {path}: {}", res.status());
        res.text().await.expect("body")
    }

    /// `GET /metrics` as Prometheus would, with `token` (the metrics token or an admin's).
    pub async fn scrape(&self, token: &str) -> String {
        let res = self
            .http
            .get(format!("{}/metrics", self.controller.url()))
            .bearer_auth(token)
            .send()
            .await
            .expect("controller answers");
        assert!(res.status().is_success(), "GET /metrics: {}", res.status());
        res.text().await.expect("body")
    }

    /// A request as `token` that must be answered 2xx; the answer's body.
    async fn succeed(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> String {
        let mut req = self.request(method.clone(), path, token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.expect("controller answers");
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        text
    }

    /// An admin request; panics unless the answer is 2xx; returns its JSON (or Null).
    pub async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let text = self.succeed(&self.admin_token, method, path, body).await;
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// A request as `token` that must be answered 2xx with a body of type `T`; that body.
    pub async fn call<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> T {
        let text = self.succeed(token, method.clone(), path, body).await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"))
    }

    /// Polls `GET /nodes/{name}` until its state is `state`.
    pub async fn wait_node_state(&self, name: &str, state: &str, within: Duration) {
        self.wait_node(name, within, state, |node| node["state"] == state)
            .await;
    }

    /// Waits until node `name` is online with its first inventory recorded (its cores): a node is
    /// online from its enrollment, but until the first poll it has no cores to place on, and a
    /// class provisioned then is queued ("needs 1 CPU; most free on any node: 0") until the
    /// queue's next pass.
    pub async fn wait_node_ready(&self, name: &str, within: Duration) {
        let ready = |node: &Value| {
            node["state"] == "online" && node["cores"].as_u64().is_some_and(|c| c > 0)
        };
        self.wait_node(name, within, "online with its inventory", ready)
            .await;
    }

    /// Polls `GET /nodes/{name}` until `done` holds of it; panics past `within`, saying `what`.
    async fn wait_node(
        &self,
        name: &str,
        within: Duration,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) {
        let deadline = Instant::now() + within;
        let mut last = Value::Null;
        while Instant::now() < deadline {
            last = self
                .admin(Method::GET, &format!("/nodes/{name}"), None)
                .await;
            if done(&last) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        panic!("node {name} did not become {what} within {within:?}: {last}");
    }

    /// Uploads the base image tarball `scripts/setup` built, under `alias`; the catalog entry.
    pub async fn import_base_image(&self, alias: &str) -> Value {
        let tarball = crate::images::base_tarball();
        let bytes = tokio::fs::read(&tarball).await.expect("read tarball");
        let path = format!("/images?alias={alias}");
        let upload = self.request(Method::POST, &path, &self.admin_token);
        answered(upload.body(bytes), 201, "image import").await
    }

    /// [`Cluster::import_base_image`] marked GPU-ready by the admin (`?gpu_ready=true`): what a
    /// course or container asking for GPUs needs.
    pub async fn import_gpu_ready_base_image(&self, alias: &str) -> Value {
        let tarball = crate::images::base_tarball();
        let bytes = tokio::fs::read(&tarball).await.expect("read tarball");
        let path = format!("/images?alias={alias}&gpu_ready=true");
        let upload = self.request(Method::POST, &path, &self.admin_token);
        answered(upload.body(bytes), 201, "image import").await
    }

    /// Creates a user with `role` and returns an API token for them.
    pub async fn user(&self, username: &str, role: &str) -> String {
        self.admin(
            Method::POST,
            "/users",
            Some(crate::bodies::to_json(&CreateUser {
                username: username.into(),
                role: serde_json::from_value(Value::from(role)).expect("a role"),
                full_name: None,
                email: None,
            })),
        )
        .await;
        self.token_for(username).await
    }

    pub async fn token_for(&self, username: &str) -> String {
        let issued = self
            .admin(
                Method::POST,
                &format!("/users/{username}/tokens"),
                Some(crate::bodies::to_json(&CreateApiToken::default())),
            )
            .await;
        issued["token"].as_str().expect("token").to_string()
    }

    /// Waits for an operation to end; returns it.
    pub async fn wait_operation(&self, id: &str, within: Duration) -> Value {
        self.wait_operation_as(&self.admin_token, id, within).await
    }

    /// [`Cluster::wait_operation`] as `token`'s owner (e.g. the student who started it).
    pub async fn wait_operation_as(&self, token: &str, id: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let path = format!("/operations/{id}/wait?timeout=10");
            let op: Value = self.call(token, Method::GET, &path, None).await;
            let status = op["status"].as_str().unwrap_or_default();
            if ["success", "failure", "cancelled"].contains(&status) {
                return op;
            }
            assert!(
                Instant::now() < deadline,
                "operation {id} still {status} after {within:?}: {op}"
            );
        }
    }

    /// Waits as `token`'s owner for `op` to end (five minutes at most) and asserts it succeeded;
    /// the finished operation.
    pub async fn succeeds(&self, token: &str, op: &Operation) -> Operation {
        let id = op.id.to_string();
        let done = self
            .wait_operation_as(token, &id, Duration::from_secs(300))
            .await;
        let done: Operation = serde_json::from_value(done).expect("an operation");
        assert_eq!(done.status, OperationStatus::Success, "{done:#?}");
        done
    }

    /// `POST /courses` as `token`; panics unless the course is created (201). Returns it.
    pub async fn create_course(&self, token: &str, course: CreateCourse) -> Value {
        let create = self.request(Method::POST, "/courses", token).json(&course);
        answered(create, 201, "create course").await
    }

    /// `POST /courses/{code}/roster` of a CSV roster as `token`; panics unless it is imported
    /// (200). Returns the import's report.
    pub async fn import_roster(&self, token: &str, code: &str, csv: String) -> Value {
        let import = self
            .request(Method::POST, &format!("/courses/{code}/roster"), token)
            .header("content-type", "text/csv")
            .body(csv);
        answered(import, 200, &format!("roster of {code}")).await
    }

    /// Starts `POST /courses/{code}/provision` as `token`; panics unless it is accepted (202).
    /// Returns the operation's id.
    pub async fn start_provision(&self, code: &str, token: &str) -> String {
        let provision = self.request(Method::POST, &format!("/courses/{code}/provision"), token);
        let op = answered(provision, 202, &format!("provision {code}")).await;
        op["id"].as_str().expect("operation id").to_string()
    }

    /// Provisions course `code` as `token` ([`Cluster::start_provision`]) and waits up to ten
    /// minutes for the operation; returns it as it finished.
    pub async fn provision(&self, code: &str, token: &str) -> Value {
        let id = self.start_provision(code, token).await;
        self.wait_operation(&id, Duration::from_secs(600)).await
    }
}

/// Sends `req`; panics unless it is answered `status`; the answer's JSON (or Null).
async fn answered(req: reqwest::RequestBuilder, status: u16, what: &str) -> Value {
    let res = req.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = res.status();
    let text = res.text().await.unwrap_or_default();
    assert_eq!(got, status, "{what}: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}
