//! The log lines code writes, captured by a small `tracing` layer instead of printed, each as
//! its level and its text (the message, then ` field=value` for each field): for tests of what
//! an operator reads in the log (the outage and failure loggers of the store, the bus and the
//! delivery worker).

use std::fmt::{Debug, Write as _};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The lines written while `run` runs on this thread, every level included.
pub fn capture(run: impl FnOnce()) -> Vec<(Level, String)> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Lines(lines.clone()));
    tracing::subscriber::with_default(subscriber, run);
    let taken = std::mem::take(&mut *lines.lock());
    taken
}

struct Lines(Arc<Mutex<Vec<(Level, String)>>>);

impl<S: Subscriber> Layer<S> for Lines {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut text = Text::default();
        event.record(&mut text);
        self.0
            .lock()
            .push((*event.metadata().level(), text.message + &text.fields));
    }
}

#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}
