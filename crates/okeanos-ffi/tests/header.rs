//! bindings/c/okeanos.h is what cbindgen makes of src/lib.rs: a change to the ABI that did not
//! regenerate the header fails here. `OKEANOS_BLESS=1` writes the header instead.

use std::path::Path;

#[test]
fn the_header_matches_the_abi() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new().with_crate(crate_dir).with_config(config).generate().expect("cbindgen could not read src/lib.rs").write(&mut made);
    let path = crate_dir.join("../../bindings/c/okeanos.h");
    if std::env::var_os("OKEANOS_BLESS").is_some() {
        std::fs::write(&path, &made).unwrap();
        return;
    }
    let have = std::fs::read(&path).unwrap_or_default();
    assert!(
        have == made,
        "bindings/c/okeanos.h differs from what cbindgen makes of crates/okeanos-ffi/src/lib.rs: run `OKEANOS_BLESS=1 cargo test -p okeanos-ffi --test header` and commit the header"
    );
}
