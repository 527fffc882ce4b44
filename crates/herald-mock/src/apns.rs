//! Mock apns: being written.
