//! Every rule over a log.

use ibscope_topo::findings::Finding;
use ibscope_topo::hosts::Hosts;

use super::common::Index;
use super::{distance, failure, gdr, network, rails, settings};
use crate::log::NcclLog;

/// Every rule over `log`; `hosts` gives the fabric's hosts and rails where known.
pub fn check(log: &NcclLog, hosts: Option<&Hosts>) -> Vec<Finding> {
    check_indexed(log, &Index::new(log), hosts)
}

/// Every rule over `log`, with its index built.
pub fn check_indexed(log: &NcclLog, by: &Index, hosts: Option<&Hosts>) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(failure::init_failed(log, by));
    out.extend(network::net_socket(log, by, hosts));
    out.extend(rails::wrong_rail(log, by, hosts));
    out.extend(gdr::gdr_off(log, by));
    out.extend(gdr::gdr_forced(log, by));
    out.extend(distance::gpu_nic_distance(log, by));
    out.extend(rails::rails_unused(log, by, hosts));
    out.extend(settings::mismatch(log, by));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{self, Job};

    fn kinds(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.kind.name()).collect()
    }

    #[test]
    fn a_healthy_job_has_no_findings() {
        let log = synthetic::log(&Job::new(4, 8));
        assert_eq!(kinds(&check(&log, None)), Vec::<&str>::new());
    }

    #[test]
    fn a_gpu_on_another_rails_hca_is_wrong_rail_and_idles_a_rail() {
        let mut job = Job::new(4, 8);
        job.hca_of_gpu = Some((2, 5, 4));
        let found = check(&synthetic::log(&job), None);
        assert_eq!(
            kinds(&found),
            ["nccl-wrong-rail", "nccl-rail-unused"],
            "{found:#?}"
        );
        assert!(found[0].text_line().starts_with(
            "[nccl-wrong-rail] gpu-0003 rail 5: rank 21 (GPU 5) uses mlx5_4 (rail 4) for"
        ));
        assert!(
            found[0].message.contains("its own HCA is mlx5_5;"),
            "{}",
            found[0].message
        );
        assert!(found[1]
            .text_line()
            .starts_with("[nccl-rail-unused] gpu-0003 rail 5: mlx5_5 carries none"));
        assert_eq!(found[1].rail, Some(5));
    }

    #[test]
    fn a_host_without_gpudirect_is_gdr_off() {
        let mut job = Job::new(4, 2);
        job.no_gdr_host = Some(1);
        let found = check(&synthetic::log(&job), None);
        assert_eq!(
            kinds(&found),
            ["nccl-gdr-off", "nccl-gdr-off"],
            "{found:#?}"
        );
        assert!(found[0].message.contains("nvidia-peermem"));
        assert!(found[0].message.contains("(no module)"));
        // Nobody uses it: nothing to compare with, nothing said.
        let mut none = Job::new(4, 2);
        none.gdr = false;
        assert!(check(&synthetic::log(&none), None).is_empty());
    }

    #[test]
    fn another_version_or_setting_is_a_mismatch() {
        let mut job = Job::new(3, 2);
        job.odd_version_host = Some(2);
        let found = check(&synthetic::log(&job), None);
        assert_eq!(
            kinds(&found),
            ["nccl-mismatch", "nccl-mismatch"],
            "{found:#?}"
        );
        assert!(found[0].message.contains("2.18.3+cuda12.2 on gpu-0003"));
        assert!(found[1].message.contains("NCCL_IB_GID_INDEX"));
    }

    /// Lines in NCCL's wording (net.cc's `NET/Socket : Using`, init.cc's `Using network`,
    /// param.h's `set by environment to`), two hosts of a job.
    fn lines(text: &str) -> Vec<Finding> {
        check(&crate::log::parse([("job.log", text)]), None)
    }

    #[test]
    fn sockets_where_hcas_exist_are_named() {
        let found = lines(
            "\
a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
a:1:1 [0] NCCL INFO Using network Socket
a:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0x1 - Init COMPLETE
b:2:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0>
b:2:2 [0] NCCL INFO Using network IB
b:2:3 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 commId 0x1 - Init COMPLETE
",
        );
        assert_eq!(kinds(&found), ["nccl-net-socket"], "{found:#?}");
        assert_eq!(found[0].host.as_deref(), Some("a"));
        assert!(found[0]
            .message
            .contains("other processes of the job use IB"));
        assert!(found[0].message.contains("NCCL_IB_DISABLE=1"));
        assert_eq!(found[0].evidence[0].to_string(), "job.log:1");
        // Sockets with nothing that shows an HCA: nothing said.
        let alone = "\
a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
a:1:2 [0] NCCL INFO Channel 00 : 0[1000] -> 1[1000] [send] via NET/Socket/0
";
        assert!(lines(alone).is_empty());
    }

    #[test]
    fn a_setting_printed_on_one_host_of_the_whole_job_only() {
        let text = "\
a:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0
a:1:1 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PXB
a:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0x1 - Init COMPLETE
b:2:2 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0
b:2:3 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 commId 0x1 - Init COMPLETE
";
        let found = lines(text);
        assert_eq!(kinds(&found), ["nccl-mismatch"], "{found:#?}");
        assert!(found[0]
            .message
            .starts_with("NCCL_NET_GDR_LEVEL is set on a (PXB) and not printed on b"));
        // Without b's lines (an excerpt of one host), nothing can be said.
        let a_only: String = text
            .lines()
            .filter(|l| l.starts_with("a:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(lines(&a_only).is_empty());
    }

    #[test]
    fn gpudirect_kept_off_where_the_nic_is_close() {
        // NCCL 2.18 numbers PIX 3; NCCL_NET_GDR_LEVEL=LOC refuses it.
        let found = lines(
            "\
a:1:1 [0] NCCL INFO NCCL version 2.18.3+cuda12.2
a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>
a:1:1 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC
a:1:1 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1000 / HCA 0 (distance 3 > 0)
a:1:1 [0] NCCL INFO Channel 00/0 : 1[1000] -> 0[1000] [receive] via NET/IB/0
a:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
a:1:1 [0] NCCL INFO Channel 00/0 : 0[1000] -> 2[2000] via SHM/direct/direct
",
        );
        assert_eq!(
            kinds(&found),
            ["nccl-gdr-forced", "nccl-gdr-forced"],
            "{found:#?}"
        );
        assert!(found[0]
            .text_line()
            .starts_with("[nccl-gdr-forced] a: NCCL_NET_GDR_LEVEL=LOC keeps GPUDirect RDMA off"));
        assert!(
            found[0].message.contains("(GPU 1000 to mlx5_0 at PIX)"),
            "{}",
            found[0].message
        );
        assert!(found[1]
            .message
            .starts_with("NCCL_P2P_DISABLE=1 keeps the server's GPUs off"));
    }
}
