//! The I/O task's handling of the handles' commands: opens and closes, each a frame
//! appended to the write buffer at once.

use tokio::time::Instant;
use zerodispatch_wire::{CloseConsumer, CloseProducer, Frame, OpenConsumer, OpenProducer};

use super::{ConsumerEntry, Io, Phase, ProducerEntry, encode};
use crate::command::Command;
use crate::error::ClientError;

impl Io {
    /// Handles the commands queued by the handles.
    pub(super) fn run_commands(&mut self) -> Result<(), ClientError> {
        self.conn.take_commands(&mut self.commands);
        while let Some(command) = self.commands.pop_front() {
            match command {
                Command::OpenProducer {
                    shared,
                    queue,
                    name,
                    on_confirm,
                    buffers: (spare, outcomes),
                    reply,
                } => {
                    let open = OpenProducer {
                        producer: shared.id,
                        queue,
                        max_unconfirmed: shared.options.max_unconfirmed,
                        name: &name,
                    };
                    encode(Frame::OpenProducer(open), &mut self.out);
                    let next_tick = match shared.options.flush {
                        crate::Flush::Timer(interval) => Some(Instant::now() + interval),
                        crate::Flush::Dynamic { .. } => None,
                    };
                    self.producers.push(ProducerEntry {
                        shared,
                        on_confirm,
                        outcomes,
                        spare,
                        next_tick,
                        phase: Phase::Opening(Some(reply)),
                    });
                }
                Command::CloseProducer { producer, reply } => {
                    let Some(entry) = self.producers.iter_mut().find(|p| p.shared.id == producer)
                    else {
                        // Gone already: the close is done.
                        Phase::Closing(reply).answer(Ok(()));
                        continue;
                    };
                    entry.shared.take_pending(&mut entry.spare, |_| true);
                    entry.shared.encode(&mut entry.spare, &mut self.out);
                    encode(
                        Frame::CloseProducer(CloseProducer { producer }),
                        &mut self.out,
                    );
                    entry.phase = Phase::Closing(reply);
                }
                Command::OpenConsumer {
                    shared,
                    queue,
                    app,
                    on_deliver,
                    reply,
                } => {
                    let open = OpenConsumer {
                        consumer: shared.id,
                        queue,
                        app,
                        credit: shared.options.credit,
                    };
                    encode(Frame::OpenConsumer(open), &mut self.out);
                    let spare =
                        Vec::with_capacity((shared.options.credit as usize).clamp(64, 4096));
                    self.consumers.push(ConsumerEntry {
                        shared,
                        on_deliver,
                        spare,
                        phase: Phase::Opening(Some(reply)),
                    });
                }
                Command::CloseConsumer { consumer, reply } => {
                    let Some(entry) = self.consumers.iter_mut().find(|c| c.shared.id == consumer)
                    else {
                        // Gone already: the close is done.
                        Phase::Closing(reply).answer(Ok(()));
                        continue;
                    };
                    entry.shared.encode(&mut self.out, &mut entry.spare);
                    entry.shared.close_with(ClientError::Closed);
                    encode(
                        Frame::CloseConsumer(CloseConsumer { consumer }),
                        &mut self.out,
                    );
                    entry.phase = Phase::Closing(reply);
                }
                Command::Shutdown => {
                    // What is pending goes out before the connection closes.
                    self.out.drain(..self.written);
                    self.written = 0;
                    self.gather_all();
                    return Err(ClientError::Closed);
                }
            }
        }
        Ok(())
    }
}
