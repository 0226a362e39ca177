//! The OpenAPI 3 document served at `/api/v1/openapi.json`, built from the route table the
//! router registers (`crate::http::api::routes`) and the schemars types the handlers take and answer,
//! so it cannot drift from either.

use cohort_proto::ErrorBody;
use schemars::gen::SchemaSettings;
use serde_json::{json, Map, Value};

fn parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// The whole document.
pub fn document() -> Value {
    let mut gen = SchemaSettings::openapi3().into_generator();
    let error = serde_json::to_value(gen.subschema_for::<ErrorBody>()).unwrap_or(Value::Null);
    let mut paths = Map::new();
    for route in crate::http::api::routes() {
        let mut responses = Map::new();
        let ok = match route.response.map(|schema| schema(&mut gen)) {
            Some(s) => {
                json!({"description": "success", "content": {"application/json": {"schema": s}}})
            }
            None => json!({"description": "success"}),
        };
        responses.insert(route.status.to_string(), ok);
        responses.insert(
            "4XX".into(),
            json!({"description": "the caller's error", "content": {"application/json": {"schema": error}}}),
        );
        let mut operation = json!({
            "summary": route.summary,
            "parameters": parameters(route.path),
            "responses": responses,
        });
        if let Some(body) = route.request.map(|schema| schema(&mut gen)) {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body}}});
        }
        if !route.authenticated {
            operation["security"] = json!([]);
        }
        let entry = paths
            .entry(format!("/api/v1{}", route.path))
            .or_insert_with(|| json!({}));
        entry[route.method.as_str().to_lowercase()] = operation;
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Cohort controller API", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "schemas": gen.take_definitions(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    })
}

#[cfg(test)]
mod tests {
    use super::document;

    /// Every `$ref` in the document names a schema it defines.
    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().expect("name");
            assert!(schemas.contains_key(name), "unresolved reference to {name}");
        }
        assert!(doc["paths"]["/api/v1/instances"]["post"]["requestBody"].is_object());
        assert!(schemas.contains_key("CreateInstance"));
        assert!(schemas.contains_key("ErrorBody"));
    }

    /// Every route the router registers is documented, once, with a summary: the table is one.
    #[test]
    fn every_route_is_documented_once() {
        let doc = document();
        let paths = doc["paths"].as_object().expect("paths");
        let documented: usize = paths
            .values()
            .map(|p| p.as_object().map_or(0, |m| m.len()))
            .sum();
        let routes = crate::http::api::routes();
        assert_eq!(documented, routes.len(), "a route is declared twice");
        for route in &routes {
            let path = format!("/api/v1{}", route.path);
            let method = route.method.as_str().to_lowercase();
            let summary = &paths[&path][&method]["summary"];
            assert!(
                summary.as_str().is_some_and(|s| !s.is_empty()),
                "{method} {path} has no summary"
            );
        }
    }
}
