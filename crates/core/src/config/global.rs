//! The settings of the dispatcher as a whole, beyond its pools.

use std::time::Duration;

use super::{ConfigError, Problem};
use crate::ids::ClientType;

/// The settings of the dispatcher as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GlobalConfig {
    pub(crate) stuck_warning: Duration,
    pub(crate) monitor_interval: Duration,
    pub(crate) shutdown_order: [ClientType; 3],
    /// The stack size of every thread the dispatcher starts; `None`: the standard
    /// library's default.
    pub(crate) stack_size: Option<usize>,
}

impl Default for GlobalConfig {
    fn default() -> Self {
        Self {
            stuck_warning: Duration::from_secs(1),
            monitor_interval: Duration::from_millis(10),
            shutdown_order: [ClientType::Queue, ClientType::Session, ClientType::Cluster],
            stack_size: None,
        }
    }
}

impl GlobalConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let err = |problem| {
            Err(ConfigError {
                client_type: None,
                problem,
            })
        };
        if self.stuck_warning.is_zero() {
            return err(Problem::ZeroDuration("stuck_warning"));
        }
        if self.monitor_interval.is_zero() {
            return err(Problem::ZeroDuration("monitor_interval"));
        }
        let order = self.shutdown_order;
        if ClientType::ALL.iter().any(|t| !order.contains(t)) {
            return err(Problem::ShutdownOrder(order));
        }
        Ok(())
    }
}
