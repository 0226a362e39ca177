//! An instance row whose `config` is not a map of strings (written by hand, or by an older
//! controller) is an error naming the instance, never shown (or made) with an empty config.

use actix_web::{test, web, App};
use cohort_controller::db::schema::instances as inst;
use cohort_controller::http::api;
use cohort_controller::instances::manage as instances;
use cohort_e2e::controller::TestController;
use cohort_proto::api::instances::{CreateInstance, GpuShare, PlacementStrategy};
use cohort_proto::ErrorBody;
use diesel::prelude::*;

#[actix_web::test]
async fn a_config_that_is_not_a_map_of_strings_is_a_500_naming_the_instance() {
    let t = TestController::new();
    let (admin, admin_token) = t.user("admin", "admin");
    t.image("base");
    let create = CreateInstance {
        name: "bad-config".into(),
        image: "base".into(),
        limits: None,
        gpus: 0,
        gpu_model: None,
        gpu_share: GpuShare::Shared,
        config: [("user.a".to_string(), "b".to_string())].into(),
        owner: None,
        node: None,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        queue: true,
        start: true,
    };
    instances::create(&t.ctl, admin, create).await.unwrap();
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let get = || {
        test::TestRequest::get()
            .uri("/api/v1/instances/bad-config")
            .insert_header(("Authorization", format!("Bearer {admin_token}")))
            .to_request()
    };
    let resp = test::call_service(&app, get()).await;
    assert_eq!(resp.status(), 200);

    diesel::update(inst::table.filter(inst::name.eq("bad-config")))
        .set(inst::config.eq(serde_json::json!({"user.a": 1})))
        .execute(&mut t.db.connect())
        .unwrap();
    let resp = test::call_service(&app, get()).await;
    assert_eq!(resp.status(), 500);
    let body: ErrorBody = test::read_body_json(resp).await;
    assert_eq!(body.error.code, "internal_error");
    assert!(
        body.error.message.contains("instance bad-config"),
        "{}",
        body.error.message
    );
}
