//! The stub's HTTP handlers, one per API call it serves.

use super::{Seen, Stub, TOKEN};
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;

pub(super) fn status(code: u16, reason: &str, message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (StatusCode::from_u16(code).unwrap(), axum::Json(body)).into_response()
}

/// Records each request and checks its token.
pub(super) async fn record(
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

pub(super) fn matches(labels: &Value, selector: Option<&String>) -> bool {
    let Some(sel) = selector else { return true };
    sel.split(',').all(|term| match term.split_once('=') {
        Some((k, v)) => labels[k].as_str() == Some(v),
        None => false,
    })
}

pub(super) async fn unknown(method: Method, uri: Uri) -> Response {
    status(
        404,
        "NotFound",
        format!("the stub does not serve {method} {uri}"),
    )
}

pub(super) async fn version() -> Response {
    axum::Json(
        json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0", "gitCommit": "stub",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
        "compiler": "gc", "platform": "linux/amd64"}),
    )
    .into_response()
}

pub(super) async fn namespace(State(stub): State<Stub>, Path(ns): Path<String>) -> Response {
    if stub.inner.lock().unwrap().namespaces.contains(&ns) {
        axum::Json(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}})).into_response()
    } else {
        status(404, "NotFound", format!("namespaces \"{ns}\" not found"))
    }
}

pub(super) async fn access_review(axum::Json(mut body): axum::Json<Value>) -> Response {
    body["status"] = json!({"allowed": true});
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

pub(super) async fn create_job(
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

pub(super) async fn list_jobs(
    State(stub): State<Stub>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
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

pub(super) async fn create_secret(
    State(stub): State<Stub>,
    Path(ns): Path<String>,
    axum::Json(mut secret): axum::Json<Value>,
) -> Response {
    let name = secret["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut i = stub.inner.lock().unwrap();
    if !i.namespaces.contains(&ns) {
        return status(404, "NotFound", format!("namespaces \"{ns}\" not found"));
    }
    if i.secrets.contains_key(&name) {
        return status(
            409,
            "AlreadyExists",
            format!("secrets \"{name}\" already exists"),
        );
    }
    secret["metadata"]["namespace"] = json!(ns);
    i.secrets.insert(name, secret.clone());
    (StatusCode::CREATED, axum::Json(secret)).into_response()
}

/// A merge patch of a Secret's metadata (its owner).
pub(super) async fn patch_secret(
    State(stub): State<Stub>,
    Path((_ns, name)): Path<(String, String)>,
    axum::Json(patch): axum::Json<Value>,
) -> Response {
    let mut i = stub.inner.lock().unwrap();
    let Some(secret) = i.secrets.get_mut(&name) else {
        return status(404, "NotFound", format!("secrets \"{name}\" not found"));
    };
    if let Some(owners) = patch["metadata"].get("ownerReferences") {
        secret["metadata"]["ownerReferences"] = owners.clone();
    }
    axum::Json(secret.clone()).into_response()
}

pub(super) async fn delete_secret(
    State(stub): State<Stub>,
    Path((_ns, name)): Path<(String, String)>,
) -> Response {
    match stub.inner.lock().unwrap().secrets.remove(&name) {
        Some(s) => axum::Json(s).into_response(),
        None => status(404, "NotFound", format!("secrets \"{name}\" not found")),
    }
}

pub(super) async fn delete_job(
    State(stub): State<Stub>,
    Path((_ns, name)): Path<(String, String)>,
) -> Response {
    let Some(job) = stub.inner.lock().unwrap().jobs.remove(&name) else {
        return status(404, "NotFound", format!("jobs.batch \"{name}\" not found"));
    };
    // The garbage collector deletes what the Job owns.
    stub.inner.lock().unwrap().secrets.retain(|_, s| {
        !s["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["uid"] == job["metadata"]["uid"])
    });
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

pub(super) async fn pods(
    State(stub): State<Stub>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
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

pub(super) async fn pod_log(
    State(stub): State<Stub>,
    Path((_ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    _h: HeaderMap,
) -> Response {
    let follow = q.get("follow").map(String::as_str) == Some("true");
    let stamps = q.get("timestamps").map(String::as_str) == Some("true");
    let since: Option<k8s_openapi::jiff::Timestamp> = q
        .get("sinceTime")
        .map(|t| t.parse().expect("sinceTime is RFC 3339"));
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
            for (t, l) in &lines[sent..] {
                if since.is_some_and(|s| *t < s) {
                    continue;
                }
                let l = if stamps {
                    format!("{t} {l}")
                } else {
                    l.clone()
                };
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
