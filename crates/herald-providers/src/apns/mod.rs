//! APNs: being written.
