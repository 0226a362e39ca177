//! Images: the template catalog on the controller's disk, uploaded by admins and fetched by
//! agents over mutual TLS.

use std::io::Write;
use std::path::PathBuf;

use cohort_proto::api::images::{Image as WireImage, ImagePatch, ImportImageQuery, PublishImage};
use cohort_proto::api::instances::ObservedState;
use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::image::{Image, NewImage};
use crate::db::models::node_certificate::NodeCertificate;
use crate::db::models::operation_item::OperationItem;
use crate::error::{ActionError, ActionResult};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::{validate, views};

/// Every image; any authenticated caller may see them.
pub async fn list(ctl: &Controller, bearer: Bearer) -> ActionResult<Vec<WireImage>> {
    ctl.db_as(bearer, |conn, _caller| {
        Image::list(conn)?
            .iter()
            .map(|i| Ok(views::image(conn, i)?))
            .collect()
    })
    .await
}

fn find(conn: &mut PgConnection, alias_or_fp: &str) -> ActionResult<Image> {
    Image::lookup(conn, alias_or_fp)?
        .ok_or_else(|| ActionError::NotFound(format!("image {alias_or_fp}")))
}

pub async fn get(ctl: &Controller, bearer: Bearer, name: String) -> ActionResult<WireImage> {
    ctl.db_as(bearer, move |conn, _caller| {
        let image = find(conn, &name)?;
        Ok(views::image(conn, &image)?)
    })
    .await
}

/// An upload in progress: bytes go to a temporary file while their SHA-256 is computed.
pub struct ImageUpload {
    file: tempfile::NamedTempFile,
    hasher: Sha256,
    size: u64,
    limit: u64,
}

impl ImageUpload {
    /// Checks the caller and query before any byte is stored.
    pub fn begin(
        ctl: &Controller,
        caller: &Caller,
        query: &ImportImageQuery,
    ) -> ActionResult<ImageUpload> {
        caller.require(Role::Admin)?;
        validate::instance_name("alias", &query.alias.replace('/', "-"))?;
        if let Some(d) = &query.description {
            validate::text("description", d)?;
        }
        let dir = ctl.images_dir();
        std::fs::create_dir_all(&dir)?;
        Ok(ImageUpload {
            file: tempfile::NamedTempFile::new_in(dir)?,
            hasher: Sha256::new(),
            size: 0,
            limit: ctl.config.server.max_image_mib * 1024 * 1024,
        })
    }

    /// An upload without an alias yet, as the LXD-style API takes one (`lxc image import`,
    /// pylxd): it is catalogued under [`provisional_alias`] until an alias is given.
    pub fn begin_unnamed(ctl: &Controller, caller: &Caller) -> ActionResult<ImageUpload> {
        let query = ImportImageQuery {
            alias: "unnamed".into(),
            description: None,
            gpu_ready: None,
            jupyter: None,
        };
        Self::begin(ctl, caller, &query)
    }

    pub fn write(&mut self, chunk: &[u8]) -> ActionResult<()> {
        self.size += chunk.len() as u64;
        if self.size > self.limit {
            return Err(ActionError::invalid(
                "body",
                format!("image larger than {} bytes", self.limit),
            ));
        }
        self.hasher.update(chunk);
        self.file.write_all(chunk)?;
        Ok(())
    }

    /// Stores the tarball under its fingerprint and records it in the catalog.
    pub async fn finish(
        self,
        ctl: &Controller,
        caller: Caller,
        query: ImportImageQuery,
    ) -> ActionResult<WireImage> {
        if self.size == 0 {
            return Err(ActionError::invalid("body", "the image tarball is empty"));
        }
        // Nothing is stored unless it is an image: the temporary file goes with `self`.
        let upload = self.file.path().to_path_buf();
        let facts = tokio::task::spawn_blocking(move || crate::images::format::check(&upload))
            .await
            .map_err(|e| ActionError::Internal(e.to_string()))?
            .map_err(|e| match e {
                crate::images::format::ImageFormatError::Io(e) => ActionError::Io(e),
                other => ActionError::invalid("body", other.to_string()),
            })?;
        let fingerprint = hex::encode(self.hasher.finalize());
        let mut query = query;
        if query.alias.is_empty() {
            query.alias = provisional_alias(&fingerprint);
        }
        let path = ctl.image_tarball(&fingerprint);
        self.file
            .persist(&path)
            .map_err(|e| ActionError::Io(e.error))?;
        let size = self.size as i64;
        ctl.db(move |conn| {
            conn.transaction(|conn| {
                let image = Image::insert(
                    conn,
                    &NewImage {
                        fingerprint: &fingerprint,
                        alias: &query.alias,
                        description: query.description.as_deref().unwrap_or(""),
                        // The image's own `cohort.gpu_ready` unless the admin says otherwise.
                        gpu_ready: query.gpu_ready.or(facts.gpu_ready).unwrap_or(false),
                        size_bytes: size,
                        created_by: Some(caller.user.id),
                    },
                )
                .map_err(|e| {
                    ActionError::from_unique(
                        e,
                        "alias",
                        "an image with this alias or fingerprint exists",
                    )
                })?;
                if query.jupyter == Some(true) {
                    Image::set_jupyter(conn, image.id)?;
                }
                audit::record(
                    conn,
                    caller.name(),
                    AuditAction::Import,
                    AuditObject::Image,
                    &query.alias,
                    json!({"fingerprint": fingerprint}),
                )?;
                Ok(views::image(conn, &image)?)
            })
        })
        .await
    }
}

/// The alias an image uploaded without one carries (Cohort's images have exactly one) until it
/// is given one; the LXD-style API shows it as no alias.
pub fn provisional_alias(fingerprint: &str) -> String {
    format!("image-{}", &fingerprint[..fingerprint.len().min(12)])
}

/// The alias of an image published through the LXD-style API without one (`lxc publish`
/// names it afterwards with `POST /1.0/images/aliases`; pylxd does not): under `unnamed/`, which
/// [`is_unnamed`] treats as no alias yet, like [`provisional_alias`].
pub fn unnamed_publish_alias(instance: &str) -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("unnamed/{instance}-{}", &random[..8])
}

/// Whether `alias` of the image `fingerprint` is a provisional one, shown as no alias and
/// replaced by the first alias given.
pub fn is_unnamed(alias: &str, fingerprint: &str) -> bool {
    alias == provisional_alias(fingerprint) || alias.starts_with("unnamed/")
}

/// Removes an image no instance uses. Each node that holds a copy drops it (and its alias) as
/// a `drop_image` operation, one item per node, which the answer does not wait for: no instance
/// record uses the image, so no container Cohort knows of needs the copy.
pub async fn delete(ctl: &Controller, caller: Caller, name: String) -> ActionResult<()> {
    caller.require(Role::Admin)?;
    let fingerprint = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let image = find(conn, &name)?;
                let holders = Image::node_names(conn, image.id)?;
                Image::delete(conn, image.id).map_err(|e| match e {
                    diesel::result::Error::DatabaseError(
                        diesel::result::DatabaseErrorKind::ForeignKeyViolation,
                        _,
                    ) => ActionError::conflict(
                        None,
                        format!("image {name} is used by instances or courses"),
                    ),
                    other => other.into(),
                })?;
                let audit = Audit {
                    actor: caller.name(),
                    action: AuditAction::Delete,
                    object_kind: AuditObject::Image,
                    object: &image.alias,
                    detail: json!({"fingerprint": image.fingerprint, "nodes": holders}),
                };
                if holders.is_empty() {
                    audit::record(
                        conn,
                        audit.actor,
                        audit.action,
                        audit.object_kind,
                        audit.object,
                        audit.detail,
                    )?;
                } else {
                    let steps: Vec<Step<'_>> = holders
                        .iter()
                        .map(|node| Step::new(StepKind::DropImage, node, None))
                        .collect();
                    let op = enqueue(
                        conn,
                        &payload::Job::DropImage(payload::DropImage {
                            fingerprint: image.fingerprint.clone(),
                            alias: image.alias.clone(),
                        }),
                        Some(caller.user.id),
                        &image.alias,
                        &steps,
                        Some(audit),
                    )?;
                    for item in OperationItem::for_operation(conn, op.id)? {
                        OperationItem::set_node(conn, item.id, &item.target)?;
                    }
                }
                Ok(image.fingerprint)
            })
        })
        .await?;
    match std::fs::remove_file(ctl.image_tarball(&fingerprint)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Who may download a tarball: an admin token, or a live node certificate (by fingerprint).
pub enum TarballReader {
    Person(Caller),
    NodeCertificate(String),
}

/// The tarball's path once the reader is allowed.
pub async fn tarball(
    ctl: &Controller,
    reader: TarballReader,
    fingerprint: String,
) -> ActionResult<PathBuf> {
    let path = ctl.image_tarball(&fingerprint);
    ctl.db_once(move |conn| {
        match reader {
            TarballReader::Person(caller) => caller.require(Role::Admin)?,
            TarballReader::NodeCertificate(fp) => {
                if NodeCertificate::live_by_fingerprint(conn, &fp)?.is_none() {
                    return Err(ActionError::Forbidden(
                        "this node certificate is revoked or unknown".into(),
                    ));
                }
            }
        }
        Image::lookup(conn, &fingerprint)?
            .filter(|i| i.fingerprint == fingerprint)
            .ok_or_else(|| ActionError::NotFound(format!("image {fingerprint}")))?;
        Ok(path)
    })
    .await
}

/// `POST /api/v1/images/publish` (like `lxc publish`; instructor of the instance's course, its
/// owner if an instructor, or admin): the instance must be stopped. An operation: its node's
/// agent exports the image, the controller stores the tarball under its SHA-256 like an import,
/// and records that the node holds it.
/// What an image published by someone other than an admin is called: under its publisher's
/// name (`<username>/...`), never a shared-looking name other instructors would take for an
/// official image; an admin promotes it into the shared names ([`rename`]).
fn own_namespace(caller: &Caller, alias: &str) -> ActionResult<()> {
    let prefix = format!("{}/", caller.name());
    if caller.is_admin() || (alias.starts_with(&prefix) && alias.len() > prefix.len()) {
        return Ok(());
    }
    Err(ActionError::invalid(
        "alias",
        format!(
            "an image you publish is named under your own name, e.g. {prefix}{}; an admin \
             promotes it into the shared names",
            alias.rsplit('/').next().unwrap_or(alias)
        ),
    ))
}

/// `PATCH /api/v1/images/{name}` (admin): gives the image `req.alias` (audited as
/// `rename_image`), e.g. promotes an instructor's published image into the shared names.
pub async fn rename(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: ImagePatch,
) -> ActionResult<WireImage> {
    caller.require(Role::Admin)?;
    validate::instance_name("alias", &req.alias.replace('/', "-"))?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let image = Image::lookup(conn, &name)?
                .ok_or_else(|| ActionError::NotFound(format!("image {name}")))?;
            if image.alias != req.alias && Image::lookup(conn, &req.alias)?.is_some() {
                return Err(ActionError::conflict(
                    Some("alias"),
                    format!("an image with alias {} exists", req.alias),
                ));
            }
            let renamed = Image::set_alias(conn, image.id, &req.alias).map_err(|e| {
                ActionError::from_unique(e, "alias", "an image with this alias exists")
            })?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::RenameImage,
                AuditObject::Image,
                &req.alias,
                json!({"from": image.alias, "fingerprint": image.fingerprint}),
            )?;
            Ok(views::image(conn, &renamed)?)
        })
    })
    .await
}

/// Gives image `name` another description (admin; the LXD-style API's `PUT /1.0/images/FP`
/// with its `description` property), audited as an `update`.
pub async fn describe(
    ctl: &Controller,
    caller: Caller,
    name: String,
    description: String,
) -> ActionResult<WireImage> {
    caller.require(Role::Admin)?;
    validate::text("description", &description)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let image = find(conn, &name)?;
            let described = Image::set_description(conn, image.id, &description)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::Update,
                AuditObject::Image,
                &image.alias,
                json!({"fingerprint": image.fingerprint, "description": description}),
            )?;
            Ok(views::image(conn, &described)?)
        })
    })
    .await
}

pub async fn publish(
    ctl: &Controller,
    caller: Caller,
    req: PublishImage,
) -> ActionResult<WireOperation> {
    caller.require(Role::Instructor)?;
    validate::instance_name("instance", &req.instance)?;
    validate::instance_name("alias", &req.alias.replace('/', "-"))?;
    if let Some(d) = &req.description {
        cohort_proto::validate::display_text(d, 255)
            .map_err(|e| ActionError::invalid("description", e.0))?;
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = crate::instances::manage::find(conn, &caller, &req.instance)?;
            own_namespace(&caller, &req.alias)?;
            if Image::lookup(conn, &req.alias)?.is_some() {
                return Err(ActionError::conflict(
                    Some("alias"),
                    format!("an image with alias {} exists", req.alias),
                ));
            }
            if instance.node_id.is_none() {
                return Err(ActionError::conflict(
                    Some("instance"),
                    format!("instance {} is queued, not on a node yet", req.instance),
                ));
            }
            if instance.observed_state != ObservedState::Stopped {
                return Err(ActionError::conflict(
                    Some("instance"),
                    format!(
                        "instance {} is {}; stop it before publishing",
                        req.instance, instance.observed_state
                    ),
                ));
            }
            let op = enqueue(
                conn,
                &payload::Job::PublishImage(payload::Publish {
                    alias: req.alias.clone(),
                    description: req.description.clone(),
                }),
                Some(caller.user.id),
                &req.alias,
                &[Step::new(
                    StepKind::Publish,
                    &req.instance,
                    Some(instance.id),
                )],
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Publish,
                    object_kind: AuditObject::Image,
                    object: &req.alias,
                    detail: json!({"instance": req.instance}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// Whether the image aliased `alias` has Jupyter (`false` when there is none).
pub async fn has_jupyter(ctl: &Controller, alias: String) -> ActionResult<bool> {
    ctl.db(move |conn| Ok(Image::jupyter_of_alias(conn, &alias)?.unwrap_or(false)))
        .await
}
