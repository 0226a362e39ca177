//! `images` and `node_images`: the template catalog and which nodes hold each image.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::{images, node_images, nodes};

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = images, check_for_backend(diesel::pg::Pg))]
pub struct Image {
    pub id: i64,
    pub fingerprint: String,
    pub alias: String,
    pub description: String,
    pub gpu_ready: bool,
    pub size_bytes: i64,
    pub created_by: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub jupyter: bool,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = images)]
pub struct NewImage<'a> {
    pub fingerprint: &'a str,
    pub alias: &'a str,
    pub description: &'a str,
    pub gpu_ready: bool,
    pub size_bytes: i64,
    pub created_by: Option<i64>,
}

impl Image {
    pub fn insert(conn: &mut PgConnection, new: &NewImage<'_>) -> QueryResult<Image> {
        diesel::insert_into(images::table)
            .values(new)
            .returning(Image::as_returning())
            .get_result(conn)
    }

    /// By alias, or by fingerprint.
    pub fn lookup(conn: &mut PgConnection, alias_or_fp: &str) -> QueryResult<Option<Image>> {
        images::table
            .filter(
                images::alias
                    .eq(alias_or_fp)
                    .or(images::fingerprint.eq(alias_or_fp)),
            )
            .select(Image::as_select())
            .first(conn)
            .optional()
    }

    pub fn find(conn: &mut PgConnection, id: i64) -> QueryResult<Image> {
        images::table
            .find(id)
            .select(Image::as_select())
            .first(conn)
    }

    pub fn list(conn: &mut PgConnection) -> QueryResult<Vec<Image>> {
        images::table
            .order(images::alias)
            .select(Image::as_select())
            .load(conn)
    }

    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::delete(images::table.find(id)).execute(conn)
    }

    /// Names of the nodes holding the image.
    pub fn node_names(conn: &mut PgConnection, id: i64) -> QueryResult<Vec<String>> {
        node_images::table
            .inner_join(nodes::table)
            .filter(node_images::image_id.eq(id))
            .order(nodes::name)
            .select(nodes::name)
            .load(conn)
    }

    pub fn held_by(conn: &mut PgConnection, id: i64, node_id: i64) -> QueryResult<bool> {
        diesel::select(diesel::dsl::exists(
            node_images::table
                .filter(node_images::image_id.eq(id))
                .filter(node_images::node_id.eq(node_id)),
        ))
        .get_result(conn)
    }

    /// Records that the node holds the image (idempotent).
    pub fn mark_held(conn: &mut PgConnection, id: i64, node_id: i64) -> QueryResult<()> {
        diesel::insert_into(node_images::table)
            .values((
                node_images::image_id.eq(id),
                node_images::node_id.eq(node_id),
            ))
            .on_conflict_do_nothing()
            .execute(conn)
            .map(|_| ())
    }

    /// Gives the image another alias.
    pub fn set_alias(conn: &mut PgConnection, id: i64, alias: &str) -> QueryResult<Image> {
        diesel::update(images::table.find(id))
            .set(images::alias.eq(alias))
            .returning(Image::as_returning())
            .get_result(conn)
    }

    /// Gives the image another description.
    pub fn set_description(
        conn: &mut PgConnection,
        id: i64,
        description: &str,
    ) -> QueryResult<Image> {
        diesel::update(images::table.find(id))
            .set(images::description.eq(description))
            .returning(Image::as_returning())
            .get_result(conn)
    }

    /// Replaces what the node holds by the catalog images among `fingerprints`.
    pub fn set_held(
        conn: &mut PgConnection,
        node_id: i64,
        fingerprints: &[String],
    ) -> QueryResult<()> {
        diesel::delete(node_images::table.filter(node_images::node_id.eq(node_id)))
            .execute(conn)?;
        let ids: Vec<i64> = images::table
            .filter(images::fingerprint.eq_any(fingerprints))
            .select(images::id)
            .load(conn)?;
        for id in ids {
            Image::mark_held(conn, id, node_id)?;
        }
        Ok(())
    }

    /// The packed size of image `id`, in bytes.
    pub fn size_bytes(conn: &mut PgConnection, id: i64) -> QueryResult<i64> {
        images::table
            .find(id)
            .select(images::size_bytes)
            .first(conn)
    }

    /// The alias of image `id`.
    pub fn alias_of(conn: &mut PgConnection, id: i64) -> QueryResult<String> {
        images::table.find(id).select(images::alias).first(conn)
    }

    /// Marks image `id` as one with Jupyter.
    pub fn set_jupyter(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::update(images::table.find(id))
            .set(images::jupyter.eq(true))
            .execute(conn)
    }

    /// Whether the image aliased `alias` has Jupyter; `None` when no image has that alias.
    pub fn jupyter_of_alias(conn: &mut PgConnection, alias: &str) -> QueryResult<Option<bool>> {
        images::table
            .filter(images::alias.eq(alias))
            .select(images::jupyter)
            .first(conn)
            .optional()
    }
}
