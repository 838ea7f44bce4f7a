//! The servers a job runs on, as the collectives model takes them: the hosts named (or
//! every host with an HCA on a known rail), each with its working HCA port per rail.

use crate::hosts::Hosts;

use super::collective::JobHost;

/// Why a named server cannot be part of a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error(
        "{0:?} is not in the fabric: no CA's NodeDescription names it (see `ibscope hosts`; \
         `ibscope check --hosts` reports every missing one)"
    )]
    NotInFabric(String),
    #[error("{0:?} has no HCA with a known rail (see `ibscope hosts`)")]
    NoRail(String),
}

/// A job's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobServers {
    /// In the order named (each once); every host with a rail when none is named.
    pub hosts: Vec<JobHost>,
    /// Every rail the servers' HCAs are on (up or not), ascending.
    pub rails: Vec<u8>,
}

/// The servers named in `names` (all hosts with an HCA on a known rail when empty), with
/// the HCA ports that are up.
pub fn job_servers(all: &Hosts, names: &[String]) -> Result<JobServers, JobError> {
    let mut chosen: Vec<usize> = Vec::new();
    if names.is_empty() {
        chosen.extend((0..all.len()).filter(|&i| all.hosts()[i].rails().next().is_some()));
    }
    for name in names {
        let i = all
            .find(name)
            .ok_or_else(|| JobError::NotInFabric(name.clone()))?;
        if all.hosts()[i].rails().next().is_none() {
            return Err(JobError::NoRail(name.clone()));
        }
        if !chosen.contains(&i) {
            chosen.push(i);
        }
    }
    let mut rails: Vec<u8> = chosen
        .iter()
        .flat_map(|&i| all.hosts()[i].rails())
        .collect();
    rails.sort_unstable();
    rails.dedup();
    let hosts = chosen
        .iter()
        .map(|&i| {
            let h = &all.hosts()[i];
            JobHost {
                name: h.name.clone(),
                hcas: h
                    .hcas
                    .iter()
                    .filter(|c| c.is_up())
                    .filter_map(|c| Some((c.rail?, c.end())))
                    .collect(),
            }
        })
        .collect();
    Ok(JobServers { hosts, rails })
}
