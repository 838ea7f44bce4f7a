//! `ibscope`: InfiniBand fabric discovery, diagnostics and live terminal UI.

use std::process::ExitCode;

use ibscope::cli::exit;

fn main() -> ExitCode {
    let matches = ibscope::app::command().get_matches();
    match ibscope::app::main_with(&matches) {
        Ok(code) => code,
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
