//! Pipelines: the JSON state machines tasks move through.
//!
//! `model` holds the plain data types, `load` turns files into them with located
//! diagnostics (helped by `parse*`, `validate` and `locate`), and `decide` is the pure
//! "where does this task go next?" function the engine performs. `outcome` holds the one
//! normaliser of agent outcome names, shared by pipelines, agent profiles and handoffs.

pub mod decide;
pub mod executor_spec;
pub mod graph;
pub mod live;
pub mod load;
pub mod model;
pub mod outcome;
pub mod pr_options;

mod input;
mod locate;
pub(crate) use locate::json_error_position;
mod parse;
mod parse_edge;
mod parse_step;
mod parse_trigger;
pub use parse_trigger::trigger_after_problem;
pub mod schema;
mod validate;

pub use decide::*;
pub use executor_spec::{ExecutorSpec, parse_executor};
pub(crate) use input::duplicate_keys;
pub use input::{MAX_LABEL, engine_name_problem, id_problem, label_problem, strip_bom};
pub use live::LiveCatalog;
pub use load::*;
pub use model::*;
pub use outcome::normalize_outcome;

#[cfg(test)]
mod decide_tests;
#[cfg(test)]
mod graph_tests;
#[cfg(test)]
mod load_tests;
#[cfg(test)]
mod validate_tests;
