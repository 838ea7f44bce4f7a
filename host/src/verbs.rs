//! The libibverbs path (feature `verbs`, through rdma-sys): list the devices, open each,
//! query it, its ports and their GID tables, close it. Read-only: no protection domain, no
//! queue pair, nothing registered.

use std::ffi::CStr;
use std::io;
use std::os::raw::c_int;

use rdma_sys::{
    ___ibv_query_port, ibv_close_device, ibv_context, ibv_device, ibv_device_attr,
    ibv_free_device_list, ibv_get_device_list, ibv_get_device_name, ibv_gid, ibv_open_device,
    ibv_port_attr, ibv_query_device, ibv_query_gid,
};

use crate::ibv::{VerbsDevice, VerbsFacts, VerbsPort};

/// A GID table longer than this is not believed (real ones hold 128-256 entries).
const MAX_GIDS: i32 = 4096;

/// Every device libibverbs lists, each with its facts or why they could not be read. `Err`
/// when it cannot list devices at all.
pub fn list() -> Result<Vec<VerbsDevice>, String> {
    let mut count: c_int = 0;
    // SAFETY: ibv_get_device_list writes the count and returns a NULL-terminated array (or
    // NULL with errno set), which is released below with ibv_free_device_list after the
    // last use of its entries.
    let list = unsafe { ibv_get_device_list(&mut count) };
    if list.is_null() {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOSYS) => {
                "the kernel offers no verbs interface (no /sys/class/infiniband_verbs; \
                 is ib_uverbs loaded?)"
                    .to_string()
            }
            _ => format!("ibv_get_device_list: {err}"),
        });
    }
    let count = usize::try_from(count).unwrap_or(0);
    let devices = (0..count)
        // SAFETY: the array holds `count` entries.
        .map(|i| unsafe { *list.add(i) })
        .filter(|d| !d.is_null())
        .map(read_device)
        .collect();
    // SAFETY: `list` came from ibv_get_device_list and every context opened on its devices
    // has been closed by read_device.
    unsafe { ibv_free_device_list(list) };
    Ok(devices)
}

fn read_device(device: *mut ibv_device) -> VerbsDevice {
    // SAFETY: `device` is a live entry of the device list; the name is a NUL-terminated
    // string owned by it.
    let name = unsafe {
        let name = ibv_get_device_name(device);
        if name.is_null() {
            String::new()
        } else {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        }
    };
    // SAFETY: as above; the context is closed before returning.
    let context = unsafe { ibv_open_device(device) };
    if context.is_null() {
        let err = io::Error::last_os_error();
        return VerbsDevice {
            name,
            facts: Err(format!(
                "ibv_open_device: {err} (permissions on /dev/infiniband/uverbs*?)"
            )),
        };
    }
    let facts = query(context);
    // SAFETY: `context` was opened above and is not used after this.
    unsafe { ibv_close_device(context) };
    VerbsDevice { name, facts }
}

fn query(context: *mut ibv_context) -> Result<VerbsFacts, String> {
    // SAFETY: ibv_device_attr is plain data: all-zero is a valid value, and ibv_query_device
    // fills it.
    let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
    // SAFETY: `context` is open; `attr` is a valid, writable ibv_device_attr.
    let rc = unsafe { ibv_query_device(context, &mut attr) };
    if rc != 0 {
        return Err(format!(
            "ibv_query_device: {}",
            io::Error::from_raw_os_error(rc)
        ));
    }
    // fw_ver is a fixed char array, NUL-terminated by the library.
    let fw: Vec<u8> = attr
        .fw_ver
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let ports = (1..=attr.phys_port_cnt)
        .map(|n| query_port(context, n))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(VerbsFacts {
        // Both GUIDs are in network byte order (__be64).
        node_guid: u64::from_be(attr.node_guid),
        sys_image_guid: u64::from_be(attr.sys_image_guid),
        fw_ver: String::from_utf8_lossy(&fw).trim().to_string(),
        vendor_part_id: attr.vendor_part_id,
        ports,
    })
}

fn query_port(context: *mut ibv_context, port: u8) -> Result<VerbsPort, String> {
    // SAFETY: plain data, as above.
    let mut attr: ibv_port_attr = unsafe { std::mem::zeroed() };
    // SAFETY: `context` is open; ___ibv_query_port is verbs.h's ibv_query_port (it passes
    // the full struct's size, so active_speed_ex is filled where the library knows it).
    let rc = unsafe { ___ibv_query_port(context, port, &mut attr) };
    if rc != 0 {
        return Err(format!(
            "ibv_query_port {port}: {}",
            io::Error::from_raw_os_error(rc)
        ));
    }
    let mut gids = Vec::new();
    for index in 0..attr.gid_tbl_len.clamp(0, MAX_GIDS) {
        // SAFETY: plain data; ibv_query_gid writes one ibv_gid.
        let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: `context` is open, `index` is within the port's table.
        let rc = unsafe { ibv_query_gid(context, port, index, &mut gid) };
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        let raw = unsafe { gid.raw };
        if rc == 0 && raw != [0; 16] {
            gids.push((index as u32, raw));
        }
    }
    Ok(VerbsPort {
        port,
        state: attr.state,
        phys_state: attr.phys_state,
        link_layer: attr.link_layer,
        active_width: attr.active_width,
        active_speed: attr.active_speed,
        // rdma-core added active_speed_ex (for XDR) in version 48; the bindings follow the
        // installed verbs.h (Debian 12 ships 44), so it is not read here. An XDR port's speed
        // comes from sysfs instead (see VerbsPort::to_port).
        active_speed_ex: 0,
        lid: attr.lid,
        sm_lid: attr.sm_lid,
        gids,
    })
}
