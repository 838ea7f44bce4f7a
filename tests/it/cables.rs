//! `ibscope cables` on a host fixture root: a netdev whose saved module memory is a
//! published capture (tests/data/cables), once as published and once with its receiver
//! dark, as the one failing module an operator must find by its serial.

use crate::common::*;

use ibscope_mad::cable::{dump, HalfAddr, ADDR_A0, ADDR_A2};

const SFP: &str = "tests/data/cables/sonic-sfputil-sff8472-finisar-ftlx8571d3bcl.txt";

/// The capture in ethtool's raw layout (A0h, then A2h), with A2h bytes 104-105 (the
/// received power) set to `rx`.
fn raw_sfp(rx: [u8; 2]) -> Vec<u8> {
    let memory = dump::parse(&std::fs::read(repo_root().join(SFP)).unwrap())
        .unwrap()
        .memory;
    let mut out = Vec::new();
    for at in [
        HalfAddr::lower(ADDR_A0),
        HalfAddr::page(ADDR_A0, 0),
        HalfAddr::lower(ADDR_A2),
        HalfAddr::page(ADDR_A2, 0),
    ] {
        out.extend_from_slice(memory.half(at).unwrap());
    }
    out[256 + 104..256 + 106].copy_from_slice(&rx);
    out
}

#[test]
fn the_host_inventory_and_its_one_dark_module() {
    let root = temp_dir();
    for netdev in ["eth2", "eth3", "eth4"] {
        std::fs::create_dir_all(root.path().join("sys/class/net").join(netdev)).unwrap();
    }
    std::fs::create_dir_all(root.path().join("module")).unwrap();
    // eth2: the module as published; eth3: the same module with no light received;
    // eth4: no module memory at all.
    std::fs::copy(repo_root().join(SFP), root.path().join("module/eth2")).unwrap();
    std::fs::write(root.path().join("module/eth3"), raw_sfp([0, 0])).unwrap();
    let env = [("IBSCOPE_SYSFS_ROOT", root.path().to_str().unwrap())];

    let out = ibscope_plain(&["cables", "--json"], &env);
    let text = assert_exit(&out, 1);
    let doc =
        crate::common::schema::assert_valid("cables", "cables --json", &text, false).remove(0);
    let modules = doc["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 3);
    assert_eq!(modules[0]["module"]["identity"]["serial"], "AUJ0RCJ");
    assert_eq!(modules[0]["findings"].as_array().unwrap().len(), 0);
    let dark = &modules[1]["findings"].as_array().unwrap()[0];
    assert_eq!(dark["kind"], "cable-rx-power-low");
    assert!(dark["message"].as_str().unwrap().contains("SN AUJ0RCJ"));
    assert!(modules[2]["error"]
        .as_str()
        .unwrap()
        .contains("no saved module memory"));

    let out = ibscope_plain(&["cables"], &env);
    let text = assert_exit(&out, 1);
    assert!(text.contains("[cable-rx-power-low]"), "{text}");
    assert!(text.contains("dark"), "{text}");

    let out = ibscope_plain(&["cables", "--csv", "--netdev", "eth2"], &env);
    let text = assert_exit(&out, 0);
    let row = text.lines().nth(1).unwrap();
    assert!(row.starts_with("netdev,eth2,SFF-8472,"), "{row}");
    assert!(
        row.contains(",FINISAR CORP.,00:90:65,FTLX8571D3BCL,A,AUJ0RCJ,151029,"),
        "{row}"
    );
}
