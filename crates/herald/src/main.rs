//! The `herald` binary: command line ([`cli`]; `herald publish`, `push` and `subscribe` talk to
//! a server through `herald-client`), and `herald serve` ([`serve`]), which turns the layered
//! configuration ([`config`], the `herald-config` crate) into the settings of the server
//! library (`herald-server`) and starts it.
#![forbid(unsafe_code)]

mod allocator;
mod cli;
mod serve;

use herald_config as config;

/// jemalloc rather than the system's malloc: it gives the memory of freed connection tasks back
/// to the system (glibc keeps it), so the server's RSS falls when idle connections park
/// (docs/design/idle-connections.md). Its settings are built in (.cargo/config.toml).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let invocation = match cli::prepare() {
        Ok(invocation) => invocation,
        Err(code) => return code,
    };
    // `#[tokio::main]`'s runtime, sized by `serve`'s `workers`, with what the allocator needs
    // when its threads go quiet.
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime
        .enable_all()
        .thread_keep_alive(allocator::BLOCKING_THREAD_KEEP_ALIVE)
        .on_thread_park(allocator::worker_goes_idle);
    if let Some(workers) = invocation.workers() {
        runtime.worker_threads(workers);
    }
    let runtime = runtime.build().expect("Failed building the Runtime");
    runtime.block_on(cli::main(invocation))
}
