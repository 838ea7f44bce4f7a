//! The Prometheus exporter behind `ibscope serve`: a sweeper thread per fabric keeps that
//! fabric's page, rendered and compressed once per sweep, in memory; HTTP answers from
//! there, so a scrape never waits on a fabric.

pub mod http;
pub mod page;
pub mod server;
pub mod slots;
pub mod sweeper;
pub mod web;

/// A lock whose holder panicked is still the data: every writer leaves it whole.
fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
