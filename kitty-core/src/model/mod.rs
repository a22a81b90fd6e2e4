//! The model: what every stage passes on. A [`Frame`] per tick (typed
//! signals, sanitised text), the signal catalog, bounded history, and the
//! one value formatter.

pub mod addr;
pub mod format;
pub mod frame;
pub mod grid;
pub mod history;
pub mod named;
pub mod rates;
pub mod signal;
pub mod signals;
pub mod stats;
pub mod text;
pub mod time;

pub use frame::*;
pub use signal::{scope, Sig, SignalInfo, Unit, CATALOG};
pub use signals::Signals;
pub use text::Text;
