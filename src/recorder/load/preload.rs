//! What is made before the object loads, on threads of their own.

use std::mem::MaybeUninit;
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{AsRawLibbpf, MapHandle, MapType, OpenMapMut};

use super::cut_btf::CutBtf;
use super::memory;
use super::{tracefs, KernelConfig, Settings, KERNEL_BTF};
use crate::bpf::types::defaults;
use crate::bpf::{OpenProctraceSkel, ProctraceSkelBuilder};
use crate::event::BufferKind;
use crate::recorder::error::RecordError;

/// What is made before the object loads, on two threads at once, a few
/// milliseconds each: the kernel's BTF cut down to what the program's
/// relocations can use (see [`CutBtf`]; `None`, and libbpf reads all of it,
/// where that fails or `--btf` names another); the two largest maps (the
/// ring's pages are charged to the memory cgroup one by one), which the
/// object then reuses; and, where they are the hook to try first, the
/// syscall tracepoints' ids (tracefs may have to be mounted). A ring the
/// kernel refuses for want of memory ends it: libbpf would only try again
/// and report the failure without saying which map or why.
#[derive(Default)]
pub(super) struct Preload {
    pub(super) cut: Option<CutBtf>,
    pub(super) ring: Option<MapHandle>,
    pub(super) tracked: Option<MapHandle>,
    pub(super) tracepoint_ids: Option<[u64; 2]>,
}

impl Preload {
    /// What was made ahead, for the log.
    pub(super) fn describe(&self) -> String {
        match &self.cut {
            Some(cut) if cut.kept => format!(
                "the kernel's BTF cut to {} bytes, kept from an earlier run",
                cut.len()
            ),
            Some(cut) => format!("the kernel's BTF cut to {} bytes", cut.len()),
            None => "no cut of the kernel's BTF".into(),
        }
    }

    pub(super) fn make(
        config: &KernelConfig,
        settings: &Settings,
        tracepoints: bool,
    ) -> Result<Preload, RecordError> {
        // The program's own BTF and map definitions are only reachable
        // through an opened object, and the BTF libbpf relocates against is
        // fixed when one opens: this one is opened to be read (half a
        // millisecond).
        let mut storage = MaybeUninit::uninit();
        let Ok(open) = ProctraceSkelBuilder::default().open(&mut storage) else {
            return Ok(Preload::default());
        };
        let local = config.btf.is_none().then(|| local_btf(&open)).flatten();
        std::thread::scope(|scope| {
            // Each is a millisecond of zeroed pages: the ring's, and the
            // tracked map's buckets.
            let events = MapSpec::like(&open.maps.events, MapType::RingBuf, config.ring_bytes, 0);
            let mut making =
                (settings.buffer == BufferKind::Ring).then(|| scope.spawn(move || events.create()));
            // A ring larger than any default may be more than the memory
            // left: it is made before anything else allocates, as the
            // allocations of a thread beside it could wake the OOM killer
            // while it holds the memory it then gives back.
            let alone = making
                .take_if(|_| config.ring_bytes > defaults::MAX_DEFAULT_RING_MIB.0 << 20)
                .map(|ring| ring.join());
            let cutting =
                local.map(|local| scope.spawn(move || CutBtf::new(Path::new(KERNEL_BTF), &local)));
            // Beside the maps: where tracefs is not mounted, this waits for
            // the thread that mounts it.
            let reading = tracepoints.then(|| scope.spawn(tracefs::syscall_exit_ids));
            let tracked = &open.maps.tracked;
            let tracked = MapSpec::like(
                tracked,
                tracked.map_type(),
                config.max_processes,
                settings.tracked_flags,
            )
            .create()
            .ok();
            let ring = match alone.or_else(|| making.map(|ring| ring.join())) {
                Some(Ok(Ok(ring))) => Some(ring),
                Some(Ok(Err(err))) => match memory::ring_refused(&err, config.ring_bytes) {
                    Some(refused) => return Err(refused),
                    None => None,
                },
                _ => None,
            };
            let tracepoint_ids = reading.and_then(|reading| reading.join().ok()?.ok());
            let cut = cutting.and_then(|cutting| cutting.join().ok().flatten());
            if cut.is_none() && config.btf.is_none() {
                log::debug!("the kernel's BTF could not be cut down: libbpf reads all of it");
            }
            Ok(Preload {
                cut,
                ring,
                tracked,
                tracepoint_ids,
            })
        })
    }
}

/// A copy of the program's own BTF, as the opened object holds it.
pub(super) fn local_btf(open: &OpenProctraceSkel<'_>) -> Option<Vec<u8>> {
    let object = open.open_object().as_libbpf_object();
    // SAFETY: the BTF belongs to the object, alive while `open` is;
    // btf__raw_data returns `size` bytes it keeps for the BTF's lifetime.
    unsafe {
        let btf = libbpf_rs::libbpf_sys::bpf_object__btf(object.as_ptr());
        if btf.is_null() {
            return None;
        }
        let mut size = 0;
        let data = libbpf_rs::libbpf_sys::btf__raw_data(btf, &mut size);
        (!data.is_null())
            .then(|| std::slice::from_raw_parts(data.cast::<u8>(), size as usize).to_vec())
    }
}

/// A map to make ahead: one like a map of the open object, of another
/// kind or size; made on any thread, as the open object cannot be shared.
pub(super) struct MapSpec {
    kind: MapType,
    name: std::ffi::OsString,
    key: u32,
    value: u32,
    entries: u32,
    flags: u32,
}

impl MapSpec {
    /// Like `like` (its name, key, value and flags, with `flags` added),
    /// of `kind` with `entries`.
    fn like(like: &OpenMapMut<'_>, kind: MapType, entries: u32, flags: u32) -> MapSpec {
        let (key, value) = match kind {
            MapType::RingBuf => (0, 0),
            _ => (like.key_size(), like.value_size()),
        };
        MapSpec {
            kind,
            name: like.name().to_owned(),
            key,
            value,
            entries,
            flags: like.map_flags() | flags,
        }
    }

    /// A failure leaves it to libbpf, unless it says why.
    fn create(self) -> libbpf_rs::Result<MapHandle> {
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: self.flags,
            ..Default::default()
        };
        let name = self.name.as_os_str();
        MapHandle::create(
            self.kind,
            Some(name),
            self.key,
            self.value,
            self.entries,
            &opts,
        )
    }
}
