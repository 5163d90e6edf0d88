//! Connection loss for tests against any server, the real one included: the shared fault
//! proxy (`zerodispatch-fault-proxy`, the one the perftest's `--kill-connections` uses),
//! under the name these tests give it.

pub use zerodispatch_fault_proxy::FaultProxy as KillProxy;
