//! Connection loss against any server, the real one included: the shared fault proxy.

#[allow(unused_imports)] // Only the binaries that lose connections use it.
pub use zerodispatch_fault_proxy::FaultProxy as KillProxy;
