//! The ids of the simulated kernel's objects, one leaf below every other module: dense indices
//! (`simcore::define_id!`) into the `IdVec`s and maps of `KState`.

simcore::define_id!(
    /// A page-table page.
    pub struct PtId;
);

simcore::define_id!(
    /// A memory cgroup (`mem_cgroup_id`); 0 is the root.
    pub struct MemcgId;
);

simcore::define_id!(
    /// An open file description (`struct file`), shared by `dup` and `fork`.
    pub struct FileId;
);

simcore::define_id!(
    /// A process id (the simulated kernel's pids start at 1 for the first process created).
    pub struct Pid;
);

simcore::define_id!(
    /// A VMA.
    pub struct VmaId;
);

simcore::define_id!(
    /// A set of pages held by a user-visible GUP holder.
    pub struct HoldId;
);

simcore::define_id!(
    /// An asynchronous O_DIRECT read (`io_submit`, an io_uring read) whose completion the
    /// caller controls.
    pub struct DioId;
);

simcore::define_id!(
    /// An `anon_vma`.
    pub struct AnonVmaId;
);

simcore::define_id!(
    /// A node of KSM's stable tree (`struct ksm_stable_node`, `ksm.rs`).
    pub struct StableNodeId;
);

simcore::define_id!(
    /// An inode (and its `address_space`).
    pub struct InodeId;
);

simcore::define_id!(
    /// An address space.
    pub struct MmId;
);
