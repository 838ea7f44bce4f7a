//! What the engine sends and gets back: a [`Request`] (a MAD and its destination) built for
//! a typed attribute, and a [`Response`] decoded as one.

use crate::attribute::{payload, Attribute, Class, SubnAdm};
use crate::error::DecodeError;
use crate::header::{method, MadHeader, MAD_SIZE};
use crate::sa::SaFrame;
use crate::smp::MadView;
use crate::umad::Dest;

/// One MAD to send and where to. The TID is filled in by the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub mad: [u8; MAD_SIZE],
    pub dest: Dest,
}

/// Who a request for attribute `A` goes to: an `SmpRoute` for SMPs, a LID for GMPs.
pub type Target<A> = <<A as Attribute>::Class as Class>::Target;

impl Request {
    /// `method` on attribute `A` (modifier `modifier`) to `target`, with `payload` (an
    /// encoded `A`, cut to the class's data area) as the attribute.
    pub fn new<A: Attribute>(
        target: &Target<A>,
        method: u8,
        modifier: u32,
        payload: &[u8],
    ) -> Self {
        let (mad, dest) = A::Class::frame(target, method, A::ID, modifier, payload);
        Request { mad, dest }
    }

    /// Get(`A`): SubnGet, PerfMgt Get or SubnAdmGet by the attribute's class.
    pub fn get<A: Attribute>(target: &Target<A>, modifier: u32) -> Self {
        Self::new::<A>(target, method::GET, modifier, &[])
    }

    /// Get(`A`) carrying `template` as the attribute: a PMA reads PortSelect and
    /// CounterSelect from it.
    pub fn get_with<A: Attribute>(target: &Target<A>, modifier: u32, template: &A) -> Self {
        Self::with_value(target, method::GET, modifier, template)
    }

    /// Set(`A`) to `value`.
    pub fn set<A: Attribute>(target: &Target<A>, modifier: u32, value: &A) -> Self {
        Self::with_value(target, method::SET, modifier, value)
    }

    /// SubnAdmGet(`R`) to the SA at `sm_lid`: the record that matches `template` in the
    /// fields `component_mask` selects (see [`crate::sa::comp_mask`]).
    pub fn sa_get<R: Attribute<Class = SubnAdm>>(
        sm_lid: u16,
        component_mask: u64,
        template: &R,
    ) -> Self {
        Self::sa_query(method::GET, sm_lid, component_mask, template)
    }

    /// SubnAdmGetTable(`R`) to the SA at `sm_lid`: every record that matches `template` in
    /// the fields `component_mask` selects (0: the whole table). The reply may take many
    /// MADs (RMPP); read it with [`crate::sa::table`] over [`Response::message`].
    pub fn sa_get_table<R: Attribute<Class = SubnAdm>>(
        sm_lid: u16,
        component_mask: u64,
        template: &R,
    ) -> Self {
        Self::sa_query(method::GET_TABLE, sm_lid, component_mask, template)
    }

    fn sa_query<R: Attribute<Class = SubnAdm>>(
        method: u8,
        sm_lid: u16,
        component_mask: u64,
        template: &R,
    ) -> Self {
        let mut request = Self::with_value(&sm_lid, method, 0, template);
        // A MAD always holds the SA header.
        let _ = SaFrame::component_mask.write(&mut request.mad, &component_mask);
        request
    }

    /// `method` on attribute `A` to `target`, carrying `value` as the attribute.
    pub fn with_value<A: Attribute>(
        target: &Target<A>,
        method: u8,
        modifier: u32,
        value: &A,
    ) -> Self {
        let mut request = Self::new::<A>(target, method, modifier, &[]);
        let encoded = <A::Class as Class>::PAYLOAD
            .bytes_mut(&mut request.mad)
            .and_then(|area| value.encode_into(area));
        // Only a field holding more bits than its slot fails, as for `to_bytes`.
        if let Err(e) = encoded {
            tracing::warn!("encoding {}: {e}", A::NAME);
        }
        request
    }

    /// The request's common header.
    pub fn header(&self) -> Result<MadHeader, DecodeError> {
        MadHeader::decode(&self.mad)
    }

    /// The request's attribute payload decoded as `A` (a Get's template).
    pub fn decode<A: Attribute>(&self) -> Result<A, DecodeError> {
        A::decode(self.payload::<A::Class>())
    }

    /// The attribute payload of a request of class `C`.
    pub fn payload<C: Class>(&self) -> &[u8] {
        payload::<C>(&self.mad)
    }

    pub fn mgmt_class(&self) -> u8 {
        MadHeader::mgmt_class.read(&self.mad).unwrap_or(0)
    }

    pub fn class_version(&self) -> u8 {
        MadHeader::class_version.read(&self.mad).unwrap_or(0)
    }
}

/// A successful reply: the MAD, and how much of it the transport delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The first 256 bytes, zero-padded when `len` is shorter. Held inline: a reply is
    /// moved a few times on its way to the caller, and an allocation per reply cost more
    /// than those copies (at 2.5M replies a sweep).
    pub mad: [u8; MAD_SIZE],
    /// Bytes delivered (see [`crate::umad::Received::len`]): 256 for a whole MAD, fewer for
    /// a short one (the SA's replies under the simulator), more for a reassembled RMPP
    /// transfer.
    pub len: usize,
    /// The bytes after the first 256 of a reassembled RMPP transfer; empty otherwise.
    pub tail: Vec<u8>,
}

impl Response {
    /// A reply of one whole MAD.
    pub fn from_mad(mad: [u8; MAD_SIZE]) -> Response {
        Response {
            mad,
            len: MAD_SIZE,
            tail: Vec::new(),
        }
    }

    /// The reply as delivered: `len` bytes, the first MAD and then the tail of a
    /// reassembled RMPP transfer.
    pub fn message(&self) -> Vec<u8> {
        let head = self.len.min(MAD_SIZE);
        let mut bytes = Vec::with_capacity(head + self.tail.len());
        bytes.extend_from_slice(&self.mad[..head]);
        bytes.extend_from_slice(&self.tail);
        bytes
    }

    pub fn view(&self) -> Result<MadView<'_>, DecodeError> {
        MadView::parse(&self.mad[..])
    }
    pub fn header(&self) -> Result<MadHeader, DecodeError> {
        MadHeader::decode(&self.mad[..])
    }
    /// The reply's attribute decoded as `A` (the attribute asked for).
    pub fn decode<A: Attribute>(&self) -> Result<A, DecodeError> {
        A::decode(self.payload::<A::Class>())
    }
    /// The attribute payload of a reply of class `C`.
    pub fn payload<C: Class>(&self) -> &[u8] {
        payload::<C>(&self.mad[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::{NodeInfo, PortCounters, PortInfo};
    use crate::header::class;
    use crate::sa::{comp_mask, NodeRecord};
    use crate::smp::SmpRoute;

    #[test]
    fn request_builders_set_class_and_destination() {
        let select = PortCounters {
            port_select: 1,
            ..Default::default()
        };
        let p = Request::get_with(&7, 0, &select);
        assert_eq!(p.mgmt_class(), class::PERF);
        assert_eq!(
            p.dest,
            Dest::Gsi {
                lid: 7,
                qpn: 1,
                qkey: 0x8001_0000
            }
        );
        assert_eq!(p.header().unwrap().attribute_id, 0x0012);
        assert_eq!(p.decode::<PortCounters>().unwrap().port_select, 1);
        assert_eq!(&p.mad[64..66], &[0, 1]);
        let template = NodeRecord {
            lid: 5,
            ..Default::default()
        };
        let s = Request::sa_get(1, comp_mask::node_record::LID, &template);
        assert_eq!((s.mgmt_class(), s.class_version()), (class::SUBN_ADM, 2));
        assert_eq!(s.header().unwrap().attribute_id, 0x0011);
        assert_eq!(&s.mad[48..58], &[0, 0, 0, 0, 0, 0, 0, 1, 0, 5]);
        let info = PortInfo {
            lid: 0x0102,
            ..Default::default()
        };
        let set = Request::set(&SmpRoute::Lid(3), 1, &info);
        assert_eq!(set.header().unwrap().method, method::SET);
        assert_eq!(set.header().unwrap().attribute_modifier, 1);
        assert_eq!(&set.mad[80..82], &[1, 2]);
        assert_eq!(set.dest, Dest::Smp(SmpRoute::Lid(3)));
        let get = Request::get::<NodeInfo>(&SmpRoute::Lid(3), 0);
        assert_eq!(get.mgmt_class(), class::SMI_LID);
        assert_eq!(get.header().unwrap().attribute_id, 0x0011);
    }
}
