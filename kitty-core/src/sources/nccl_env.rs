//! The communication-library settings kitty may read from a rank's
//! environment (an allow-list, like the labels': the environment holds
//! secrets): which RDMA devices and interfaces NCCL uses, and where NCCL's
//! Inspector and PyTorch's Flight Recorder write.

pub const KEYS: &[&str] = &[
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_NET",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_INSPECTOR_ENABLE",
    "NCCL_INSPECTOR_DUMP_DIR",
    "NCCL_INSPECTOR_PROM_DUMP",
    "NCCL_RAS_ADDR",
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
];
