//! TEMPORARY: the broker's async door calls as they will be, until they land on main.
#![allow(dead_code)]

use zerodispatch_broker::{
    Broker, BrokerError, Consumer, ConsumerOptions, Guid, Payload, Producer, QueueId, SendError,
};

pub(crate) trait ProducerAsync {
    async fn publish_async(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError>;
}

impl ProducerAsync for Producer {
    async fn publish_async(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        self.publish(queue, payload)
    }
}

pub(crate) trait BrokerAsync {
    async fn confirm_batch_async(
        &self,
        consumer: &Consumer,
        guids: impl IntoIterator<Item = Guid>,
    ) -> Result<(), BrokerError>;
    async fn add_credit_async(&self, consumer: &Consumer, credit: u32) -> Result<(), BrokerError>;
}

impl BrokerAsync for Broker {
    async fn confirm_batch_async(
        &self,
        _consumer: &Consumer,
        guids: impl IntoIterator<Item = Guid>,
    ) -> Result<(), BrokerError> {
        for _ in guids {}
        Ok(())
    }
    async fn add_credit_async(
        &self,
        _consumer: &Consumer,
        _credit: u32,
    ) -> Result<(), BrokerError> {
        Ok(())
    }
}

pub(crate) fn consumer_options(_credit: u32) -> ConsumerOptions {
    ConsumerOptions::default()
}
