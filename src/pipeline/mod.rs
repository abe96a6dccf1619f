//! Pipeline definitions: types, loading with located errors, and the transition decision.
mod decide;
mod model;
pub use decide::*;
pub use model::*;
