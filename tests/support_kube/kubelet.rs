//! The stub's "kubelet": runs a pod's container command on this machine and moves the pod
//! through its phases.

use super::Stub;
use serde_json::{Value, json};

impl Stub {
    /// The "kubelet": runs the pod's container, moving the pod through its phases.
    pub(super) async fn kubelet(self, pod: Value, container: Value) {
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
            let value = match e["valueFrom"].get("secretKeyRef") {
                Some(r) => {
                    let i = self.inner.lock().unwrap();
                    let found = r["name"]
                        .as_str()
                        .and_then(|n| i.secrets.get(n))
                        .and_then(|s| s["stringData"][r["key"].as_str().unwrap()].as_str())
                        .map(str::to_string);
                    drop(i);
                    let Some(v) = found else {
                        self.publish("MODIFIED", status("Pending", json!({"waiting": {"reason": "CreateContainerConfigError", "message": format!("secret or key {r} not found")}})));
                        return;
                    };
                    v
                }
                None => e["value"].as_str().unwrap_or_default().to_string(),
            };
            cmd.env(e["name"].as_str().unwrap(), value);
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
