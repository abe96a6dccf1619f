//! A loopback stub of the Kubernetes API subset the executor uses, written from the API
//! reference: create/list/delete Jobs (`/apis/batch/v1/namespaces/{ns}/jobs`), list and
//! watch pods by label (`/api/v1/namespaces/{ns}/pods?labelSelector=…&watch=true`), follow a
//! pod's log (`…/pods/{name}/log?follow=true`, with `sinceTime` and `timestamps`),
//! create/patch/delete Secrets (deleted with the Job that owns them), `/version`, read a
//! namespace, and SelfSubjectAccessReview. Every request needs the bearer token.
//!
//! Its "kubelet" runs a Job's container command on this machine (the container's
//! `/workspace` and context folder mapped to a temp dir), so the entry script, the git trip
//! and the exit code are real; pod phases, logs and deletion follow the documented shapes.

#![allow(dead_code)]

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, broadcast};

mod api;
mod kubelet;

use api::*;

pub const TOKEN: &str = "stub-token-0123";

/// One request as the stub received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    jobs: BTreeMap<String, Value>,
    pods: BTreeMap<String, Value>,
    /// Each pod's log lines with the time they were written, and whether it ended.
    logs: HashMap<String, (Vec<(k8s_openapi::jiff::Timestamp, String)>, bool)>,
    secrets: BTreeMap<String, Value>,
    /// Pod events with their resource version, for watches that start from a version.
    history: Vec<(u64, Value)>,
    version: u64,
    requests: Vec<Seen>,
    /// Process group of the container the "kubelet" runs, per pod.
    running: HashMap<String, u32>,
    missing_images: BTreeSet<String>,
    namespaces: BTreeSet<String>,
    /// Pods stay Pending until released (the scheduler and image pull take their time).
    held: bool,
}

/// The stub: its address, what it saw, and knobs for a test.
#[derive(Clone)]
pub struct Stub {
    inner: Arc<Mutex<Inner>>,
    events: broadcast::Sender<(u64, Value)>,
    changed: Arc<Notify>,
    pub port: u16,
    /// Where the "kubelet" puts containers' files.
    pub root: Arc<tempfile::TempDir>,
}

impl Stub {
    /// Starts the stub on 127.0.0.1 with the given namespaces.
    pub async fn start(namespaces: &[&str]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stub");
        let port = listener.local_addr().unwrap().port();
        let (events, _) = broadcast::channel(1024);
        let stub = Stub {
            inner: Arc::new(Mutex::new(Inner {
                namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
                ..Inner::default()
            })),
            events,
            changed: Arc::new(Notify::new()),
            port,
            root: Arc::new(tempfile::tempdir().unwrap()),
        };
        let app = Router::new()
            .route("/version", get(version))
            .route("/api/v1/namespaces/{ns}", get(namespace))
            .route(
                "/apis/batch/v1/namespaces/{ns}/jobs",
                post(create_job).get(list_jobs),
            )
            .route(
                "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
                axum::routing::delete(delete_job),
            )
            .route("/api/v1/namespaces/{ns}/secrets", post(create_secret))
            .route(
                "/api/v1/namespaces/{ns}/secrets/{name}",
                axum::routing::patch(patch_secret).delete(delete_secret),
            )
            .route("/api/v1/namespaces/{ns}/pods", get(pods))
            .route("/api/v1/namespaces/{ns}/pods/{name}/log", get(pod_log))
            .route(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                post(access_review),
            )
            .fallback(unknown)
            .layer(axum::middleware::from_fn_with_state(stub.clone(), record))
            .with_state(stub.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        stub
    }

    /// A kubeconfig file pointing at the stub, with its token and `namespace` as default.
    pub fn kubeconfig(&self, dir: &std::path::Path, namespace: &str) -> std::path::PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stub\n  cluster:\n    server: http://127.0.0.1:{}\nusers:\n- name: u\n  user:\n    token: {TOKEN}\ncontexts:\n- name: c\n  context:\n    cluster: stub\n    user: u\n    namespace: {namespace}\ncurrent-context: c\n",
            self.port
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A client for the stub.
    pub async fn client(&self, dir: &std::path::Path, namespace: &str) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.kubeconfig(dir, namespace)).unwrap();
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        kube::Client::try_from(cfg).unwrap()
    }

    /// Pods of this image never start (the registry has no such image).
    pub fn missing_image(&self, image: &str) {
        self.inner
            .lock()
            .unwrap()
            .missing_images
            .insert(image.to_string());
    }

    /// New pods stay Pending until [`Stub::release`].
    pub fn hold_pods(&self) {
        self.inner.lock().unwrap().held = true;
    }

    /// Lets held pods start.
    pub fn release(&self) {
        self.inner.lock().unwrap().held = false;
        self.changed.notify_waiters();
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().requests.clone()
    }

    pub fn secrets(&self) -> Vec<Value> {
        self.inner
            .lock()
            .unwrap()
            .secrets
            .values()
            .cloned()
            .collect()
    }

    /// Every pod's log lines so far.
    pub fn log_lines(&self) -> Vec<String> {
        let i = self.inner.lock().unwrap();
        i.logs
            .values()
            .flat_map(|(l, _)| l.iter().map(|(_, t)| t.clone()))
            .collect()
    }

    pub fn jobs(&self) -> Vec<Value> {
        self.inner.lock().unwrap().jobs.values().cloned().collect()
    }

    /// Waits until `cond` holds of the stub's requests (woken by each request).
    pub async fn until(&self, what: &str, cond: impl Fn(&[Seen]) -> bool) {
        let wait = async {
            loop {
                let notified = self.changed.notified();
                if cond(&self.requests()) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }

    /// Whether the container of any pod still runs.
    pub fn containers_running(&self) -> usize {
        self.inner.lock().unwrap().running.len()
    }

    fn publish(&self, kind: &str, pod: Value) {
        let mut i = self.inner.lock().unwrap();
        i.version += 1;
        let v = i.version;
        let mut pod = pod;
        pod["metadata"]["resourceVersion"] = json!(v.to_string());
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if kind == "DELETED" {
            i.pods.remove(&name);
        } else {
            i.pods.insert(name, pod.clone());
        }
        let event = json!({"type": kind, "object": pod});
        i.history.push((v, event.clone()));
        drop(i);
        let _ = self.events.send((v, event));
    }

    fn log_line(&self, pod: &str, line: String) {
        self.inner
            .lock()
            .unwrap()
            .logs
            .entry(pod.to_string())
            .or_default()
            .0
            .push((k8s_openapi::jiff::Timestamp::now(), line));
        self.changed.notify_waiters();
    }

    fn log_end(&self, pod: &str) {
        self.inner
            .lock()
            .unwrap()
            .logs
            .entry(pod.to_string())
            .or_default()
            .1 = true;
        self.changed.notify_waiters();
    }
}
