// cflags: -O -g -C force-frame-pointers=no -C symbol-mangling-version=v0
// v0 mangling, built without frame pointers: see rust_paths.inc.
include!("rust_paths.inc");
