//! Connection loss for tests against any server, the real one included: the shared fault
//! proxy (`zerodispatch-fault-proxy`, the one the perftest's `--kill-connections` uses),
//! under the name these tests give it.

// Every test binary compiles `support`; only those that lose connections use this.
#[allow(unused_imports)]
pub use zerodispatch_fault_proxy::FaultProxy as KillProxy;
