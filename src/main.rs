//! `ibscope`: InfiniBand fabric discovery, diagnostics and live terminal UI.

use std::process::ExitCode;

use ibscope::cli::exit;

fn main() -> ExitCode {
    ibscope::output::exit_quietly_on_closed_stdout();
    let matches = match ibscope::app::parse(std::env::args_os()) {
        Ok(m) => m,
        Err(e) => e.exit(),
    };
    match ibscope::app::main_with(&matches) {
        Ok(code) => code,
        Err(e) if ibscope::output::is_closed_pipe(&e) => {
            ExitCode::from(ibscope::output::verdict_so_far())
        }
        Err(e) => {
            // A clap error (a config value clap rejects) prints its own usage text.
            if let Some(clap_error) = e.downcast_ref::<clap::Error>() {
                let _ = clap_error.print();
            } else {
                eprintln!("ibscope: error: {e:#}");
            }
            ExitCode::from(exit::ERROR)
        }
    }
}
