//! The operations on pipelines and agent profiles: their files are read on blocking threads.

use super::ops::{Kind, OpError, OpResult, Ops};
use crate::pipeline::{Catalog, Pipeline, load_catalog};
use serde_json::Value;

impl Ops {
    /// The pipelines the workspace sees (built-in and its own).
    pub async fn catalog(&self) -> Result<Catalog, OpError> {
        let ws = self.ws.clone();
        tokio::task::spawn_blocking(move || {
            let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
            load_catalog(Some(&ws.pipelines_dir()), Some(&agents))
        })
        .await
        .map_err(|e| OpError::new(Kind::Internal, e.to_string()))
    }

    /// One pipeline by id.
    pub async fn pipeline(&self, id: &str) -> Result<Pipeline, OpError> {
        let catalog = self.catalog().await?;
        catalog
            .get(id)
            .cloned()
            .ok_or_else(|| OpError::new(Kind::NotFound, catalog.not_found(id)))
    }

    /// Every pipeline: id, name, description and its statuses.
    pub async fn list_pipelines(&self) -> OpResult {
        let catalog = self.catalog().await?;
        Ok(Value::Array(
            catalog
                .pipelines
                .iter()
                .map(super::shapes::pipeline_item)
                .collect(),
        ))
    }

    /// One pipeline as its file would hold it, its credentials masked.
    pub async fn show_pipeline(&self, id: &str) -> OpResult {
        let p = self.pipeline(id).await?;
        Ok(super::shapes::masked_pipeline(&p))
    }

    /// Checks a pipeline file's text; located errors and warnings.
    pub async fn validate_pipeline(&self, text: String, file: Option<String>) -> OpResult {
        let ws = self.ws.clone();
        tokio::task::spawn_blocking(move || {
            let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
            let file = file.unwrap_or_else(|| "pipeline.json".into());
            super::shapes::validation(&file, &text, &agents)
        })
        .await
        .map_err(|e| OpError::new(Kind::Internal, e.to_string()))
    }

    /// Every agent profile (built-in and the workspace's).
    pub async fn list_agents(&self) -> OpResult {
        let ws = self.ws.clone();
        tokio::task::spawn_blocking(move || {
            let cat = crate::agents::load_agents(Some(&ws.agents_dir()));
            super::shapes::agents(&cat)
        })
        .await
        .map_err(|e| OpError::new(Kind::Internal, e.to_string()))
    }
}
