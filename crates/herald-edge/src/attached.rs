//! What a protocol crate keeps once per server beside the edge ([`Attached`]): herald-mqtt's
//! sessions. A parked connection's record reaches it through the edge its parked session
//! already points to, rather than keeping a pointer of its own (eight bytes of every idle
//! MQTT connection's record: docs/design/idle-connections.md, "Session 37").

use std::any::Any;
use std::sync::{Arc, RwLock, Weak};

/// Values attached to an edge, one per type, held weakly: what is attached usually holds the
/// edge itself (a task with a clone of it), so the edge must not keep it alive; it lives as
/// long as its owner (the server) keeps it.
#[derive(Default)]
pub struct Attached(RwLock<Vec<Weak<dyn Any + Send + Sync>>>);

impl Attached {
    /// Attaches `value`, in place of any value of its type attached before.
    pub fn attach<T: Any + Send + Sync>(&self, value: &Arc<T>) {
        let erased: Arc<dyn Any + Send + Sync> = value.clone();
        let weak = Arc::downgrade(&erased);
        let mut values = self.0.write().unwrap_or_else(|e| e.into_inner());
        // Gone values and the one of this type make room.
        values.retain(|v| v.upgrade().is_some_and(|v| !v.is::<T>()));
        values.push(weak);
    }

    /// The value of type `T` attached, if one is and its owner still holds it.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let values = self.0.read().unwrap_or_else(|e| e.into_inner());
        values
            .iter()
            .find_map(|v| v.upgrade().and_then(|v| v.downcast::<T>().ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_found_by_its_type_while_its_owner_holds_it() {
        let attached = Attached::default();
        assert!(attached.get::<String>().is_none());
        let (text, number) = (Arc::new(String::from("sessions")), Arc::new(7u32));
        attached.attach(&text);
        attached.attach(&number);
        assert!(Arc::ptr_eq(&attached.get::<String>().unwrap(), &text));
        assert_eq!(*attached.get::<u32>().unwrap(), 7);
        assert!(attached.get::<u64>().is_none());
        // Another of the same type replaces it.
        let other = Arc::new(String::from("other"));
        attached.attach(&other);
        assert!(Arc::ptr_eq(&attached.get::<String>().unwrap(), &other));
        // Held weakly: gone with its owner's last pointer.
        drop(other);
        assert!(attached.get::<String>().is_none());
        assert_eq!(Arc::strong_count(&text), 1, "not kept by the edge");
        assert_eq!(*attached.get::<u32>().unwrap(), 7);
    }
}
