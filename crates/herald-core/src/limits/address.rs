//! Source addresses as rate-limit keys: an IPv4 address, or an IPv6 address's /64 (one host
//! usually holds a whole /64, so counting single IPv6 addresses would let it rotate through
//! billions), and CIDR blocks exempt from the address limits (a load balancer's address).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// What the per-address limits count by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressKey {
    /// An IPv4 address (an IPv4-mapped IPv6 address counts as its IPv4 address).
    V4(u32),
    /// The first 64 bits of an IPv6 address.
    V6Prefix(u64),
}

impl AddressKey {
    /// The key `ip` is counted under.
    pub fn of(ip: IpAddr) -> AddressKey {
        match ip {
            IpAddr::V4(v4) => AddressKey::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => AddressKey::V4(u32::from(v4)),
                None => AddressKey::V6Prefix((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

/// A CIDR block (`10.0.0.0/8`, `fd00::/8`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in the block (an IPv4-mapped IPv6 address is matched as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Why a CIDR block does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an address or CIDR block (e.g. \"10.0.0.0/8\", \"fd00::/8\", \"192.0.2.7\")")]
pub struct CidrParseError(String);

impl FromStr for Cidr {
    type Err = CidrParseError;

    fn from_str(text: &str) -> Result<Cidr, CidrParseError> {
        let bad = || CidrParseError(text.to_string());
        let t = text.trim();
        let (addr, prefix) = match t.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().map_err(|_| bad())?)),
            None => (t, None),
        };
        let network: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return Err(bad());
        }
        Ok(Cidr { network, prefix })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_contain_their_addresses() {
        let lan: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(lan.contains(ip("10.1.2.3")));
        assert!(lan.contains(ip("::ffff:10.1.2.3")));
        assert!(!lan.contains(ip("11.0.0.1")));
        assert!(!lan.contains(ip("fd00::1")));
        let one: Cidr = "127.0.0.2".parse().unwrap();
        assert!(one.contains(ip("127.0.0.2")) && !one.contains(ip("127.0.0.3")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        for bad in ["10.0.0.0/33", "fd00::/129", "host", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_bit_prefix() {
        assert_eq!(
            AddressKey::of(ip("2001:db8:1:2::1")),
            AddressKey::of(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            AddressKey::of(ip("2001:db8:1:2::1")),
            AddressKey::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            AddressKey::of(ip("::ffff:192.0.2.1")),
            AddressKey::of(ip("192.0.2.1"))
        );
    }
}
