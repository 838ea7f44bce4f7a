//! Fixtures shared by the unit tests of the parser, the writer and the comparison.

use proptest::prelude::*;

/// `ibnetdiscover` output captured under ibsim on examples/fabrics/net with OpenSM.
pub const NET_IBND: &str = "#
# Topology file: generated on Wed Dec  2 13:21:43 2026
#
# Initiated from node 0000000000200000 port 0000000000200000

vendid=0x0
devid=0x0
sysimgguid=0x200001
switchguid=0x200001(200001)
Switch\t8 \"S-0000000000200001\"\t\t# \"Switch2\" base port 0 lid 3 lmc 0
[3]\t\"S-0000000000200000\"[3]\t\t# \"Switch1\" lid 1 4xSDR
[4]\t\"S-0000000000200000\"[4]\t\t# \"Switch1\" lid 1 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x200000
switchguid=0x200000(200000)
Switch\t8 \"S-0000000000200000\"\t\t# \"Switch1\" base port 0 lid 1 lmc 0
[1]\t\"H-0000000000100000\"[1](100001) \t\t# \"Hca1\" lid 2 4xSDR
[2]\t\"H-0000000000100003\"[2](100005) \t\t# \"Hca2\" lid 4 4xSDR
[3]\t\"S-0000000000200001\"[3]\t\t# \"Switch2\" lid 3 4xSDR
[4]\t\"S-0000000000200001\"[4]\t\t# \"Switch2\" lid 3 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100003
caguid=0x100003
Ca\t2 \"H-0000000000100003\"\t\t# \"Hca2\"
[2](100005) \t\"S-0000000000200000\"[2]\t\t# lid 4 lmc 0 \"Switch1\" lid 1 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100000
caguid=0x100000
Ca\t2 \"H-0000000000100000\"\t\t# \"Hca1\"
[1](100001) \t\"S-0000000000200000\"[1]\t\t# lid 2 lmc 0 \"Switch1\" lid 1 4xSDR
";

/// examples/fabrics/net (ibsim's example) without its header comment.
pub const NET_SIM: &str = "Switch\t8 \"Switch1\"
[1]\t\"Hca1\"[1]
[2]\t\"Hca2\"[2]
[3]\t\"Switch2\"[3]
[4]\t\"Switch2\"[4]

Switch 8 \"Switch2\"
[3]\t\"Switch1\"[3]
[4]\t\"Switch1\"[4]

Hca\t2 \"Hca1\"
[1]\t\"Switch1\"[1]

Hca\t2 \"Hca2\"
[2]\t\"Switch1\"[2]
";

/// Lines an ibnetdiscover file or ibsim topology may hold, valid and not.
pub fn ibnd_fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Switch 4 \"a\"".to_string()),
        Just("Ca 2 \"b\" # \"d\"".to_string()),
        Just("[1] \"b\"[1] # \"x\" lid 3 4xQDR".to_string()),
        Just("[2](10) \"a\"[2] # lid 1 lmc 0 \"y\" lid 2 12xHDR".to_string()),
        Just("switchguid=0x10".to_string()),
        Just("caguid+3".to_string()),
        Just(String::new()),
        Just("# c".to_string()),
        "[\\[\\]\"#()=0-9a-zA-Z x+@\t\u{1b}é]{0,40}",
    ]
}
