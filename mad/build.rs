// Link libibumad through pkg-config so distributions with non-standard prefixes work.
fn main() {
    if pkg_config::Config::new().probe("libibumad").is_err() {
        // Debian's libibumad-dev ships the .pc file; fall back to the plain name so a
        // hand-installed library still links.
        println!("cargo:rustc-link-lib=ibumad");
    }
}
