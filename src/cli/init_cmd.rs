//! What `baton init` writes besides the bare `.baton/` folder: the JSON Schemas editors use
//! to check and complete the workspace's pipeline and agent files.

use super::Failure;
use crate::workspace::Workspace;
use std::path::PathBuf;

/// `.baton/schemas/`.
pub fn schemas_dir(ws: &Workspace) -> PathBuf {
    ws.dir().join("schemas")
}

/// Writes (or refreshes, after an upgrade) `.baton/schemas/{pipeline,agent}.schema.json`, the
/// schemas of this baton's file formats. Returns true when a file changed.
pub fn write_schemas(ws: &Workspace) -> Result<bool, Failure> {
    let dir = schemas_dir(ws);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::new(format!("cannot create {}: {e}", dir.display())))?;
    let mut changed = false;
    for (name, text) in [
        (
            "pipeline.schema.json",
            crate::pipeline::schema::pipeline_schema_json(),
        ),
        (
            "agent.schema.json",
            crate::agents::schema::agent_schema_json(),
        ),
    ] {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        std::fs::write(&path, text)
            .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))?;
        changed = true;
    }
    Ok(changed)
}
