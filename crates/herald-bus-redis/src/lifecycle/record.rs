//! A live connection as a node records it in Redis (`conns:NODE`), so that the node that claims
//! it after its node was lost can say who left: id, app, transport, `sub` and device, each
//! field length-prefixed (`LEN:TEXT`; a missing `sub` or device is `-`), since a `sub` may hold
//! any character.

use herald_core::lifecycle::{Connection, ConnectionId, Transport};
use herald_core::tenant::AppId;

fn field(out: &mut String, text: Option<&str>) {
    match text {
        Some(text) => {
            out.push_str(&text.len().to_string());
            out.push(':');
            out.push_str(text);
        }
        None => out.push('-'),
    }
}

/// The connection's id as the record's hash field names it.
pub(super) fn id(connection: &ConnectionId) -> String {
    connection.to_string()
}

/// The record of `connection`.
pub(super) fn encode(connection: &Connection) -> String {
    let mut out = String::new();
    field(&mut out, Some(&id(&connection.id)));
    field(&mut out, Some(connection.app.as_str()));
    field(&mut out, Some(connection.transport.as_str()));
    field(&mut out, connection.sub.as_deref());
    field(&mut out, connection.device.as_deref());
    out
}

/// Reads one field off the front of `rest`.
fn next<'a>(rest: &mut &'a str) -> Option<Option<&'a str>> {
    if let Some(after) = rest.strip_prefix('-') {
        *rest = after;
        return Some(None);
    }
    let (len, after) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let text = after.get(..len)?;
    *rest = &after[len..];
    Some(Some(text))
}

/// The connection a record names; `None` if it is not one.
pub(super) fn decode(record: &str) -> Option<Connection> {
    let mut rest = record;
    let id = next(&mut rest)??;
    let app = next(&mut rest)??;
    let transport = next(&mut rest)??;
    let sub = next(&mut rest)?;
    let device = next(&mut rest)?;
    if !rest.is_empty() {
        return None;
    }
    let (node, seq) = id.split_once('-')?;
    Some(Connection {
        id: ConnectionId {
            node: u64::from_str_radix(node, 16).ok()?,
            seq: seq.parse().ok()?,
        },
        app: AppId::parse(app).ok()?,
        sub: sub.map(Into::into),
        device: device.map(Into::into),
        transport: Transport::parse(transport)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_whatever_its_sub_holds() {
        let connection = Connection {
            id: ConnectionId {
                node: 0xfeed,
                seq: 42,
            },
            app: AppId::parse("shop").unwrap(),
            sub: Some("a:b-7:-\n".into()),
            device: None,
            transport: Transport::LongPoll,
        };
        let record = encode(&connection);
        assert_eq!(decode(&record), Some(connection.clone()));
        let phone = Connection {
            device: Some("phone".into()),
            sub: None,
            ..connection
        };
        assert_eq!(decode(&encode(&phone)), Some(phone));
        assert_eq!(decode("3:abc"), None);
        assert_eq!(decode(&format!("{record}x")), None);
    }
}
