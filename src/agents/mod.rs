//! Agent profiles as data: built-ins from `pipelines/agents/*.json` plus a
//! workspace's `.baton/agents/*.json`, their prompt templates and declared outcomes.
//! Pure apart from reading the profile files; the backends live in `exec::agent`.

mod fix_hint;
mod live;
mod load;
pub mod price;
mod profile;
pub mod schema;
mod template;

pub use live::LiveAgents;
pub use load::{AgentCatalog, ProfileError, load_agents};
pub use profile::{
    Backend, DEFAULT_CONTINUE_TEMPLATE, DEFAULT_OPENCODE_URL, DEFAULT_TEMPLATE, Format, InputMode,
    Profile, PromptVia, SessionMode, parse_profile,
};
pub use template::{
    TemplateVars, fill, render_argv, render_prompt, render_prompt_with_messages,
    unknown_placeholders,
};
