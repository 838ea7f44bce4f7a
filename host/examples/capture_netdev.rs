//! Capture a netdev's ethtool statistics answers and its DCB (IEEE_GET) answer as the
//! kernel writes them, into DIR: `ethtool-gsset-info.bin`, `ethtool-gstrings.bin`,
//! `ethtool-gstats.bin`, `dcb-ieee-get.bin` (the test fixtures of the decoders).
//!
//!   cargo run -p ibscope-host --example capture_netdev -- NETDEV DIR

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(netdev), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: capture_netdev NETDEV DIR");
        std::process::exit(2);
    };
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir).expect("create DIR");
    match ibscope_host::ethtool::raw_answers(netdev) {
        Ok([info, names, values]) => {
            for (file, bytes) in [
                ("ethtool-gsset-info.bin", info),
                ("ethtool-gstrings.bin", names),
                ("ethtool-gstats.bin", values),
            ] {
                std::fs::write(dir.join(file), bytes).expect("write");
            }
        }
        Err(e) => eprintln!("ethtool: {e}"),
    }
    match ibscope_host::roce::raw_ieee_answer(netdev) {
        Ok(bytes) => std::fs::write(dir.join("dcb-ieee-get.bin"), bytes).expect("write"),
        Err(e) => eprintln!("dcb: {e}"),
    }
}
