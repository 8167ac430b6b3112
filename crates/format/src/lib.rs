//! vmview's event model and trace format.
pub mod event;
pub mod symbols;
pub use event::*;
pub use symbols::*;
