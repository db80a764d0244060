// cflags: -O -g -C force-frame-pointers=no -Z unstable-options -C symbol-mangling-version=legacy
// Legacy mangling (`_ZN…17h<hash>E`), built without frame pointers: see
// rust_paths.inc.
include!("rust_paths.inc");
