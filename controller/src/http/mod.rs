//! Everything that speaks HTTP: the REST API ([`api`]) and its OpenAPI document
//! ([`openapi`]), the browser portal ([`portal`]), the LXD-compatible API ([`lxd_api`]) and the
//! Jupyter proxy ([`jupyter`]). Handlers parse, call the feature modules and answer.

pub mod api;
pub mod jupyter;
pub mod lxd_api;
pub mod openapi;
pub mod portal;
