//! Reading the value types of types.rs from text (`FromStr`), and the
//! naming rules of heads and hooks: what can fail with an [`Error`].

use std::str::FromStr;

use crate::{Dir, Dirs, Error, PacketKind, MAX_NAME_LEN};

impl FromStr for Dir {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "in" | "In" | "IN" => Ok(Dir::In),
            "out" | "Out" | "OUT" => Ok(Dir::Out),
            _ => Err(Error::Parse {
                what: "direction",
                input: s.to_owned(),
                expected: "`in` or `out`",
            }),
        }
    }
}

impl FromStr for Dirs {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "none" => Ok(Dirs::NONE),
            "in" => Ok(Dirs::IN),
            "out" => Ok(Dirs::OUT),
            "in,out" | "out,in" | "both" | "inout" => Ok(Dirs::BOTH),
            _ => Err(Error::Parse {
                what: "direction set",
                input: s.to_owned(),
                expected: "`none`, `in`, `out` or `in,out`",
            }),
        }
    }
}

impl FromStr for PacketKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "ethernet" | "ether" | "eth" => Ok(PacketKind::Ethernet),
            "ipv4" | "ip4" | "inet" => Ok(PacketKind::Ipv4),
            "ipv6" | "ip6" | "inet6" => Ok(PacketKind::Ipv6),
            _ => Err(Error::Parse {
                what: "packet kind",
                input: s.to_owned(),
                expected: "`ethernet`, `ipv4` or `ipv6`",
            }),
        }
    }
}

/// Check a head or hook name: 1 to 64 bytes of `[A-Za-z0-9._:-]`.
///
/// # Errors
/// [`Error::InvalidName`] naming the rule that was broken.
pub fn validate_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_NAME_LEN {
        "it is longer than 64 bytes"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
    {
        "only letters, digits and `._:-` are allowed"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: name.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FailMode, Verdict};

    #[test]
    fn names_are_validated() {
        assert!(validate_name("acl:edge").is_ok());
        assert!(validate_name("veth0.100_x-y").is_ok());
        assert!(matches!(validate_name(""), Err(Error::InvalidName { .. })));
        assert!(validate_name(&"a".repeat(64)).is_ok());
        let e = validate_name(&"a".repeat(65)).unwrap_err();
        assert!(e.to_string().contains("longer than 64"), "{e}");
        let e = validate_name("bad name").unwrap_err();
        assert!(e.to_string().contains("`bad name`"), "{e}");
        assert!(validate_name("ümlaut").is_err());
    }

    #[test]
    fn dirs_and_kinds_parse_and_print() {
        assert_eq!("in".parse::<Dir>().unwrap(), Dir::In);
        assert!("up".parse::<Dir>().is_err());
        assert_eq!("in,out".parse::<Dirs>().unwrap(), Dirs::BOTH);
        assert_eq!(
            Dirs::BOTH.iter().collect::<Vec<_>>(),
            vec![Dir::In, Dir::Out]
        );
        assert!(!Dirs::IN.contains(Dir::Out));
        assert_eq!(Dirs::BOTH.to_string(), "in,out");
        assert_eq!("IPv6".parse::<PacketKind>().unwrap(), PacketKind::Ipv6);
        assert!("atm".parse::<PacketKind>().is_err());
        assert_eq!(FailMode::Closed.verdict(), Verdict::Dropped);
    }
}
