//! PostgreSQL's own behaviour (placeholder).
