//! Pipelines: the JSON state machines tasks move through.
//!
//! `model` holds the plain data types, `load` turns files into them with located
//! diagnostics (helped by `parse*`, `validate` and `locate`), and `decide` is the pure
//! "where does this task go next?" function the engine performs.

pub mod decide;
pub mod load;
pub mod model;

mod input;
mod locate;
mod parse;
mod parse_edge;
mod parse_step;
mod validate;

pub use decide::*;
pub(crate) use input::duplicate_keys;
pub use input::{id_problem, strip_bom};
pub use load::*;
pub use model::*;

#[cfg(test)]
mod decide_tests;
#[cfg(test)]
mod load_tests;
#[cfg(test)]
mod validate_tests;
