//! `baton agents check`'s counterpart for Kubernetes: is the cluster reachable, and can baton
//! use the namespace (read it, list and create Jobs there)?

use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

/// The check of one namespace: `Ok` with what was found, `Err` with what is wrong and what
/// to do, both plain sentences.
pub async fn check_cluster(
    client: Option<kube::Client>,
    namespace: Option<&str>,
) -> Result<String, String> {
    let client = match client {
        Some(c) => c,
        None => kube::Client::try_default().await.map_err(|e| {
            format!(
                "no Kubernetes cluster is configured ({e}); set KUBECONFIG or create ~/.kube/config"
            )
        })?,
    };
    let ns = namespace.unwrap_or(client.default_namespace()).to_string();
    let version = client.apiserver_version().await.map_err(|e| {
        format!("the cluster does not answer ({e}); check the kubeconfig's server address and your network, then `kubectl cluster-info`")
    })?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get(&ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return Err(format!(
                "namespace `{ns}` does not exist; create it (`kubectl create namespace {ns}`) or name another in the step's `namespace`"
            ));
        }
        // Reading namespaces may be forbidden to a user who may still use one.
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        Err(e) => return Err(format!("could not read namespace `{ns}`: {e}")),
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    jobs.list(&ListParams::default().limit(1)).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 403 => format!("you may not list Jobs in namespace `{ns}`; ask for a role that can create, watch and delete Jobs and read pod logs there"),
        other => format!("could not list Jobs in namespace `{ns}`: {other}"),
    })?;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client);
    for (group, resource, what) in [("batch", "jobs", "Jobs"), ("", "secrets", "Secrets")] {
        let review: SelfSubjectAccessReview = serde_json::from_value(json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": ns, "verb": "create", "group": group, "resource": resource}}
        }))
        .map_err(|e| e.to_string())?;
        match reviews.create(&PostParams::default(), &review).await {
            Ok(r) if r.status.as_ref().is_some_and(|s| !s.allowed) => {
                return Err(format!(
                    "you may not create {what} in namespace `{ns}`; ask for a role that can create, watch and delete Jobs and Secrets and read pod logs there"
                ));
            }
            _ => {}
        }
    }
    Ok(format!(
        "cluster answers (Kubernetes {}.{}); namespace `{ns}` is usable",
        version.major, version.minor
    ))
}
