//! Where requests to URLs that tenants give may go: Web Push endpoints, JWKS key sets, and
//! next webhook endpoints. A tenant who could make Herald connect to `127.0.0.1:6379`, to a
//! private network or to a cloud's metadata service (`169.254.169.254`) would use the server
//! as a port scanner and a proxy into the operator's network (server-side request forgery).
//!
//! [`Destinations`] refuses every address that is not a public unicast one (loopback, private,
//! shared, link-local, unique-local, multicast, documentation, benchmarking, reserved, and the
//! IPv6 forms that embed one of those IPv4 addresses) unless the operator allowed its range
//! (`outbound_allow`). It is checked twice: when a URL is given (an IP literal, or a name that
//! resolves to a refused address, is refused then) and again when a connection is made
//! ([`Destinations::resolve`] answers only the allowed addresses of a name, so a name that
//! resolved to a public address at registration and to a private one later, DNS rebinding, is
//! not reached). Clients that use it never follow redirects.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

pub use ipnet::IpNet;

/// How long a name lookup may take when a URL is checked at registration.
const REGISTRATION_LOOKUP: Duration = Duration::from_secs(3);

/// The kind of address a refused destination has, as the refusal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// `0.0.0.0/8`, `::`: "this host".
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// RFC 6598 shared address space (carrier-grade NAT), `100.64/10`, where some clouds put
    /// their metadata services.
    Shared,
    /// `169.254/16` (the metadata service of most clouds), `fe80::/10`.
    LinkLocal,
    /// `fc00::/7` (`fd00:ec2::254` is a metadata address).
    UniqueLocal,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Documentation ranges: `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`.
    Documentation,
    /// `198.18/15`.
    Benchmarking,
    /// Reserved or special-purpose: `192.0.0/24`, `240/4`, `fec0::/10`, `2001::/23`, `100::/64`.
    Reserved,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Unspecified => "an unspecified",
            AddressClass::Loopback => "a loopback",
            AddressClass::Private => "a private",
            AddressClass::Shared => "a shared (carrier-grade NAT)",
            AddressClass::LinkLocal => "a link-local (cloud metadata)",
            AddressClass::UniqueLocal => "a unique-local",
            AddressClass::Multicast => "a multicast",
            AddressClass::Broadcast => "a broadcast",
            AddressClass::Documentation => "a documentation",
            AddressClass::Benchmarking => "a benchmarking",
            AddressClass::Reserved => "a reserved",
        })
    }
}

/// Why a destination may not be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// The host is, or resolves to, an address outside the public internet.
    #[error(
        "{host} is {class} address ({ip}); Herald connects only to public addresses unless the \
         operator allows the range (outbound_allow)"
    )]
    Refused {
        /// The host as the URL gives it.
        host: String,
        /// The refused address.
        ip: IpAddr,
        /// What kind of address it is.
        class: AddressClass,
    },
    /// The name could not be resolved.
    #[error("the name {host} could not be resolved: {message}")]
    Unresolved {
        /// The host as the URL gives it.
        host: String,
        /// What the resolver said.
        message: String,
    },
}

/// The operator's rule for outbound requests to tenant-given URLs: public addresses, and the
/// ranges the operator allows. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    allowed: Arc<[IpNet]>,
}

impl Destinations {
    /// Public addresses only.
    pub fn public_only() -> Self {
        Destinations::default()
    }

    /// Public addresses and `allowed` (a mock or a push service inside the operator's network).
    pub fn allowing(allowed: Vec<IpNet>) -> Self {
        Destinations {
            allowed: allowed.into(),
        }
    }

    /// The ranges allowed besides public addresses.
    pub fn allowed(&self) -> &[IpNet] {
        &self.allowed
    }

    /// Whether `ip`, given as `host`, may be reached.
    pub fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), DestinationError> {
        let Some(class) = classify(ip) else {
            return Ok(());
        };
        if self.allowed.iter().any(|net| net.contains(&ip)) {
            return Ok(());
        }
        Err(DestinationError::Refused {
            host: host.to_string(),
            ip,
            class,
        })
    }

    /// The addresses of `host` this rule lets a connection reach, for a connection made now:
    /// an IP literal is checked, a name is resolved and its refused addresses left out. An
    /// error when none is left (the refusal of the first refused address) or the name does not
    /// resolve.
    pub async fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> Result<Vec<SocketAddr>, DestinationError> {
        if let Some(ip) = literal_ip(host) {
            self.check_ip(host, ip)?;
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let found = tokio::net::lookup_host((unbracketed(host), port))
            .await
            .map_err(|e| DestinationError::Unresolved {
                host: host.to_string(),
                message: e.to_string(),
            })?;
        let mut allowed = Vec::new();
        let mut refusal = None;
        for addr in found {
            match self.check_ip(host, addr.ip()) {
                Ok(()) => allowed.push(addr),
                Err(e) => {
                    refusal.get_or_insert(e);
                }
            }
        }
        match (allowed.is_empty(), refusal) {
            (false, _) => Ok(allowed),
            (true, Some(refusal)) => Err(refusal),
            (true, None) => Err(DestinationError::Unresolved {
                host: host.to_string(),
                message: "no address".into(),
            }),
        }
    }

    /// Checks a host a tenant gives (at registration): an IP literal must be allowed, and a
    /// name must not resolve to any refused address. A name that does not resolve now (within
    /// a few seconds) is accepted: it is checked again at every connection.
    pub async fn check_host(&self, host: &str) -> Result<(), DestinationError> {
        if let Some(ip) = literal_ip(host) {
            return self.check_ip(host, ip);
        }
        let lookup = tokio::time::timeout(
            REGISTRATION_LOOKUP,
            tokio::net::lookup_host((unbracketed(host), 443)),
        );
        match lookup.await {
            Ok(Ok(found)) => {
                for addr in found {
                    self.check_ip(host, addr.ip())?;
                }
                Ok(())
            }
            Ok(Err(_)) | Err(_) => Ok(()),
        }
    }
}

/// The address `host` (as a URL gives it: an IPv6 address in brackets or not) is, when it is
/// an IP literal; `None` for a name.
pub fn literal_ip(host: &str) -> Option<IpAddr> {
    unbracketed(host).parse().ok()
}

/// `host` without the brackets of an IPv6 literal.
fn unbracketed(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// What kind of non-public address `ip` is; `None` for a public unicast address.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => AddressClass::Unspecified,
        (127, _, _) => AddressClass::Loopback,
        (10, _, _) | (192, 168, _) => AddressClass::Private,
        (172, b, _) if (16..32).contains(&b) => AddressClass::Private,
        (100, b, _) if (64..128).contains(&b) => AddressClass::Shared,
        (169, 254, _) => AddressClass::LinkLocal,
        (192, 0, 0) => AddressClass::Reserved,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => AddressClass::Documentation,
        (198, 18 | 19, _) => AddressClass::Benchmarking,
        (255, 255, 255) if ip == Ipv4Addr::BROADCAST => AddressClass::Broadcast,
        (224..=239, _, _) => AddressClass::Multicast,
        (240..=255, _, _) => AddressClass::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    if ip.is_unspecified() {
        return Some(AddressClass::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    let s = ip.segments();
    // Forms that carry an IPv4 address: mapped (::ffff:a.b.c.d), the old compatible form
    // (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) are as their IPv4 address is.
    let embedded = match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo]
        | [0, 0, 0, 0, 0, 0, hi, lo]
        | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => {
            Some(Ipv4Addr::from(((hi as u32) << 16) | lo as u32))
        }
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from(((hi as u32) << 16) | lo as u32)),
        _ => None,
    };
    if let Some(v4) = embedded {
        // A mapped or NAT64 form of a public address is as public as the address.
        return classify_v4(v4);
    }
    Some(match s[0] {
        0xfe80..=0xfebf => AddressClass::LinkLocal,
        0xfec0..=0xfeff => AddressClass::Reserved,
        0xfc00..=0xfdff => AddressClass::UniqueLocal,
        0xff00..=0xffff => AddressClass::Multicast,
        0x2001 if s[1] == 0x0db8 => AddressClass::Documentation,
        0x2001 if s[1] < 0x0200 => AddressClass::Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => AddressClass::Reserved,
        // Outside 2000::/3, the global unicast space, nothing is assigned to the internet.
        first if !(0x2000..=0x3fff).contains(&first) => AddressClass::Reserved,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(ip: &str) -> Option<AddressClass> {
        classify(ip.parse().unwrap())
    }

    #[test]
    fn classifies_what_is_not_public() {
        use AddressClass::*;
        for (ip, want) in [
            ("0.0.0.0", Unspecified),
            ("127.0.0.1", Loopback),
            ("127.255.0.9", Loopback),
            ("10.1.2.3", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("100.64.0.1", Shared),
            ("100.100.100.200", Shared),
            ("169.254.169.254", LinkLocal),
            ("192.0.0.8", Reserved),
            ("192.0.2.1", Documentation),
            ("198.18.0.1", Benchmarking),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.255", Broadcast),
            ("::", Unspecified),
            ("::1", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:169.254.169.254", LinkLocal),
            ("::127.0.0.1", Loopback),
            ("64:ff9b::10.0.0.1", Private),
            ("2002:a9fe:a9fe::1", LinkLocal),
            ("fe80::1", LinkLocal),
            ("fd00:ec2::254", UniqueLocal),
            ("fc00::1", UniqueLocal),
            ("ff02::1", Multicast),
            ("2001:db8::1", Documentation),
            ("fec0::1", Reserved),
            ("100::1", Reserved),
        ] {
            assert_eq!(class(ip), Some(want), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "8.8.8.8",
            "142.250.74.10",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2607:f8b0:4004:800::200e",
            "2a00:1450:4001:82b::200a",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn the_operator_allows_ranges() {
        let public = Destinations::public_only();
        let err = public
            .check_ip("169.254.169.254", "169.254.169.254".parse().unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("link-local"), "{err}");
        assert!(err.to_string().contains("outbound_allow"), "{err}");
        let allowing = Destinations::allowing(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(allowing.check_ip("x", "127.0.0.2".parse().unwrap()).is_ok());
        assert!(allowing.check_ip("x", "::1".parse().unwrap()).is_err());
        assert!(allowing.check_ip("x", "10.0.0.1".parse().unwrap()).is_err());
    }

    #[tokio::test]
    async fn resolve_leaves_out_refused_addresses() {
        let public = Destinations::public_only();
        let err = public.resolve("127.0.0.1", 443).await.unwrap_err();
        assert!(matches!(
            err,
            DestinationError::Refused {
                class: AddressClass::Loopback,
                ..
            }
        ));
        let err = public.resolve("[::1]", 443).await.unwrap_err();
        assert!(matches!(err, DestinationError::Refused { .. }), "{err}");
        // `localhost` resolves (from /etc/hosts) to loopback addresses only.
        let err = public.resolve("localhost", 443).await.unwrap_err();
        assert!(
            matches!(
                err,
                DestinationError::Refused {
                    class: AddressClass::Loopback,
                    ..
                }
            ),
            "{err}"
        );
        assert!(public.check_host("localhost").await.is_err());
        let allowing = Destinations::allowing(vec![
            "127.0.0.0/8".parse().unwrap(),
            "::1/128".parse().unwrap(),
        ]);
        let found = allowing.resolve("localhost", 8443).await.unwrap();
        assert!(found
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8443));
        assert!(allowing.check_host("localhost").await.is_ok());
    }
}
