//! Mock webpush: being written.
