//! What is served, held in memory: a slot per fabric (its name, its last page, whether it
//! is reachable, its last discovery), this host's page with `--host`, and what /healthz
//! says of them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use ibscope_topo::findings::{self, Finding};
use ibscope_topo::hosts::planes::PlaneView;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::{Fabric, FabricId};

use crate::locked;
use crate::page::Page;

/// One fabric as served.
#[derive(Debug)]
pub struct FabricSlot {
    state: Mutex<SlotState>,
    pub page: ArcSwapOption<Page>,
    /// Its sweeper has its management port open (a stop waits until it is closed).
    pub port_open: AtomicBool,
}

/// A fabric's name and whether its port is open and answering, as its sweeper last said.
#[derive(Debug, Clone)]
pub struct SlotState {
    /// What it is called on the page: the planned name until its port is open.
    pub name: String,
    pub up: bool,
    /// Why it is down (kept while a page marked stale is served).
    pub reason: Option<String>,
    /// Since when it is up, or down.
    pub since: Instant,
    /// Times its port was opened again after it was lost.
    pub reopens: u64,
    /// Its port reaches a subnet another slot sweeps: not shown.
    pub merged: bool,
    /// Its last discovery, for the planes-disagree findings of every fabric.
    pub discovery: Option<(Arc<Fabric>, Arc<Hosts>)>,
}

impl FabricSlot {
    pub fn new(name: String) -> FabricSlot {
        let state = SlotState {
            name,
            up: false,
            reason: None,
            since: Instant::now(),
            reopens: 0,
            merged: false,
            discovery: None,
        };
        FabricSlot {
            state: Mutex::new(state),
            page: ArcSwapOption::empty(),
            port_open: AtomicBool::new(false),
        }
    }

    pub fn name(&self) -> String {
        locked(&self.state).name.clone()
    }

    pub fn state_now(&self) -> SlotState {
        locked(&self.state).clone()
    }

    /// Its port was opened (`reopened`: again, after a loss) on the fabric called `name`.
    pub fn set_opened(&self, name: &str, reopened: bool) {
        let mut s = locked(&self.state);
        s.name = name.to_string();
        s.reopens += u64::from(reopened);
    }

    pub fn set_up(&self) {
        let mut s = locked(&self.state);
        if !s.up {
            s.since = Instant::now();
        }
        s.up = true;
        s.reason = None;
    }

    /// Down for `reason`; `replace`: it replaces an earlier reason (the first says most).
    pub fn set_down(&self, reason: String, replace: bool) {
        let mut s = locked(&self.state);
        if s.up {
            s.since = Instant::now();
        }
        s.up = false;
        if replace || s.reason.is_none() {
            s.reason = Some(reason);
        }
    }

    pub fn set_merged(&self) {
        locked(&self.state).merged = true;
        self.page.store(None);
    }

    pub fn set_discovery(&self, fabric: Arc<Fabric>, hosts: Arc<Hosts>) {
        locked(&self.state).discovery = Some((fabric, hosts));
    }

    /// A page of a sweep: one whose sweep reached no port does not replace a good one
    /// (that stays, marked stale).
    pub fn publish(&self, page: Page) {
        match page.failure.clone() {
            None => {
                self.page.store(Some(Arc::new(page)));
                self.set_up();
            }
            Some(why) => {
                let page_now = self.page.load();
                let have_good = page_now.as_ref().is_some_and(|p| p.failure.is_none());
                if !have_good {
                    self.page.store(Some(Arc::new(page)));
                }
                self.set_down(format!("the last sweep reached no port: {why}"), true);
            }
        }
    }

    /// Ok when it answers and its last sweep succeeded and is fresh; else why not.
    pub fn health(&self, max_age: Duration) -> Result<(), String> {
        let page = self.page.load();
        let state = self.state_now();
        if let (false, Some(why)) = (state.up, &state.reason) {
            let mut body = format!(
                "fabric unreachable for {:.0} s: {why}",
                state.since.elapsed().as_secs_f64()
            );
            if let Some(p) = page.as_ref() {
                let age = p.finished.elapsed().as_secs_f64();
                let _ = write!(body, "; serving the last good sample, {age:.0} s old");
            }
            return Err(body);
        }
        match page.as_ref() {
            None => Err("no sweep finished yet".to_string()),
            Some(p) => match &p.failure {
                Some(why) => Err(format!("last sweep failed: {why}")),
                None if p.finished.elapsed() > max_age => Err(format!(
                    "last sweep is stale: finished {:.0} s ago (limit {:.0} s)",
                    p.finished.elapsed().as_secs_f64(),
                    max_age.as_secs_f64()
                )),
                None => Ok(()),
            },
        }
    }
}

/// Everything served.
#[derive(Debug)]
pub struct Pages {
    pub slots: Vec<FabricSlot>,
    /// Several fabrics were asked for (/healthz then has a line per fabric).
    pub multi: bool,
    /// This host's families (`serve --host`), on the page of every fabric together.
    pub host: ArcSwapOption<String>,
    /// Pages made so far, of every fabric (for the stop message).
    pub sweeps: AtomicU64,
    /// The subnet each slot's port reaches: a port on a subnet another slot sweeps is
    /// swept once, by that slot.
    subnets: Mutex<Vec<Option<FabricId>>>,
    merged: Mutex<Option<Merged>>,
}

/// The page of every fabric together, and the pages it was made of.
type Merged = (Vec<Arc<Page>>, Arc<Page>);

impl Pages {
    pub fn new(names: Vec<String>, multi: bool) -> Pages {
        Pages {
            subnets: Mutex::new(vec![None; names.len()]),
            slots: names.into_iter().map(FabricSlot::new).collect(),
            multi,
            host: ArcSwapOption::empty(),
            sweeps: AtomicU64::new(0),
            merged: Mutex::new(None),
        }
    }

    /// Some sweeper has its management port open.
    pub fn any_port_open(&self) -> bool {
        (self.slots.iter()).any(|s| s.port_open.load(Ordering::SeqCst))
    }

    pub fn set_host_page(&self, text: String) {
        self.host.store(Some(Arc::new(text)));
    }

    /// The slots shown (not merged into another).
    pub fn shown(&self) -> impl Iterator<Item = &FabricSlot> {
        self.slots.iter().filter(|s| !locked(&s.state).merged)
    }

    /// Record that slot `slot`'s port reaches `subnet`; the name of the fabric another
    /// slot already sweeps there, if there is one (this slot then stands aside).
    pub fn claim_subnet(&self, slot: usize, subnet: &FabricId) -> Option<String> {
        let mut subnets = locked(&self.subnets);
        let other = (subnets.iter().enumerate().filter(|(i, _)| *i != slot))
            .find_map(|(_, s)| s.as_ref().filter(|s| s.same_subnet(subnet)))
            .map(|s| s.name.clone());
        if other.is_none() {
            subnets[slot] = Some(subnet.clone());
        }
        other
    }

    /// The planes-disagree findings of the fabric called `name` (planes of multi-plane HCA
    /// ports: one port GUID in several fabrics), from every fabric's last discovery, as
    /// `check -C all` reports them.
    pub fn planes_disagree(&self, name: &str, names: Option<&NameMap>) -> Vec<Finding> {
        let seen: Vec<SlotState> = self.slots.iter().map(FabricSlot::state_now).collect();
        let views: Vec<PlaneView> = (seen.iter())
            .filter_map(|s| Some((&s.name, s.discovery.as_ref()?)))
            .map(|(name, (fabric, hosts))| PlaneView::new(name, fabric, hosts))
            .collect();
        let mut found = findings::planes_disagree(&views, names).findings;
        found.retain(|f| f.fabric_name() == Some(name));
        found
    }

    /// `pages` as one page, made again only when one of them changed.
    pub fn merged(&self, pages: Vec<Arc<Page>>) -> std::io::Result<Arc<Page>> {
        let mut cached = locked(&self.merged);
        if let Some((made_of, page)) = cached.as_ref() {
            let same = made_of.len() == pages.len()
                && made_of.iter().zip(&pages).all(|(a, b)| Arc::ptr_eq(a, b));
            if same {
                return Ok(page.clone());
            }
        }
        let page = Arc::new(Page::merge(&pages)?);
        *cached = Some((pages, page.clone()));
        Ok(page)
    }

    /// /healthz: 200 when every fabric shown answers and its last sweep succeeded and is
    /// fresh, else 503; with several fabrics a line each.
    pub fn health(&self, max_age: Duration) -> (u16, String) {
        if self.slots.is_empty() {
            return match self.host.load().is_some() {
                true => (200, "ok (this host only)\n".to_string()),
                false => (503, "this host not read yet\n".to_string()),
            };
        }
        if !self.multi {
            return match self.slots[0].health(max_age) {
                Ok(()) => (200, "ok\n".to_string()),
                Err(why) => (503, format!("{why}\n")),
            };
        }
        let mut all_ok = true;
        let mut body = String::new();
        for slot in self.shown() {
            let health = slot.health(max_age);
            all_ok &= health.is_ok();
            let health = health.err().unwrap_or_else(|| "ok".to_string());
            let _ = writeln!(body, "{}: {health}", slot.name());
        }
        (if all_ok { 200 } else { 503 }, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_says_why_not_and_keeps_the_last_good_page() {
        let limit = Duration::from_secs(35);
        let pages = Pages::new(vec!["alpha".into(), "beta".into()], true);
        let slot = &pages.slots[0];
        let page = |age: Duration, failure: Option<&str>| {
            let mut p = Page::from_text("# HELP a A.\n# TYPE a gauge\na 1\n");
            p.finished = Instant::now() - age;
            p.failure = failure.map(String::from);
            p
        };
        assert_eq!(slot.health(limit), Err("no sweep finished yet".into()));
        slot.publish(page(Duration::from_secs(1), None));
        assert_eq!(slot.health(limit), Ok(()));
        slot.publish(page(Duration::from_secs(40), None));
        let why = slot.health(limit).unwrap_err();
        assert!(why.starts_with("last sweep is stale"), "{why}");
        // A failed sweep's page does not replace a good one.
        slot.publish(page(Duration::ZERO, Some("none of 4 ports answered")));
        let why = slot.health(limit).unwrap_err();
        assert!(
            why.ends_with("the last sweep reached no port: none of 4 ports answered; serving the last good sample, 40 s old"),
            "{why}"
        );
        slot.publish(page(Duration::from_secs(1), None));
        slot.set_down("lost the connection".into(), false);
        slot.set_down("the sweeper ended".into(), false);
        let why = slot.health(limit).unwrap_err();
        assert!(
            why.starts_with("fabric unreachable for 0 s: lost the connection; ")
                && why.ends_with("serving the last good sample, 1 s old"),
            "{why}"
        );
        slot.set_up();
        assert_eq!(slot.health(limit), Ok(()));
        assert!(slot.state_now().reason.is_none());

        pages.slots[1].set_down("no device".into(), false);
        let (code, body) = pages.health(limit);
        assert_eq!(code, 503);
        assert!(
            body.starts_with("alpha: ok\nbeta: fabric unreachable for 0 s: no device\n"),
            "{body}"
        );
        pages.slots[1].set_merged();
        assert_eq!(pages.health(limit), (200, "alpha: ok\n".into()));
        // A page that never finished a sweep, alone.
        let fresh = Pages::new(vec!["x".into()], false);
        assert_eq!(fresh.health(limit), (503, "no sweep finished yet\n".into()));
        // A failed first sweep: its page is kept, the fabric is down.
        fresh.slots[0].publish(page(Duration::ZERO, Some("no port with a LID")));
        assert!(fresh.slots[0].page.load().is_some());
        let merged = pages.merged(vec![slot.page.load_full().unwrap()]).unwrap();
        let again = pages.merged(vec![slot.page.load_full().unwrap()]).unwrap();
        assert!(Arc::ptr_eq(&merged, &again), "made once");
    }
}
