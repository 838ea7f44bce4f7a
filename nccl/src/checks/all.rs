//! Every rule over a log.

use ibscope_topo::findings::Finding;
use ibscope_topo::hosts::Hosts;

use super::common::ByProcess;
use super::{distance, failure, gdr, network, rails, settings};
use crate::log::NcclLog;

/// Every rule over `log`; `hosts` gives the fabric's hosts and rails where known.
pub fn check(log: &NcclLog, hosts: Option<&Hosts>) -> Vec<Finding> {
    let by = ByProcess::new(log);
    let mut out = Vec::new();
    out.extend(failure::init_failed(log, &by));
    out.extend(network::net_socket(log, &by, hosts));
    out.extend(rails::wrong_rail(log, hosts));
    out.extend(gdr::gdr_off(log));
    out.extend(gdr::gdr_forced(log, &by));
    out.extend(distance::gpu_nic_distance(log, &by));
    out.extend(rails::rails_unused(log, hosts));
    out.extend(settings::mismatch(log, &by));
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
        assert!(found[0]
            .message
            .contains("rank 21 (GPU 5 of gpu-0003) uses mlx5_4 (rail 4)"));
        assert!(
            found[0].message.contains("own HCA is mlx5_5 (rail 5)"),
            "{}",
            found[0].message
        );
        assert!(found[1].message.contains("mlx5_5 of gpu-0003"));
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
}
