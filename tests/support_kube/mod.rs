//! A loopback stub of the Kubernetes API subset the executor uses, written from the API
//! reference: create/list/delete Jobs (`/apis/batch/v1/namespaces/{ns}/jobs`), list and
//! watch pods by label (`/api/v1/namespaces/{ns}/pods?labelSelector=…&watch=true`), follow a
//! pod's log (`…/pods/{name}/log?follow=true`), `/version`, read a namespace, and
//! SelfSubjectAccessReview. Every request needs the bearer token.
//!
//! Its "kubelet" runs a Job's container command on this machine (the container's
//! `/workspace` and context folder mapped to a temp dir), so the entry script, the git trip
//! and the exit code are real; pod phases, logs and deletion follow the documented shapes.

#![allow(dead_code)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, broadcast};

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
    logs: HashMap<String, (Vec<String>, bool)>,
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
            .push(line);
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

    /// The "kubelet": runs the pod's container, moving the pod through its phases.
    async fn kubelet(self, pod: Value, container: Value) {
        let name = pod["metadata"]["name"].as_str().unwrap().to_string();
        let image = container["image"].as_str().unwrap_or_default().to_string();
        let status = |phase: &str, state: Value| {
            let mut p = pod.clone();
            p["status"] = json!({"phase": phase, "containerStatuses": [{
                "name": "step", "image": image, "imageID": "", "ready": phase == "Running",
                "restartCount": 0, "state": state}]});
            p
        };
        if self.inner.lock().unwrap().missing_images.contains(&image) {
            self.publish("MODIFIED", status("Pending", json!({"waiting": {"reason": "ErrImagePull", "message": format!("pull access denied for {image}")}})));
            return;
        }
        loop {
            let released = self.changed.notified();
            if !self.inner.lock().unwrap().held {
                break;
            }
            released.await;
        }
        let fs = self.root.path().join(&name);
        std::fs::create_dir_all(&fs).unwrap();
        let mut cmd = tokio::process::Command::new("sh");
        let argv: Vec<String> = container["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        cmd.args(&argv[1..]);
        for e in container["env"].as_array().into_iter().flatten() {
            cmd.env(
                e["name"].as_str().unwrap(),
                e["value"].as_str().unwrap_or_default(),
            );
        }
        // The container's filesystem: its /workspace and context folder live under `fs`.
        cmd.env("BATON_WORKSPACE", fs.join("workspace"))
            .env("BATON_CONTEXT_DIR", fs.join("context"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("the stub kubelet runs sh");
        let pid = child.id().unwrap();
        self.inner.lock().unwrap().running.insert(name.clone(), pid);
        self.publish(
            "MODIFIED",
            status(
                "Running",
                json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}),
            ),
        );
        let mut readers = Vec::new();
        for out in [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            child
                .stderr
                .take()
                .map(|o| Box::new(o) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let me = self.clone();
            let pod = name.clone();
            readers.push(tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt;
                let mut lines = tokio::io::BufReader::new(out).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    me.log_line(&pod, l);
                }
            }));
        }
        let code = child
            .wait()
            .await
            .ok()
            .and_then(|s| s.code())
            .unwrap_or(137);
        for r in readers {
            let _ = r.await;
        }
        let deleted = self.inner.lock().unwrap().running.remove(&name).is_none();
        self.log_end(&name);
        if !deleted {
            let phase = if code == 0 { "Succeeded" } else { "Failed" };
            self.publish(
                "MODIFIED",
                status(phase, json!({"terminated": {"exitCode": code}})),
            );
        }
    }
}

fn status(code: u16, reason: &str, message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (StatusCode::from_u16(code).unwrap(), axum::Json(body)).into_response()
}

/// Records each request and checks its token.
async fn record(
    State(stub): State<Stub>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let authorized = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if !authorized {
        return status(401, "Unauthorized", "Unauthorized".into());
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let query: HashMap<String, String> = parts.uri.query().map(url_pairs).unwrap_or_default();
    stub.inner.lock().unwrap().requests.push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    });
    stub.changed.notify_waiters();
    next.run(axum::extract::Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn url_pairs(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), percent_decode(v)))
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn matches(labels: &Value, selector: Option<&String>) -> bool {
    let Some(sel) = selector else { return true };
    sel.split(',').all(|term| match term.split_once('=') {
        Some((k, v)) => labels[k].as_str() == Some(v),
        None => false,
    })
}

async fn unknown(method: Method, uri: Uri) -> Response {
    status(
        404,
        "NotFound",
        format!("the stub does not serve {method} {uri}"),
    )
}

async fn version() -> Response {
    axum::Json(
        json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0", "gitCommit": "stub",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
        "compiler": "gc", "platform": "linux/amd64"}),
    )
    .into_response()
}

async fn namespace(State(stub): State<Stub>, Path(ns): Path<String>) -> Response {
    if stub.inner.lock().unwrap().namespaces.contains(&ns) {
        axum::Json(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}})).into_response()
    } else {
        status(404, "NotFound", format!("namespaces \"{ns}\" not found"))
    }
}

async fn access_review(axum::Json(mut body): axum::Json<Value>) -> Response {
    body["status"] = json!({"allowed": true});
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

async fn create_job(
    State(stub): State<Stub>,
    Path(ns): Path<String>,
    axum::Json(mut job): axum::Json<Value>,
) -> Response {
    if !stub.inner.lock().unwrap().namespaces.contains(&ns) {
        return status(404, "NotFound", format!("namespaces \"{ns}\" not found"));
    }
    let name = job["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if stub.inner.lock().unwrap().jobs.contains_key(&name) {
        return status(
            409,
            "AlreadyExists",
            format!("jobs.batch \"{name}\" already exists"),
        );
    }
    job["metadata"]["namespace"] = json!(ns);
    job["metadata"]["uid"] = json!(format!("uid-{name}"));
    stub.inner
        .lock()
        .unwrap()
        .jobs
        .insert(name.clone(), job.clone());
    let mut labels = job["spec"]["template"]["metadata"]["labels"].clone();
    labels["job-name"] = json!(name);
    labels["batch.kubernetes.io/job-name"] = json!(name);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-x7k2p"), "namespace": ns, "labels": labels},
        "spec": job["spec"]["template"]["spec"].clone(),
        "status": {"phase": "Pending"}});
    stub.publish("ADDED", pod.clone());
    let container = job["spec"]["template"]["spec"]["containers"][0].clone();
    tokio::spawn(stub.clone().kubelet(pod, container));
    (StatusCode::CREATED, axum::Json(job)).into_response()
}

async fn list_jobs(State(stub): State<Stub>, Query(q): Query<HashMap<String, String>>) -> Response {
    let i = stub.inner.lock().unwrap();
    let items: Vec<Value> = i
        .jobs
        .values()
        .filter(|j| matches(&j["metadata"]["labels"], q.get("labelSelector")))
        .cloned()
        .collect();
    axum::Json(json!({"apiVersion": "batch/v1", "kind": "JobList",
        "metadata": {"resourceVersion": i.version.to_string()}, "items": items}))
    .into_response()
}

async fn delete_job(
    State(stub): State<Stub>,
    Path((_ns, name)): Path<(String, String)>,
) -> Response {
    let Some(job) = stub.inner.lock().unwrap().jobs.remove(&name) else {
        return status(404, "NotFound", format!("jobs.batch \"{name}\" not found"));
    };
    // The Job's pods go with it: their containers are killed.
    let pods: Vec<Value> = stub
        .inner
        .lock()
        .unwrap()
        .pods
        .values()
        .filter(|p| p["metadata"]["labels"]["job-name"] == json!(name))
        .cloned()
        .collect();
    for pod in pods {
        let pod_name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(pgid) = stub.inner.lock().unwrap().running.remove(&pod_name) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        stub.publish("DELETED", pod);
    }
    axum::Json(job).into_response()
}

async fn pods(State(stub): State<Stub>, Query(q): Query<HashMap<String, String>>) -> Response {
    let selector = q.get("labelSelector").cloned();
    if q.get("watch").map(String::as_str) != Some("true") {
        let i = stub.inner.lock().unwrap();
        let items: Vec<Value> = i
            .pods
            .values()
            .filter(|p| matches(&p["metadata"]["labels"], selector.as_ref()))
            .cloned()
            .collect();
        return axum::Json(json!({"apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": i.version.to_string()}, "items": items}))
        .into_response();
    }
    let from: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut rx = stub.events.subscribe();
    let backlog: Vec<(u64, Value)> = stub
        .inner
        .lock()
        .unwrap()
        .history
        .iter()
        .filter(|(v, _)| *v > from)
        .cloned()
        .collect();
    let (tx, out) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    tokio::spawn(async move {
        let mut last = from;
        let send = |e: &Value| Bytes::from(format!("{e}\n"));
        for (v, e) in backlog {
            if matches(&e["object"]["metadata"]["labels"], selector.as_ref())
                && tx.send(Ok(send(&e))).await.is_err()
            {
                return;
            }
            last = v;
        }
        while let Ok((v, e)) = rx.recv().await {
            if v > last && matches(&e["object"]["metadata"]["labels"], selector.as_ref()) {
                if tx.send(Ok(send(&e))).await.is_err() {
                    return;
                }
                last = v;
            }
        }
    });
    let stream =
        futures_util::stream::unfold(
            out,
            |mut rx| async move { rx.recv().await.map(|i| (i, rx)) },
        );
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn pod_log(
    State(stub): State<Stub>,
    Path((_ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    _h: HeaderMap,
) -> Response {
    let follow = q.get("follow").map(String::as_str) == Some("true");
    let (tx, out) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    tokio::spawn(async move {
        let mut sent = 0;
        loop {
            let notified = stub.changed.notified();
            let (lines, done) = {
                let i = stub.inner.lock().unwrap();
                let (l, d) = i.logs.get(&name).cloned().unwrap_or_default();
                (l, d || !i.pods.contains_key(&name))
            };
            for l in &lines[sent..] {
                if tx.send(Ok(Bytes::from(format!("{l}\n")))).await.is_err() {
                    return;
                }
            }
            sent = lines.len();
            if done || !follow {
                return;
            }
            notified.await;
        }
    });
    let stream =
        futures_util::stream::unfold(
            out,
            |mut rx| async move { rx.recv().await.map(|i| (i, rx)) },
        );
    Response::builder()
        .header("content-type", "text/plain")
        .body(Body::from_stream(stream))
        .unwrap()
}
