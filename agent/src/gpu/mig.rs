//! MIG mode and MIG devices, which nvml-wrapper 0.10 does not wrap: the three NVML calls are made
//! through nvml-wrapper-sys on a second handle to the same library, and each MIG device handle is
//! then read with nvml-wrapper's safe `Device` methods.
#![allow(unsafe_code)]

use std::ffi::OsStr;

use cohort_proto::agent::MigDevice;
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{nvmlDevice_t, NvmlLib, NVML_DEVICE_MIG_ENABLE};

/// NVML's "not found": an empty MIG slot.
const NVML_ERROR_NOT_FOUND: u32 = 6;
/// NVML's "not supported": a GPU without MIG.
const NVML_ERROR_NOT_SUPPORTED: u32 = 3;

pub(super) struct MigLibrary {
    lib: NvmlLib,
}

impl MigLibrary {
    /// A second handle to the library nvml-wrapper already loaded (dlopen counts references).
    pub fn open(path: &OsStr) -> Option<Self> {
        // SAFETY: the same library nvml-wrapper has just loaded and initialised successfully.
        unsafe { NvmlLib::new(path) }
            .ok()
            .map(|lib| MigLibrary { lib })
    }

    /// Whether MIG is on for `device`, and its MIG devices.
    pub fn mig_devices(
        &self,
        nvml: &Nvml,
        device: &Device<'_>,
    ) -> Result<(bool, Vec<MigDevice>), NvmlError> {
        let (Ok(get_mode), Ok(max_count), Ok(by_index)) = (
            self.lib.nvmlDeviceGetMigMode.as_ref(),
            self.lib.nvmlDeviceGetMaxMigDeviceCount.as_ref(),
            self.lib.nvmlDeviceGetMigDeviceHandleByIndex.as_ref(),
        ) else {
            return Ok((false, Vec::new()));
        };
        // SAFETY: the handle comes from this NVML session, which outlives the call.
        let handle = unsafe { device.handle() };
        let (mut current, mut pending) = (0u32, 0u32);
        // SAFETY: both out-pointers are valid for writes.
        let ret = unsafe { get_mode(handle, &mut current, &mut pending) };
        if ret == NVML_ERROR_NOT_SUPPORTED {
            return Ok((false, Vec::new()));
        }
        nvml_try(ret)?;
        if current != NVML_DEVICE_MIG_ENABLE {
            return Ok((false, Vec::new()));
        }
        let mut count = 0u32;
        // SAFETY: valid out-pointer.
        nvml_try(unsafe { max_count(handle, &mut count) })?;
        let mut devices = Vec::new();
        for index in 0..count {
            let mut mig: nvmlDevice_t = std::ptr::null_mut();
            // SAFETY: valid out-pointer; NVML fills it on success.
            let ret = unsafe { by_index(handle, index, &mut mig) };
            if ret == NVML_ERROR_NOT_FOUND {
                continue;
            }
            nvml_try(ret)?;
            // SAFETY: a live MIG device handle of this NVML session.
            let mig = unsafe { Device::new(mig, nvml) };
            devices.push(MigDevice {
                uuid: mig.uuid()?,
                index,
                name: mig.name()?,
                memory_total_bytes: mig.memory_info()?.total,
            });
        }
        Ok((true, devices))
    }
}
