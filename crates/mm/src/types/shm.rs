//! System V shared memory state (`ipc/shm.c`: `struct shmid_kernel` and the namespace's
//! `ipc_ids`). The code is in `shm.rs`.

use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::types::ids::Pid;
use std::collections::BTreeMap;

/// The namespace's segments (`shm_ids(ns)`), by id.
#[derive(Clone, Debug, Default)]
pub struct ShmIds {
    pub(crate) segs: BTreeMap<i32, ShmSegment>,
    /// Segments made so far: the next id's sequence number.
    pub(crate) seq: i32,
    /// Pages of every segment (`ns->shm_tot`).
    pub(crate) tot: u64,
    /// The namespace's `kernel.shmmax`, `shmall` and `shmmni` (defaults in `shm.rs`).
    pub(crate) limits: ShmLimits,
}

/// `ns->shm_ctlmax` (bytes), `shm_ctlall` (pages) and `shm_ctlmni` (segments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShmLimits {
    pub(crate) max: u64,
    pub(crate) all: u64,
    pub(crate) mni: u64,
}

/// A segment (`struct shmid_kernel`).
#[derive(Clone, Debug)]
pub struct ShmSegment {
    pub key: i32,
    /// The size asked for (`shm_segsz`); the file may be larger (a huge page multiple).
    pub segsz: u64,
    pub mode: u32,
    pub cpid: Pid,
    pub lpid: Option<Pid>,
    pub inode: InodeId,
    /// The segment's own reference to its file, dropped at destruction or `IPC_RMID`.
    pub(crate) file: Option<FileId>,
    /// `SHM_DEST`: removed, kept while attached.
    pub dest: bool,
}
