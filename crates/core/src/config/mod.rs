//! Configuration: a validated builder, one pool of processors per client type.
//!
//! Every invalid choice is a [`ConfigError`] with a message that says what to change,
//! returned by [`DispatcherBuilder::build`](crate::DispatcherBuilder::build); nothing here
//! panics or aborts. A thread the system refuses to start is reported the same way
//! ([`Problem::CannotSpawn`]).

// How a processor waits when its queue is empty, and the names it is written by.
mod wait;
pub use wait::{ParseWaitStrategyError, WaitStrategy};

// The limits every pool's settings are held to.
mod limits;
pub use limits::{MAX_CAPACITY, MAX_CORE_ID, MAX_PROCESSORS};

// The settings of one pool of processors and their validation.
mod pool;
pub use pool::PoolConfig;

// The settings of the dispatcher as a whole.
mod global;
pub(crate) use global::GlobalConfig;

// An invalid configuration and what to change.
mod error;
pub use error::{ConfigError, Problem};
