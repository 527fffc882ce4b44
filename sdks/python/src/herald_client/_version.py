"""The package version: always the Herald workspace version (`/Cargo.toml`), checked by the tests."""

__version__ = "0.1.0"
