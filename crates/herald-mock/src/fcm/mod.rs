//! Mock fcm: being written.
