//! FCM HTTP v1: being written.
