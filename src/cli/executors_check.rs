//! `baton agents check`, continued: the executors the workspace's pipelines, agent profiles
//! and config use, where one can be checked from here (Kubernetes: the cluster answers and
//! the namespace is usable).

use crate::exec::executor::kubernetes::check_cluster;
use crate::pipeline::ExecutorSpec;
use crate::workspace::Workspace;
use std::collections::BTreeSet;

/// Every Kubernetes namespace a step may use (None: the kubeconfig's default).
fn kube_namespaces(
    ws: &Workspace,
    profiles: &[crate::agents::Profile],
) -> BTreeSet<Option<String>> {
    let mut specs: Vec<ExecutorSpec> = Vec::new();
    let agents = crate::pipeline::agent_ids(Some(&ws.agents_dir()));
    let cat = crate::pipeline::load_catalog(Some(&ws.pipelines_dir()), Some(&agents));
    for p in &cat.pipelines {
        specs.extend(
            p.statuses
                .iter()
                .filter_map(|s| s.step.as_ref()?.own_executor()),
        );
    }
    specs.extend(profiles.iter().filter_map(|p| p.executor.clone()));
    let settings = crate::exec::executor::kubernetes::Settings::load(ws.root());
    let mut out: BTreeSet<Option<String>> = specs
        .iter()
        .filter_map(|s| match s {
            ExecutorSpec::Kubernetes(k) => Some(k.namespace.clone().or(settings.namespace.clone())),
            _ => None,
        })
        .collect();
    let in_config = ws
        .config()
        .ok()
        .and_then(|c| c.executor_table)
        .is_some_and(|t| t.contains_key("kubernetes"));
    if in_config && out.is_empty() {
        out.insert(settings.namespace.clone());
    }
    out
}

/// Prints one line per namespace checked; returns how many failed.
pub fn check(
    ws: Option<&Workspace>,
    profiles: &[crate::agents::Profile],
    rt: &tokio::runtime::Runtime,
) -> usize {
    let Some(ws) = ws else { return 0 };
    let mut bad = 0;
    for ns in kube_namespaces(ws, profiles) {
        let result = rt.block_on(check_cluster(None, ns.as_deref()));
        let (mark, text) = match result {
            Ok(t) => ("ok  ", t),
            Err(t) => {
                bad += 1;
                ("FAIL", t)
            }
        };
        outln!("{mark} kubernetes  {}", crate::ansi::strip(&text));
    }
    bad
}
