//! Web Push: being written.
