//! Every log line on a processor thread is inside a `processor` span naming it.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as LogEvent, Metadata, Subscriber};
use zerodispatch_core::{Client, ClientType, Context, Dispatcher, Event, Placement, PoolConfig};

/// Each event's message and the spans it was in, in order.
type Logged = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// A subscriber remembering each event's message and spans (names, `processor` fields).
#[derive(Default)]
struct Spans {
    next: AtomicU64,
    /// Span id -> "name processor".
    spans: Mutex<HashMap<u64, String>>,
    /// The spans each thread is in, by thread name.
    entered: Mutex<HashMap<String, Vec<u64>>>,
    /// (message, the spans it was in).
    events: Logged,
}

/// Collects the `processor` and `message` fields.
#[derive(Default)]
struct Fields {
    processor: String,
    message: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "processor" => self.processor = format!("{value:?}"),
            "message" => self.message = format!("{value:?}"),
            _ => {}
        }
    }
}

fn thread() -> String {
    std::thread::current().name().unwrap_or("?").to_owned()
}

impl Subscriber for Spans {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = Fields::default();
        span.record(&mut fields);
        let name = format!("{} {}", span.metadata().name(), fields.processor);
        self.spans.lock().unwrap().insert(id, name);
        Id::from_u64(id)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &LogEvent<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let spans = self.spans.lock().unwrap();
        let entered = self.entered.lock().unwrap();
        let names = entered.get(&thread()).into_iter().flatten();
        let names = names.map(|id| spans[id].clone()).collect();
        self.events.lock().unwrap().push((fields.message, names));
    }

    fn enter(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap();
        entered.entry(thread()).or_default().push(span.into_u64());
    }

    fn exit(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap();
        let stack = entered.entry(thread()).or_default();
        if let Some(at) = stack.iter().rposition(|&id| id == span.into_u64()) {
            stack.remove(at);
        }
    }
}

/// A client that logs each message it handles.
struct Logs;

impl Client<u64> for Logs {
    fn on_message(&mut self, n: u64, _: &mut Context<u64>) {
        tracing::info!("handled message {n}");
    }
}

#[test]
fn a_client_log_line_names_its_processor() {
    let subscriber = Spans::default();
    let events = subscriber.events.clone();
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let builder = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(2));
    let mut d = builder.build().unwrap();
    for index in 0..2 {
        let client = d.register(ClientType::Queue, Logs, Placement::Processor(index));
        let client = client.unwrap();
        d.dispatch(client, Event::Message(index.into())).unwrap();
        d.synchronize(client).unwrap();
    }
    d.shutdown();

    let events = events.lock().unwrap();
    for index in 0..2 {
        let message = format!("handled message {index}");
        let logged = events.iter().find(|(m, _)| *m == message);
        let (_, spans) = logged.unwrap_or_else(|| panic!("`{message}` not logged: {events:?}"));
        assert_eq!(spans, &[format!("processor zd-queue-{index}")], "{message}");
    }
}
