//! The CUDA driver API version, as `nvidia-smi` prints it ("CUDA Version: 12.4"): asked of
//! libcuda (`cuDriverGetVersion`, which needs no `cuInit` and no GPU context), loaded at
//! run time so that ibscope neither links against it nor needs it installed.

use std::ffi::{c_int, CStr};

/// `12040` as `12.4`.
pub fn version_text(v: c_int) -> Option<String> {
    (v > 0).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// libcuda's CUDA driver API version; `None` without libcuda (no NVIDIA driver) or when it
/// does not answer.
pub fn driver_version() -> Option<String> {
    const LIBRARY: &CStr = c"libcuda.so.1";
    const SYMBOL: &CStr = c"cuDriverGetVersion";
    // SAFETY: dlopen/dlsym/dlclose on a NUL-terminated name; the symbol, when found, has
    // the documented signature `CUresult cuDriverGetVersion(int *)`, called once with a
    // valid pointer before the library is closed.
    unsafe {
        let handle = libc::dlopen(LIBRARY.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            return None;
        }
        let symbol = libc::dlsym(handle, SYMBOL.as_ptr());
        let mut version: c_int = 0;
        let ok = !symbol.is_null() && {
            let get: extern "C" fn(*mut c_int) -> c_int = std::mem::transmute(symbol);
            get(&mut version) == 0
        };
        libc::dlclose(handle);
        if ok {
            version_text(version)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_nvidia_smi_prints_them() {
        assert_eq!(version_text(12040).as_deref(), Some("12.4"));
        assert_eq!(version_text(11080).as_deref(), Some("11.8"));
        assert_eq!(version_text(0), None);
        // This machine has no NVIDIA driver: none, and no crash for asking.
        let _ = driver_version();
    }
}
