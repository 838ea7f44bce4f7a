//! Which of the fabric's hosts a list of names (`--hosts`) picks out, and which names no
//! host answers to.

use super::group::Hosts;

/// The hosts a list picks, in its order (each once), and the names the fabric lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Indexes into [`Hosts::hosts`]; every host when no list was given.
    pub shown: Vec<usize>,
    pub missing: Vec<String>,
}

impl Selection {
    /// Every host, or those `wanted` names.
    pub fn of(all: &Hosts, wanted: Option<&[String]>) -> Selection {
        let Some(list) = wanted else {
            return Selection {
                shown: (0..all.len()).collect(),
                missing: Vec::new(),
            };
        };
        let mut shown = Vec::new();
        let mut missing = Vec::new();
        for name in list {
            match all.find(name) {
                Some(i) if !shown.contains(&i) => shown.push(i),
                Some(_) => {}
                None => missing.push(name.clone()),
            }
        }
        Selection { shown, missing }
    }

    /// `host` is one shown, or one named that the fabric lacks.
    pub fn names(&self, all: &Hosts, host: &str) -> bool {
        self.shown.iter().any(|&i| all.hosts()[i].name == host)
            || self.missing.iter().any(|m| m == host)
    }
}
