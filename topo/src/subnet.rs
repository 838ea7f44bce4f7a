//! Which subnet a local port reaches, and one sweep per subnet when a host has several
//! ports on it.
//!
//! A subnet is known by its prefix (every port's GidPrefix, IBA 14.2.5.6) and its master
//! SM (SMInfo's GUID, IBA 14.2.5.13): two ports whose PortInfo names the same prefix and
//! whose SM LID answers with the same GUID are on one subnet. A port whose SM does not
//! answer has no identity and is never merged with another.

use ibscope_mad::attr::{PortInfo, SmInfo};
use ibscope_mad::engine::Request;
use ibscope_mad::smp::{DrPath, SmpRoute};

use crate::discover::SmpExecutor;
use crate::model::FabricId;

/// Read the identity of the subnet `local_port` (of the executor's own node) is on: its
/// PortInfo over the empty directed route, then SMInfo of the master SM it names. Two MADs.
/// The prefix alone when no SM answers (no SM LID yet, or it is down).
pub fn identify<E: SmpExecutor>(exec: &mut E, local_port: u8, name: &str) -> FabricId {
    let mut id = FabricId::named(name);
    let route = SmpRoute::Directed(DrPath::local());
    let mut port_info = None;
    exec.execute(
        vec![((), Request::get::<PortInfo>(&route, u32::from(local_port)))],
        &mut |(), r, _| port_info = r.ok().and_then(|r| r.decode::<PortInfo>().ok()),
    );
    let Some(info) = port_info else {
        return id;
    };
    id.subnet_prefix = Some(info.gid_prefix);
    if info.master_sm_lid == 0 {
        return id;
    }
    let mut sm = None;
    exec.execute(
        vec![(
            (),
            Request::get::<SmInfo>(&SmpRoute::Lid(info.master_sm_lid), 0),
        )],
        &mut |(), r, _| sm = r.ok().and_then(|r| r.decode::<SmInfo>().ok()),
    );
    id.sm_guid = sm.map(|s| s.guid);
    id
}

/// What [`one_per_subnet`] decided for one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubnetChoice {
    /// Swept: the first port (in the order given) on its subnet, or one of unknown identity.
    Keep,
    /// Reaches the same subnet as the port at this index, which is swept instead.
    SameAs(usize),
}

/// One port per subnet: the first of each identity in `ids` is kept, later ports on the
/// same subnet are not swept again. Ports of unknown identity are all kept.
pub fn one_per_subnet(ids: &[FabricId]) -> Vec<SubnetChoice> {
    let mut out = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let first = ids[..i]
            .iter()
            .position(|earlier| earlier.same_subnet(id))
            .map(|j| match out[j] {
                SubnetChoice::SameAs(k) => k,
                SubnetChoice::Keep => j,
            });
        out.push(first.map_or(SubnetChoice::Keep, SubnetChoice::SameAs));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::OnDone;
    use ibscope_mad::attr::SmState;
    use ibscope_mad::attribute::Attribute;
    use ibscope_mad::engine::{MadError, Response};
    use ibscope_mad::header::MadHeader;
    use ibscope_mad::smp::MadView;

    fn id(name: &str, prefix: Option<u64>, sm: Option<u64>) -> FabricId {
        FabricId {
            name: name.into(),
            subnet_prefix: prefix,
            sm_guid: sm,
        }
    }

    #[test]
    fn ports_on_one_subnet_are_swept_once() {
        let ids = [
            id("mlx5_0:1", Some(0xfe80 << 48), Some(1)),
            id("mlx5_1:1", Some(0xfe80 << 48), Some(2)),
            id("mlx5_2:1", Some(0xfe80 << 48), Some(1)),
            id("mlx5_3:1", None, None),
            id("mlx5_4:1", None, None),
            // Same SM GUID, other prefix: a different subnet (an SM cannot be on two).
            id("mlx5_5:1", Some(0xfec0 << 48), Some(1)),
            id("mlx5_6:1", Some(0xfe80 << 48), Some(2)),
            // The prefix alone (no master SM answered) is not an identity.
            id("mlx5_7:1", Some(0xfe80 << 48), None),
            id("mlx5_8:1", Some(0xfe80 << 48), None),
        ];
        assert_eq!(
            one_per_subnet(&ids),
            vec![
                SubnetChoice::Keep,
                SubnetChoice::Keep,
                SubnetChoice::SameAs(0),
                SubnetChoice::Keep,
                SubnetChoice::Keep,
                SubnetChoice::Keep,
                SubnetChoice::SameAs(1),
                SubnetChoice::Keep,
                SubnetChoice::Keep,
            ]
        );
        assert_eq!(one_per_subnet(&[]), vec![]);
        assert_eq!(
            ids[0].identity_text(),
            "subnet 0xfe80000000000000, SM 0x0000000000000001"
        );
        assert_eq!(ids[3].identity_text(), "");
    }

    /// Answers PortInfo with a prefix and an SM LID, SMInfo with a GUID (or not at all).
    struct Fake {
        prefix: u64,
        sm_lid: u16,
        sm_guid: Option<u64>,
        asked: Vec<(u16, SmpRoute)>,
    }

    impl SmpExecutor for Fake {
        fn execute<T, R: Into<ibscope_mad::engine::PackedRequest>>(
            &mut self,
            requests: impl IntoIterator<Item = (T, R)>,
            on_done: &mut OnDone<'_, T>,
        ) {
            for (t, req) in requests {
                let req = req.into().to_request();
                let view = MadView::parse(&req.mad[..]).unwrap();
                let attr = view.header.attribute_id;
                let route = match &req.dest {
                    ibscope_mad::engine::Dest::Smp(r) => r.clone(),
                    other => panic!("{other:?}"),
                };
                self.asked.push((attr, route));
                let mut reply = req.mad;
                MadHeader::response.write(&mut reply, &true).unwrap();
                let result = if attr == PortInfo::ID {
                    let info = PortInfo {
                        gid_prefix: self.prefix,
                        master_sm_lid: self.sm_lid,
                        ..Default::default()
                    };
                    info.encode_into(&mut reply[64..]).unwrap();
                    Ok(Response::from_mad(reply))
                } else {
                    match self.sm_guid {
                        Some(guid) => {
                            let sm = SmInfo {
                                guid,
                                sm_state: SmState::Master.code(),
                                ..Default::default()
                            };
                            sm.encode_into(&mut reply[64..]).unwrap();
                            Ok(Response::from_mad(reply))
                        }
                        None => Err(MadError::Timeout { attempts: 4 }),
                    }
                };
                on_done(t, result, &mut ibscope_mad::engine::FollowUps::new());
            }
        }
        fn mads_sent(&self) -> u64 {
            self.asked.len() as u64
        }
    }

    #[test]
    fn identity_from_port_info_and_the_sms_sminfo() {
        let mut f = Fake {
            prefix: 0xfe80_0000_0000_0000,
            sm_lid: 7,
            sm_guid: Some(0x0002_c903_0000_0001),
            asked: Vec::new(),
        };
        let got = identify(&mut f, 2, "storage");
        assert_eq!(
            got,
            id(
                "storage",
                Some(0xfe80_0000_0000_0000),
                Some(0x0002_c903_0000_0001)
            )
        );
        assert_eq!(f.asked.len(), 2);
        assert_eq!(f.asked[0].1, SmpRoute::Directed(DrPath::local()));
        assert_eq!(f.asked[1], (SmInfo::ID, SmpRoute::Lid(7)));

        f.sm_guid = None;
        assert_eq!(
            identify(&mut f, 1, "x"),
            id("x", Some(0xfe80_0000_0000_0000), None)
        );
        f.sm_lid = 0;
        f.asked.clear();
        assert_eq!(
            identify(&mut f, 1, "x"),
            id("x", Some(0xfe80_0000_0000_0000), None)
        );
        assert_eq!(f.asked.len(), 1, "no SMInfo without an SM LID");
    }
}
