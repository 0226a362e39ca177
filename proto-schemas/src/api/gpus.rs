//! GPUs: `GET /api/v1/gpus` (admin, instructor), `PATCH /api/v1/gpus/{uuid}` (admin).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// NVML uuid (`GPU-...`, or `MIG-...` for a MIG instance).
    pub uuid: String,
    pub node: String,
    pub index: u32,
    pub model: String,
    pub memory_bytes: u64,
    pub pci_address: String,
    /// Set for a MIG instance: the uuid of the physical GPU it is carved from.
    pub mig_parent: Option<String>,
    /// 1 = exclusive; N = up to N containers share it. MIG instances are always 1.
    pub share_limit: u32,
    /// Live allocations now.
    pub allocated: u32,
    /// False when the node's last inventory no longer listed it.
    pub present: bool,
}

/// `PATCH /api/v1/gpus/{uuid}`. Lowering the limit below the live allocations is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateGpu {
    pub share_limit: u32,
}
